package memory

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
)

// Mode is a per-tool override of what the tool's annotations imply.
type Mode int

const (
	// Auto caches a tool whose effective annotations say readOnlyHint
	// (and not an operator's destructiveHint). idempotentHint alone never
	// does: repeating an idempotent call changes nothing more, but
	// skipping it skips the change.
	Auto Mode = iota
	// Never bypasses memory for the tool.
	Never
	// Always caches the tool whatever its annotations say. The operator
	// vouches that calls do not change anything, so a forwarded call of
	// the tool does not invalidate its server either.
	Always
)

// String returns "auto", "never" or "always".
func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case Never:
		return "never"
	case Always:
		return "always"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses a cache mode from config: "auto", "never" or "always".
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto", "":
		return Auto, nil
	case "never":
		return Never, nil
	case "always":
		return Always, nil
	}
	return Auto, fmt.Errorf(`memory: cache mode %q: write "never", "always" or "auto"`, s)
}

// MarshalJSON encodes the mode as its string.
func (m Mode) MarshalJSON() ([]byte, error) { return json.Marshal(m.String()) }

// UnmarshalJSON decodes a mode string with ParseMode.
func (m *Mode) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf(`memory: cache mode %s: write "never", "always" or "auto"`, b)
	}
	v, err := ParseMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Settings are the hot-reloadable rules (config may change while serving):
// swap them with SetSettings.
//
// Patterns are a canonical tool name ("server.tool"), a whole server
// ("server.*") or everything ("*"). The most specific pattern wins:
// exact name, then "server.*", then "*".
type Settings struct {
	// TTL, CommandTTL and CatalogTTL say how long results stay fresh,
	// per pattern: the user's config, `nexus cache ttl`, and the catalog
	// entry a server was installed from. The most specific pattern wins;
	// at the same specificity, config before command before catalog. A
	// tool no pattern covers has no TTL: its results are not kept across
	// calls (see Freshness).
	TTL         map[string]TTL
	CommandTTL  map[string]TTL
	CatalogTTL  map[string]TTL
	Cache       map[string]Mode     // pattern -> never/always
	Invalidate  map[string][]string // mutating canonical tool -> patterns it invalidates
	AgentScoped map[string]bool     // server -> cacheScope "agent"
	// StaleIfError maps patterns to how old an expired (or restarted
	// server's) entry may be and still be served when the child fails:
	// not running, timed out, or a transport error. Never when the child
	// answered.
	StaleIfError map[string]time.Duration

	// Semantic names the free-text arguments compared by similarity, per
	// pattern (config memory.semantic: {"doc-kg.doc_kg_search": ["query"]}).
	// A pattern mapped to an empty list (config [] or false) turns
	// similarity off for the tools it matches. Tools no pattern matches
	// use DefaultFreeTextFields of their input schema.
	Semantic map[string][]string
	// SemanticOff turns similarity off for every tool (config
	// memory.semantic: false): exact hits only.
	SemanticOff bool
	// Rewording keeps a caller from a similarity hit on its own recent
	// entry (the default: the same session, for DefaultRewordingWindow).
	Rewording Rewording
	// Verify samples hits and asks the child too (Memory.Measured).
	Verify Verify
	// MaxFalseHitRate: a tool whose measured false-hit rate of similarity
	// answers is above it (the 95% interval's lower bound) gets no
	// similarity hits until it is back under. 0: no limit.
	MaxFalseHitRate float64
}

// Validate reports patterns that can never match, so config errors surface
// when the config is loaded rather than as silent misses.
func (s Settings) Validate() error {
	var errs []error
	check := func(where, p string) {
		if err := validPattern(p); err != nil {
			errs = append(errs, fmt.Errorf("memory: %s: %w", where, err))
		}
	}
	for p := range s.TTL {
		check("ttl", p)
	}
	for p := range s.CommandTTL {
		check("ttl", p)
	}
	for p := range s.CatalogTTL {
		check("ttl", p)
	}
	for p, d := range s.StaleIfError {
		check("staleIfError", p)
		if d <= 0 {
			errs = append(errs, fmt.Errorf("memory: staleIfError: %s: %v must be positive", p, d))
		}
	}
	for p := range s.Cache {
		check("cache", p)
	}
	for p, fields := range s.Semantic {
		check("semantic", p)
		for _, f := range fields {
			if f == "" {
				errs = append(errs, fmt.Errorf("memory: semantic.%s: empty argument name", p))
			}
		}
	}
	for tool, targets := range s.Invalidate {
		if tool == "" || strings.Contains(tool, "*") {
			errs = append(errs, fmt.Errorf("memory: invalidate: key %q must be a canonical tool name such as \"server.tool\"", tool))
		}
		for _, p := range targets {
			check("invalidate."+tool, p)
		}
	}
	switch s.Rewording.Scope {
	case "", RewordingSession, RewordingAgent, RewordingOff:
	default:
		errs = append(errs, fmt.Errorf(`memory: rewording.scope %q: write "session", "agent" or "off"`, s.Rewording.Scope))
	}
	if s.Verify.Rate < 0 || s.Verify.Rate > 1 || s.Verify.PerMinute < 0 {
		errs = append(errs, fmt.Errorf("memory: verify: rate %v must be within 0 and 1, perMinute %d not negative", s.Verify.Rate, s.Verify.PerMinute))
	}
	if s.MaxFalseHitRate < 0 || s.MaxFalseHitRate > 1 {
		errs = append(errs, fmt.Errorf("memory: maxFalseHitRate %v must be within 0 and 1", s.MaxFalseHitRate))
	}
	if s.Rewording.Window < 0 {
		errs = append(errs, fmt.Errorf("memory: rewording.window %v must not be negative", s.Rewording.Window))
	}
	return errors.Join(errs...)
}

