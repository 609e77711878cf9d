package config

import (
	"fmt"
	"net/url"
	"time"
)

// Audit configures the audit trail: every refused call and every allowed call of a
// tool that is not read-only, kept in NEXUS_HOME (audit.db) or, with the postgres
// memory backend, in the shared database.
type Audit struct {
	// Enabled turns the trail off when false (it is on by default).
	Enabled *bool `json:"enabled,omitempty"`
	// Arguments says what of each call's arguments a record keeps: by default
	// their hash alone (of the redacted arguments); "redacted" (or true) keeps
	// them too, redacted. Arguments may hold what the trail should not.
	Arguments AuditArguments `json:"arguments,omitempty"`
	// Export also writes each record to a JSON Lines file, for a log shipper.
	Export AuditExport `json:"export,omitzero"`
	// MaxAge drops records older than this (default 30 days).
	MaxAge Duration `json:"maxAge,omitzero"`
	// MaxBytes bounds the trail's size (default 64 MiB); the oldest records go first.
	MaxBytes int64 `json:"maxBytes,omitempty"`
}

// AuditArguments is audit.arguments: "" (the hash alone) or "redacted". The
// JSON true and false of earlier configs read as "redacted" and "".
type AuditArguments string

// ArgumentsRedacted keeps the redacted arguments in each record.
const ArgumentsRedacted AuditArguments = "redacted"

// Redacted reports whether records keep the (redacted) arguments.
func (a AuditArguments) Redacted() bool { return a == ArgumentsRedacted }

func (a *AuditArguments) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*a = ArgumentsRedacted
		return nil
	case "false", `"hash"`:
		*a = ""
		return nil
	case `"redacted"`:
		*a = ArgumentsRedacted
		return nil
	}
	return fmt.Errorf(`write "redacted" (records keep the arguments, redacted) or "hash" (their hash alone, the default)`)
}

// AuditExport writes every record of the trail to a file as well, one JSON
// object a line (the schema of docs/operations.md), for a log shipper to follow.
type AuditExport struct {
	// Path is the file; relative to NEXUS_HOME. Empty: no export.
	Path string `json:"path,omitempty"`
	// MaxBytes rotates the file past this size (default 64 MiB): path becomes
	// path.1, path.1 becomes path.2...
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// Keep is how many rotated files are kept (default 3).
	Keep int `json:"keep,omitempty"`
}

// Audit export defaults.
const (
	DefaultAuditExportMaxBytes = 64 << 20
	DefaultAuditExportKeep     = 3
)

// Audit defaults.
const (
	DefaultAuditMaxAge   = 30 * 24 * time.Hour
	DefaultAuditMaxBytes = 64 << 20
	minAuditMaxBytes     = 1 << 20
)

// On reports whether the trail is kept.
func (a Audit) On() bool { return a.Enabled == nil || *a.Enabled }

// Age is MaxAge or its default.
func (a Audit) Age() time.Duration {
	if a.MaxAge.D > 0 {
		return a.MaxAge.D
	}
	return DefaultAuditMaxAge
}

// Bytes is MaxBytes or its default.
func (a Audit) Bytes() int64 {
	if a.MaxBytes > 0 {
		return a.MaxBytes
	}
	return DefaultAuditMaxBytes
}

// Tracing configures OpenTelemetry traces, sent with OTLP over HTTP. Off unless an
// endpoint is set here or in OTEL_EXPORTER_OTLP_ENDPOINT.
type Tracing struct {
	// Endpoint is the OTLP/HTTP collector's base URL, e.g. http://127.0.0.1:4318
	// (spans go to its /v1/traces).
	Endpoint string `json:"endpoint,omitempty"`
}

// buildObserve checks the audit and tracing sections, so that a mistake is found
// when the config is loaded, not by the first serve.
func (m *merger) buildObserve(cfg *Config) {
	m.decodeSection("audit", &cfg.Audit)
	m.decodeSection("tracing", &cfg.Tracing)
	if b := cfg.Audit.MaxBytes; b != 0 && b < minAuditMaxBytes {
		m.errs.add(m.errAt(m.mapFrom["audit"]["maxBytes"], "write a number of bytes of at least 1048576 (default 67108864)", "audit", "maxBytes"))
	}
	if x := cfg.Audit.Export; x.MaxBytes < 0 || x.Keep < 0 || (x.MaxBytes > 0 && x.MaxBytes < 4096) {
		m.errs.add(m.errAt(m.mapFrom["audit"]["export"], "export.maxBytes must be at least 4096 and export.keep not negative", "audit", "export"))
	}
	if ep := cfg.Tracing.Endpoint; ep != "" {
		if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			m.errs.add(m.errAt(m.mapFrom["tracing"]["endpoint"], "write the OTLP/HTTP collector's URL, e.g. http://127.0.0.1:4318", "tracing", "endpoint"))
		}
	}
}
