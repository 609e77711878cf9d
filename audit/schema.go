package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Schema names the version of Entry's fields, carried by every entry: a field
// is only ever added under the same name; renaming or removing one is a new
// schema.
const Schema = "nexus.audit/v1"

// Decisions of an Entry.
const (
	Allowed = "allowed"
	Denied  = "denied"
)

// Entry is the audit record as shipped: one JSON object per decision, with flat,
// snake_case fields a log system indexes without a mapping. `nexus audit --json`
// prints these, one a line; audit.export appends them to a file. The schema is
// documented in docs/operations.md ("The audit record"); a change to it is a
// change to that table and to the golden lines of schema_test.go.
type Entry struct {
	Schema string `json:"schema"`
	// Time is when the request arrived, UTC, RFC 3339 with microseconds.
	Time  string `json:"time"`
	Agent string `json:"agent"`
	// ClientName and ClientVersion are what the client said it is (a hint,
	// never an identity); Session is its session id, or "request ID" for a
	// stateless request. "" when unknown.
	ClientName    string `json:"client_name"`
	ClientVersion string `json:"client_version"`
	Session       string `json:"session"`
	Method        string `json:"method"`
	// Tool is the canonical server.tool ("server.*" for a server's resources,
	// the requested name when it matched no tool); Server its server.
	Tool   string `json:"tool"`
	Server string `json:"server"`
	// ArgumentsSHA256 is the hex SHA-256 of the arguments after redaction ("" when
	// there were none); Arguments are those arguments, only with
	// audit.arguments "redacted".
	ArgumentsSHA256 string          `json:"arguments_sha256"`
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	// Decision is allowed or denied; Rule the rule that decided, in the policy
	// Policy (policy.agents.NAME, policy.default, built-in default), written in
	// the file PolicySource, at the revision PolicyRevision.
	Decision       string `json:"decision"`
	Rule           string `json:"rule"`
	Policy         string `json:"policy"`
	PolicySource   string `json:"policy_source"`
	PolicyRevision string `json:"policy_revision"`
	// Cache is what memory did: hit, semantic_hit, miss, bypass, or none.
	Cache string `json:"cache"`
	// ChildMS is the time spent waiting for the child (0 when memory answered or
	// the call never reached it); DurationMS the whole request.
	ChildMS    float64 `json:"child_ms"`
	DurationMS float64 `json:"duration_ms"`
	// Outcome is ok, tool_error, rpc_error, refused or timeout.
	Outcome string `json:"outcome"`
}

// Entry is r in the shipped schema.
func (r *Record) Entry() Entry {
	e := Entry{Schema: Schema, Time: entryTime(r.Time), Agent: r.Agent,
		ClientName: r.Client, ClientVersion: r.ClientVersion, Session: r.Session, Method: r.Method,
		Tool: r.Tool, Server: r.Server, ArgumentsSHA256: r.ArgumentsHash, Arguments: r.Arguments,
		Decision: Allowed, Rule: r.Rule, Policy: r.Origin, PolicySource: r.Source, PolicyRevision: r.Revision,
		Cache: r.Memory, ChildMS: ms(r.Child), DurationMS: ms(r.Duration), Outcome: r.Outcome}
	if r.Refused {
		e.Decision = Denied
	}
	if e.Cache == "" {
		e.Cache = "none"
	}
	return e
}

// timeLayout is an entry's time: UTC, RFC 3339 with microseconds.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// entryTime is t as an entry gives it (timeLayout). Every call's entry is
// made (the console's ring keeps the last ones), and time.Format took a twentieth
// of a relayed call's CPU: the digits are written here instead, for the years
// four digits hold.
func entryTime(t time.Time) string {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.Format(timeLayout)
	}
	hour, minute, sec := t.Clock()
	var b [27]byte
	put := func(at, width, v int) {
		for i := at + width - 1; i >= at; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, 4, year)
	b[4] = '-'
	put(5, 2, int(month))
	b[7] = '-'
	put(8, 2, day)
	b[10] = 'T'
	put(11, 2, hour)
	b[13] = ':'
	put(14, 2, minute)
	b[16] = ':'
	put(17, 2, sec)
	b[19] = '.'
	put(20, 6, t.Nanosecond()/1000)
	b[26] = 'Z'
	return string(b[:])
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// HashArguments is the ArgumentsHash of redacted arguments: the hex SHA-256 of
// their bytes, "" for none. Hashing after redaction keeps a secret from being
// confirmed by hashing a guess.
func HashArguments(redacted []byte) string {
	if len(redacted) == 0 {
		return ""
	}
	sum := sha256.Sum256(redacted)
	return hex.EncodeToString(sum[:])
}

// Line is e as one line of JSON Lines, newline included.
func (e Entry) Line() []byte {
	b, err := json.Marshal(e)
	if err != nil { // arguments that redaction left invalid JSON: keep the rest
		e.Arguments = nil
		b, _ = json.Marshal(e)
	}
	return append(b, '\n')
}
