package config

import (
	"fmt"
	"time"
)

// Children holds the defaults of every stdio server's life: when it starts, when
// an idle one is stopped and when a long-running one is recycled. Each server may
// say otherwise (Server.Start, Server.IdleTimeout, Server.MaxLifetime).
type Children struct {
	Start       string   `json:"start,omitempty"`
	IdleTimeout Duration `json:"idleTimeout,omitzero"`
	MaxLifetime Duration `json:"maxLifetime,omitzero"`
}

// The values of Start.
const (
	// StartLazy starts a server on the first request that needs it, listing
	// meanwhile what it listed last time. It is the default: a desktop client
	// starts the gateway with itself, and most configured servers are called
	// rarely or never in a session; a server whose lists were never seen starts
	// at once all the same.
	StartLazy = "lazy"
	// StartEager starts a server with the gateway.
	StartEager = "eager"
)

// Lifecycle defaults.
const (
	// DefaultIdleTimeout stops a stdio server that nothing used for that long.
	DefaultIdleTimeout = 10 * time.Minute
	// minLifecycleDuration is the least idle timeout or lifetime: less would
	// stop and start a server between two calls of one agent's turn.
	minLifecycleDuration = time.Second
)

// Lifecycle is what decides a stdio server's life, with the defaults applied.
type Lifecycle struct {
	Lazy        bool
	IdleTimeout time.Duration // 0: never stopped for being idle
	MaxLifetime time.Duration // 0: never recycled
}

// Lifecycle is s's life: its own settings, else the "children" defaults, else
// the built-in ones (lazy, idle for 10 minutes, no recycling). A remote server has
// no process to spare: it connects at start and stays connected.
func (c *Config) Lifecycle(s *Server) Lifecycle {
	if s.Transport != TransportStdio {
		return Lifecycle{}
	}
	start := s.Start
	if start == "" {
		start = c.Children.Start
	}
	idle := DefaultIdleTimeout
	switch {
	case s.IdleTimeout != nil:
		idle = s.IdleTimeout.D
	case c.Children.IdleTimeout.D != 0 || c.childrenIdleSet:
		idle = c.Children.IdleTimeout.D
	}
	life := c.Children.MaxLifetime.D
	if s.MaxLifetime != nil {
		life = s.MaxLifetime.D
	}
	return Lifecycle{Lazy: start != StartEager, IdleTimeout: idle, MaxLifetime: life}
}

// checkStart is the mistake in a "start" value, or nil.
func checkStart(v string) error {
	switch v {
	case "", StartLazy, StartEager:
		return nil
	}
	return fmt.Errorf(`"start" is %q (default: on the first request that needs the server) or %q (with the gateway), not %q`, StartLazy, StartEager, v)
}

// checkLifecycleDuration is the mistake in an idleTimeout or maxLifetime, or nil:
// "0" turns it off.
func checkLifecycleDuration(key string, d time.Duration) error {
	if d != 0 && d < minLifecycleDuration {
		return fmt.Errorf(`%q is a duration of at least 1s ("0" turns it off), not %s`, key, d)
	}
	return nil
}

// buildChildren decodes and checks the "children" section.
func (m *merger) buildChildren(cfg *Config) {
	m.decodeSection("children", &cfg.Children)
	_, cfg.childrenIdleSet = m.maps["children"]["idleTimeout"]
	at := func(key string) string { return m.mapFrom["children"][key] }
	if err := checkStart(cfg.Children.Start); err != nil {
		m.errs.add(m.errAt(at("start"), err.Error(), "children", "start"))
	}
	for key, d := range map[string]time.Duration{"idleTimeout": cfg.Children.IdleTimeout.D, "maxLifetime": cfg.Children.MaxLifetime.D} {
		if err := checkLifecycleDuration(key, d); err != nil {
			m.errs.add(m.errAt(at(key), err.Error(), "children", key))
		}
	}
}
