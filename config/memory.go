package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/embedder"
)

// MemoryRules are the config's ttl, cache, invalidate, cacheScope and
// memory.semantic keys as memory's typed settings, parsed once when the config was
// loaded: a config that loads has rules memory accepts, so serve never has to drop
// them at run time.
func (c *Config) MemoryRules() memory.Settings { return c.memRules }

// SetTTLSources adds the result lifetimes that come from outside the config files:
// those set with `nexus cache ttl` and those the catalog suggests for the servers
// installed from it. The config's own ttl wins over both (memory.Settings.Freshness).
func (c *Config) SetTTLSources(command, catalog map[string]memory.TTL) {
	c.memRules.CommandTTL = maps.Clone(command)
	c.memRules.CatalogTTL = maps.Clone(catalog)
}

// buildMemoryRules parses the memory settings with memory's own parsers, recording
// each mistake under its key.
func (m *merger) buildMemoryRules(cfg *Config) {
	s := memory.Settings{TTL: map[string]memory.TTL{}, Cache: map[string]memory.Mode{},
		Invalidate: cfg.Invalidate, AgentScoped: map[string]bool{}}
	bad := func(section, key string, err error) {
		msg := strings.TrimPrefix(err.Error(), "memory: ")
		m.errs.add(m.errAt(m.mapFrom[section][key], msg, section, key))
	}
	for _, pattern := range slices.Sorted(maps.Keys(cfg.TTL)) {
		ttl, err := memory.ParseTTL(cfg.TTL[pattern])
		if err == nil {
			err = patternError(memory.Settings{TTL: map[string]memory.TTL{pattern: ttl}}.Validate())
		}
		if err != nil {
			bad("ttl", pattern, err)
			continue
		}
		s.TTL[pattern] = ttl
	}
	for _, pattern := range slices.Sorted(maps.Keys(cfg.StaleIfError)) {
		d, err := ParseDuration(cfg.StaleIfError[pattern])
		if err == nil && d <= 0 {
			err = errors.New("must be positive")
		}
		if err == nil {
			err = patternError(memory.Settings{StaleIfError: map[string]time.Duration{pattern: d}}.Validate())
		}
		if err != nil {
			bad("staleIfError", pattern, fmt.Errorf(`%v: write how old an answer may be when the server fails, e.g. "30m" or "1d"`, err))
			continue
		}
		if s.StaleIfError == nil {
			s.StaleIfError = map[string]time.Duration{}
		}
		s.StaleIfError[pattern] = d
	}
	for _, pattern := range slices.Sorted(maps.Keys(cfg.Cache)) {
		v := cfg.Cache[pattern]
		mode, err := memory.ParseMode(v)
		if err != nil || (v != "never" && v != "always") {
			bad("cache", pattern, fmt.Errorf(`write "never" or "always", not %q`, v))
			continue
		}
		if err := patternError(memory.Settings{Cache: map[string]memory.Mode{pattern: mode}}.Validate()); err != nil {
			bad("cache", pattern, err)
			continue
		}
		s.Cache[pattern] = mode
	}
	for _, tool := range slices.Sorted(maps.Keys(cfg.Invalidate)) {
		one := memory.Settings{Invalidate: map[string][]string{tool: cfg.Invalidate[tool]}}
		if err := patternError(one.Validate()); err != nil {
			bad("invalidate", tool, err)
		}
	}
	for name, srv := range cfg.Servers {
		if srv.CacheScope == "agent" {
			s.AgentScoped[name] = true
		}
	}
	m.semanticRules(cfg.Memory.Semantic, &s)
	if rw := cfg.Memory.Rewording; rw != nil {
		s.Rewording = memory.Rewording{Scope: rw.Scope, Window: rw.Window.D}
		if err := (memory.Settings{Rewording: s.Rewording}).Validate(); err != nil {
			m.errs.add(m.errAt(m.mapFrom["memory"]["rewording"], err.Error(), "memory", "rewording"))
		}
	}
	if v := cfg.Memory.Verify; v != nil {
		s.Verify = memory.Verify{Rate: v.Rate, PerMinute: v.PerMinute}
	}
	s.MaxFalseHitRate = cfg.Memory.MaxFalseHitRate
	if err := (memory.Settings{Verify: s.Verify, MaxFalseHitRate: s.MaxFalseHitRate}).Validate(); err != nil {
		m.errs.add(m.errAt(m.mapFrom["memory"]["verify"], err.Error(), "memory", "verify"))
	}
	m.checkBackend(cfg.Memory)
	m.checkModels(cfg.Memory)
	cfg.memRules = s
}

