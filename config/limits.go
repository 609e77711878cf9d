package config

import (
	"fmt"
	"time"
)

// Limits bound what one client, one agent or one child can make the gateway hold:
// a gateway that serves many agents must not be exhausted by one of them. Every
// field is optional; zero means the default.
type Limits struct {
	// MaxBatchMessages bounds the messages of one JSON-RPC batch (default 256).
	MaxBatchMessages int `json:"maxBatchMessages,omitempty"`
	// MaxBatchAnswerBytes bounds the answers of one batch together (default 64 MiB);
	// the answers past it are replaced by an error each.
	MaxBatchAnswerBytes int64 `json:"maxBatchAnswerBytes,omitempty"`
	// MaxCallsPerSession bounds the requests one session has in flight (default 64).
	MaxCallsPerSession int `json:"maxCallsPerSession,omitempty"`
	// MaxSessions bounds the live HTTP sessions (default 1000).
	MaxSessions int `json:"maxSessions,omitempty"`
	// MaxSessionsPerAgent bounds the HTTP sessions of one agent. Unset, an agent's
	// share is MaxSessions / (configured agents + 1), at least 8.
	MaxSessionsPerAgent int `json:"maxSessionsPerAgent,omitempty"`
	// SessionIdleTimeout ends an HTTP session that received no request for that long
	// (default 1h), open stream or not.
	SessionIdleTimeout Duration `json:"sessionIdleTimeout,omitzero"`
	// MaxChildRequests bounds the requests one child connection has waiting on
	// clients at once (sampling, elicitation, roots; default 16).
	MaxChildRequests int `json:"maxChildRequests,omitempty"`
	// MaxChildRequestsPerClient bounds the requests of one child connection waiting
	// on one client session at once (default 8), so that one client cannot take
	// the whole of MaxChildRequests.
	MaxChildRequestsPerClient int `json:"maxChildRequestsPerClient,omitempty"`
	// ChildRequestTimeout bounds how long a child's request waits for a client
	// (default 10m): past it the child gets an error.
	ChildRequestTimeout Duration `json:"childRequestTimeout,omitzero"`
	// ChildRequestTurn bounds how long a client may keep a child's request while
	// another client's request to that child waits for it (default 10s): a stdio
	// child's request does not say which call it belongs to, so it is forwarded
	// only while one client has calls there, and its clients take turns.
	ChildRequestTurn Duration `json:"childRequestTurn,omitzero"`
}

// Limit defaults.
const (
	DefaultMaxBatchMessages    = 256
	DefaultMaxBatchAnswerBytes = 64 << 20
	DefaultMaxCallsPerSession  = 64
	DefaultMaxSessions         = 1000
	DefaultSessionIdleTimeout  = time.Hour
	DefaultMaxChildRequests    = 16
	DefaultMaxChildRequestsPer = 8
	DefaultChildRequestTimeout = 10 * time.Minute
	DefaultChildRequestTurn    = 10 * time.Second
	// MinSessionsPerAgent is the least fair share of sessions an agent gets, however
	// many agents are configured.
	MinSessionsPerAgent = 8
	minBatchAnswerBytes = 64 << 10
)

// BatchMessages is MaxBatchMessages or its default.
func (l Limits) BatchMessages() int { return orDefault(l.MaxBatchMessages, DefaultMaxBatchMessages) }

// BatchAnswerBytes is MaxBatchAnswerBytes or its default.
func (l Limits) BatchAnswerBytes() int64 {
	return orDefault(l.MaxBatchAnswerBytes, DefaultMaxBatchAnswerBytes)
}

// CallsPerSession is MaxCallsPerSession or its default.
func (l Limits) CallsPerSession() int {
	return orDefault(l.MaxCallsPerSession, DefaultMaxCallsPerSession)
}

// Sessions is MaxSessions or its default.
func (l Limits) Sessions() int { return orDefault(l.MaxSessions, DefaultMaxSessions) }

// SessionsPerAgent is MaxSessionsPerAgent, or the fair share of sessions (the
// session bound divided among the agents, plus one share left free) when unset.
func (l Limits) SessionsPerAgent(sessions, agents int) int {
	if l.MaxSessionsPerAgent > 0 {
		return l.MaxSessionsPerAgent
	}
	return max(sessions/(agents+1), MinSessionsPerAgent)
}

// IdleTimeout is SessionIdleTimeout or its default.
func (l Limits) IdleTimeout() time.Duration {
	return orDefault(l.SessionIdleTimeout.D, DefaultSessionIdleTimeout)
}

// ChildRequests is MaxChildRequests or its default.
func (l Limits) ChildRequests() int { return orDefault(l.MaxChildRequests, DefaultMaxChildRequests) }

// ChildRequestsPerClient is MaxChildRequestsPerClient or its default.
func (l Limits) ChildRequestsPerClient() int {
	return orDefault(l.MaxChildRequestsPerClient, DefaultMaxChildRequestsPer)
}

// ChildRequestWait is ChildRequestTimeout or its default.
func (l Limits) ChildRequestWait() time.Duration {
	return orDefault(l.ChildRequestTimeout.D, DefaultChildRequestTimeout)
}

// ChildRequestHold is ChildRequestTurn or its default.
func (l Limits) ChildRequestHold() time.Duration {
	return orDefault(l.ChildRequestTurn.D, DefaultChildRequestTurn)
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// buildLimits checks the limits section, so that a mistake is found when the config
// is loaded, not when the bound is first reached.
func (m *merger) buildLimits(cfg *Config) {
	m.decodeSection("limits", &cfg.Limits)
	l := cfg.Limits
	atLeast := func(key string, v, least, def int64) {
		if v != 0 && v < least {
			m.errs.add(m.errAt(m.mapFrom["limits"][key], fmt.Sprintf("write a number of at least %d (default %d)", least, def), "limits", key))
		}
	}
	atLeast("maxBatchMessages", int64(l.MaxBatchMessages), 1, DefaultMaxBatchMessages)
	atLeast("maxBatchAnswerBytes", l.MaxBatchAnswerBytes, minBatchAnswerBytes, DefaultMaxBatchAnswerBytes)
	atLeast("maxCallsPerSession", int64(l.MaxCallsPerSession), 1, DefaultMaxCallsPerSession)
	atLeast("maxSessions", int64(l.MaxSessions), 1, DefaultMaxSessions)
	atLeast("maxChildRequests", int64(l.MaxChildRequests), 1, DefaultMaxChildRequests)
	atLeast("maxChildRequestsPerClient", int64(l.MaxChildRequestsPerClient), 1, DefaultMaxChildRequestsPer)
	if l.MaxSessionsPerAgent < 0 {
		m.errs.add(m.errAt(m.mapFrom["limits"]["maxSessionsPerAgent"], "write a number of at least 1 (unset: a fair share of maxSessions)", "limits", "maxSessionsPerAgent"))
	}
	if d := l.SessionIdleTimeout.D; d != 0 && d < time.Second {
		m.errs.add(m.errAt(m.mapFrom["limits"]["sessionIdleTimeout"], `write a duration of at least 1s (default "1h")`, "limits", "sessionIdleTimeout"))
	}
	positive := func(key string, d time.Duration, def string) {
		if d < 0 {
			m.errs.add(m.errAt(m.mapFrom["limits"][key], fmt.Sprintf("write a positive duration (default %q)", def), "limits", key))
		}
	}
	positive("childRequestTimeout", l.ChildRequestTimeout.D, "10m")
	positive("childRequestTurn", l.ChildRequestTurn.D, "10s")
}
