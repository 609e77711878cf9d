package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Status configures who may see the status page (/) and the metrics (/metrics).
type Status struct {
	// Public serves both without a token to whoever reaches the address (the
	// Host and Origin checks still apply). Off by default: the page names the
	// servers, their errors, the agents and what each may call, and only a holder
	// of an agent token gets it.
	Public bool `json:"public,omitempty"`
}

// HTTP configures the streamable HTTP front.
type HTTP struct {
	// AllowedOrigins are the browser origins ("https://app.example",
	// "http://localhost:3000") accepted besides the front's own: a web page
	// served from any other origin, another port of this machine included, is
	// refused.
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
}

// Reload configures how a serving gateway follows its config files.
type Reload struct {
	// MissingGrace is how long a config file that existed may be missing before
	// the gateway applies its absence (default 1 minute). An editor that saves by
	// deleting and rewriting, or a sync tool, removes the file for a moment; read
	// as empty, that would stop every child and drop every token.
	MissingGrace Duration `json:"missingGrace,omitzero"`
}

// DefaultMissingGrace is Reload.MissingGrace when unset.
const DefaultMissingGrace = time.Minute

// Grace is MissingGrace or its default.
func (r Reload) Grace() time.Duration {
	if r.MissingGrace.D > 0 {
		return r.MissingGrace.D
	}
	return DefaultMissingGrace
}

// OriginAllowed reports whether origin (an Origin header) is one AllowedOrigins
// lists. Origins are compared as browsers send them: scheme, host and port,
// case-insensitively.
func (h HTTP) OriginAllowed(origin string) bool {
	for _, o := range h.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// buildExposure checks the status, http and reload sections.
func (m *merger) buildExposure(cfg *Config) {
	m.decodeSection("status", &cfg.Status)
	m.decodeSection("http", &cfg.HTTP)
	m.decodeSection("reload", &cfg.Reload)
	for i, o := range cfg.HTTP.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			e := m.errAt(m.mapFrom["http"]["allowedOrigins"], err.Error(), "http", "allowedOrigins")
			e.Key = fmt.Sprintf("http.allowedOrigins[%d]", i)
			m.errs.add(e)
		}
	}
}

// checkOrigin accepts what a browser sends as Origin: scheme://host[:port].
func checkOrigin(o string) error {
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%q is not an origin; write scheme://host[:port], e.g. \"https://app.example\" or \"http://localhost:3000\"", o)
	}
	return nil
}