// checkBackend checks memory.backend and memory.dsn, so a typo is found by
// validate instead of by the first serve.
func (m *merger) checkBackend(mem Memory) {
	file := func(key string) string { return m.mapFrom["memory"][key] }
	switch mem.Backend {
	case "", BackendSQLite:
		if mem.DSN != "" {
			m.errs.add(m.errAt(file("dsn"), `dsn is only read with "backend": "postgres"; remove it or set the backend`, "memory", "dsn"))
		}
	case BackendPostgres:
		if mem.DSN == "" {
			m.errs.add(m.errAt(file("backend"), `the postgres backend needs "dsn", e.g. "${env:NEXUS_PG_DSN}"`, "memory", "backend"))
		}
	default:
		m.errs.add(m.errAt(file("backend"), fmt.Sprintf(`write "sqlite" (default) or "postgres", not %q`, mem.Backend), "memory", "backend"))
	}
}

// checkModels builds the embedder and the verifier the way serve does (with the
// API key left unresolved: references are checked by doctor, against the store)
// and checks the thresholds, so that a provider typo or a missing model fails
// validate, doctor and serve alike.
func (m *merger) checkModels(mem Memory) {
	file := func(key string) string { return m.mapFrom["memory"][key] }
	if em := mem.Embedder; em != nil {
		hc := embedder.HTTPConfig{BaseURL: em.BaseURL, Model: em.Model, Dims: em.Dims}
		if _, err := embedder.New(embedder.Config{Provider: em.Provider, HTTPConfig: hc}); err != nil {
			m.errs.add(m.errAt(file("embedder"), strings.TrimPrefix(err.Error(), "memory: "), "memory", "embedder"))
		}
		if em.Dims < 0 {
			m.errs.add(m.errAt(file("embedder"), "dims is a positive number of dimensions, or left out", "memory", "embedder"))
		}
	}
	if v := mem.Verifier; v != nil {
		if _, err := embedder.NewChatVerifier(embedder.HTTPConfig{BaseURL: v.BaseURL, Model: v.Model}); err != nil {
			m.errs.add(m.errAt(file("verifier"), strings.TrimPrefix(err.Error(), "memory: "), "memory", "verifier"))
		}
	}
	if th := mem.Thresholds; th != nil {
		if err := (memory.Thresholds{Serve: th.Serve, Verify: th.Verify}).Validate(); err != nil {
			m.errs.add(m.errAt(file("thresholds"), strings.TrimPrefix(err.Error(), "memory: thresholds "), "memory", "thresholds"))
		}
	}
}

// patternError strips the "memory: ttl: " prefix of a one-entry Validate, whose
// entry the caller's key already names.
func patternError(err error) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "memory: ")
	for _, section := range []string{"ttl: ", "staleIfError: ", "cache: ", "semantic: ", "invalidate: "} {
		msg = strings.TrimPrefix(msg, section)
	}
	return fmt.Errorf("%s", msg)
}

// semanticRules reads memory.semantic: false, or tool patterns mapped to their
// free-text argument names (false or [] turns a tool off).
func (m *merger) semanticRules(sem json.RawMessage, s *memory.Settings) {
	if len(sem) == 0 {
		return
	}
	file := m.mapFrom["memory"]["semantic"]
	var on bool
	if json.Unmarshal(sem, &on) == nil {
		s.SemanticOff = !on
		return
	}
	var per map[string]json.RawMessage
	if err := json.Unmarshal(sem, &per); err != nil {
		m.errs.add(m.errAt(file, `write false, or {"server.tool": ["field", ...]} (false or [] turns a tool off)`, "memory", "semantic"))
		return
	}
	s.Semantic = map[string][]string{}
	for _, pattern := range slices.Sorted(maps.Keys(per)) {
		var fields []string
		if json.Unmarshal(per[pattern], &on) == nil && !on {
			s.Semantic[pattern] = []string{}
			continue
		}
		err := json.Unmarshal(per[pattern], &fields)
		if err == nil {
			err = patternError(memory.Settings{Semantic: map[string][]string{pattern: fields}}.Validate())
		} else {
			err = fmt.Errorf("write a list of argument names, or false")
		}
		if err != nil {
			m.errs.add(m.errAt(file, err.Error(), "memory", "semantic", pattern))
			continue
		}
		s.Semantic[pattern] = fields
	}
}