func validPattern(p string) error {
	switch {
	case p == "*":
		return nil
	case p == "" || p == ".*":
		return fmt.Errorf("empty pattern %q: write \"server.tool\", \"server.*\" or \"*\"", p)
	case strings.HasSuffix(p, ".*"):
		if strings.Contains(p[:len(p)-2], "*") {
			return fmt.Errorf("pattern %q: only a trailing \".*\" wildcard is supported", p)
		}
		return nil
	case strings.Contains(p, "*"):
		return fmt.Errorf("pattern %q: only \"server.*\" and \"*\" wildcards are supported", p)
	case !strings.Contains(p, "."):
		return fmt.Errorf("pattern %q: write \"%s.*\" for a whole server or \"server.tool\" for one tool", p, p)
	}
	return nil
}

// rules is an immutable copy of Settings with lookups.
type rules struct {
	s Settings
}

func newRules(s Settings) *rules {
	c := Settings{
		TTL:          maps.Clone(s.TTL),
		CommandTTL:   maps.Clone(s.CommandTTL),
		CatalogTTL:   maps.Clone(s.CatalogTTL),
		Cache:        maps.Clone(s.Cache),
		Invalidate:   make(map[string][]string, len(s.Invalidate)),
		AgentScoped:  maps.Clone(s.AgentScoped),
		StaleIfError: maps.Clone(s.StaleIfError),
		Semantic:     make(map[string][]string, len(s.Semantic)),
		SemanticOff:  s.SemanticOff,
		Rewording:    s.Rewording,
		Verify:       s.Verify,

		MaxFalseHitRate: s.MaxFalseHitRate,
	}
	for k, v := range s.Semantic {
		c.Semantic[k] = append([]string(nil), v...)
	}
	for k, v := range s.Invalidate {
		c.Invalidate[k] = append([]string(nil), v...)
	}
	return &rules{s: c}
}

// lookup finds the most specific pattern for t in m.
func lookup[V any](m map[string]V, t Tool) (V, bool) {
	if v, ok := m[t.Name]; ok {
		return v, true
	}
	if v, ok := m[t.Server+".*"]; ok {
		return v, true
	}
	v, ok := m["*"]
	return v, ok
}

// Where a TTL came from, as Freshness reports it.
const (
	FromConfig  = "config"  // the user's config files ("ttl")
	FromCommand = "command" // `nexus cache ttl`
	FromCatalog = "catalog" // the catalog entry the server was installed from
)

// Freshness returns how long results of t stay fresh and who said so
// ("" and the zero TTL when nobody did: results are not kept). Patterns
// are tried from the most specific ("server.tool", then "server.*", then
// "*"); at each, the user's config, then the command, then the catalog.
func (s Settings) Freshness(t Tool) (TTL, string) {
	sources := [...]struct {
		from string
		m    map[string]TTL
	}{{FromConfig, s.TTL}, {FromCommand, s.CommandTTL}, {FromCatalog, s.CatalogTTL}}
	for _, p := range [...]string{t.Name, t.Server + ".*", "*"} {
		for _, src := range sources {
			if v, ok := src.m[p]; ok {
				return v, src.from
			}
		}
	}
	return TTL{}, ""
}

// Cacheable reports whether results of t may be remembered at all under
// s: its effective annotations say readOnlyHint (or its cache mode is
// "always") and its cache mode is not "never".
func (s Settings) Cacheable(t Tool) bool { return (&rules{s: s}).cacheable(t) }

func (r *rules) ttl(t Tool) TTL {
	v, _ := r.s.Freshness(t)
	return v
}

// staleWindow is how old an entry of t may be and still be served when
// the child fails; 0: never.
func (r *rules) staleWindow(t Tool) time.Duration {
	v, _ := lookup(r.s.StaleIfError, t)
	return v
}

func (r *rules) mode(t Tool) Mode {
	v, _ := lookup(r.s.Cache, t)
	return v
}

// cacheable reports whether results of t may be stored and served.
func (r *rules) cacheable(t Tool) bool {
	switch r.mode(t) {
	case Never:
		return false
	case Always:
		return true
	}
	return t.Annotated && t.ReadOnly && !t.Destructive
}

// invalidates returns the patterns a forwarded call of t makes stale, or
// nil when the call changes nothing memory holds.
func (r *rules) invalidates(t Tool) []string {
	if targets, ok := r.s.Invalidate[t.Name]; ok {
		return targets
	}
	if t.ReadOnly || r.mode(t) == Always {
		return nil
	}
	return []string{t.Server + ".*"}
}

func (r *rules) scope(t Tool, agent string) string {
	if r.s.AgentScoped[t.Server] {
		return "agent:" + agent
	}
	return ""
}
