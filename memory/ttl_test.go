package memory

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseTTL(t *testing.T) {
	tests := []struct {
		in   string
		want TTL
	}{
		{`"30s"`, TTL{D: 30 * time.Second}},
		{`"5m"`, TTL{D: 5 * time.Minute}},
		{`"12h"`, TTL{D: 12 * time.Hour}},
		{`"1d"`, TTL{D: 24 * time.Hour}},
		{`"1.5d"`, TTL{D: 36 * time.Hour}},
		{`"1d12h"`, TTL{D: 36 * time.Hour}},
		{`"1h30m"`, TTL{D: 90 * time.Minute}},
		{`"250ms"`, TTL{D: 250 * time.Millisecond}},
		{`30000`, TTL{D: 30 * time.Second}},
		{`1.5`, TTL{D: 1500 * time.Microsecond}},
		{`"never"`, TTL{Never: true}},
		{`"Never"`, TTL{Never: true}},
		{` "5m" `, TTL{D: 5 * time.Minute}},
	}
	for _, tt := range tests {
		got, err := ParseTTL(json.RawMessage(tt.in))
		if err != nil {
			t.Errorf("ParseTTL(%s): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseTTL(%s) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseTTLErrors(t *testing.T) {
	tests := []struct{ in, mention string }{
		{``, "never"},
		{`""`, "never"},
		{`"5 minutes"`, `"5m"`},
		{`"forever"`, `"never"`},
		{`"0s"`, "positive"},
		{`0`, "positive"},
		{`-5`, "positive"},
		{`"-5m"`, "positive"},
		{`"1d-5h"`, "positive"},
		{`"xd"`, "day"},
		{`true`, "number"},
		{`null`, "number"},
		{`{"ttl":"5m"}`, "number"},
		{`1e30`, "never"},
		{`"999999999d"`, "never"},
	}
	for _, tt := range tests {
		got, err := ParseTTL(json.RawMessage(tt.in))
		if err == nil {
			t.Errorf("ParseTTL(%s) = %+v, want error", tt.in, got)
			continue
		}
		if !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("ParseTTL(%s) error %q does not mention %q", tt.in, err, tt.mention)
		}
	}
}

func TestTTLJSON(t *testing.T) {
	var cfg struct {
		TTL   map[string]TTL  `json:"ttl"`
		Cache map[string]Mode `json:"cache"`
	}
	in := `{"ttl":{"code-kg.kg_latest_graph":"5m","doc-kg.*":"1h","*":30000,"x.y":"never"},"cache":{"a.b":"never","a.*":"always"}}`
	if err := json.Unmarshal([]byte(in), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.TTL["doc-kg.*"].D != time.Hour || cfg.TTL["*"].D != 30*time.Second || !cfg.TTL["x.y"].Never {
		t.Errorf("decoded %+v", cfg.TTL)
	}
	if cfg.Cache["a.b"] != Never || cfg.Cache["a.*"] != Always {
		t.Errorf("decoded %+v", cfg.Cache)
	}
	out, err := json.Marshal(cfg.TTL["x.y"])
	if err != nil || string(out) != `"never"` {
		t.Errorf("Marshal never = %s, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"cache":{"a.b":"sometimes"}}`), &cfg); err == nil {
		t.Error("bad mode accepted")
	}
}

func TestTTLPrecedence(t *testing.T) {
	s := Settings{TTL: map[string]TTL{
		"code-kg.kg_latest_graph": {D: 5 * time.Minute},
		"code-kg.*":               {D: time.Hour},
		"*":                       {D: 30 * time.Second},
		"doc-kg.pinned":           {Never: true},
	}}
	r := newRules(s)
	tool := func(server, name string) Tool { return Tool{Name: server + "." + name, Server: server} }
	tests := []struct {
		t    Tool
		want TTL
	}{
		{tool("code-kg", "kg_latest_graph"), TTL{D: 5 * time.Minute}},
		{tool("code-kg", "kg_other"), TTL{D: time.Hour}},
		{tool("doc-kg", "search"), TTL{D: 30 * time.Second}},
		{tool("doc-kg", "pinned"), TTL{Never: true}},
	}
	for _, tt := range tests {
		if got := r.ttl(tt.t); got != tt.want {
			t.Errorf("ttl(%s) = %v, want %v", tt.t.Name, got, tt.want)
		}
	}
	if got := newRules(Settings{}).ttl(tool("a", "b")); got.Keeps() {
		t.Errorf("no ttl given = %v, want none (not kept)", got)
	}
	// Settings are copied: mutating the caller's map changes nothing.
	s.TTL["*"] = TTL{D: time.Hour}
	if got := r.ttl(tool("doc-kg", "search")); got != (TTL{D: 30 * time.Second}) {
		t.Errorf("rules changed with caller's map: %v", got)
	}
}

func TestSettingsValidate(t *testing.T) {
	good := Settings{
		TTL:        map[string]TTL{"a.b": {D: time.Second}, "a.*": {D: time.Second}, "*": {D: time.Second}},
		Invalidate: map[string][]string{"a.write": {"a.read", "b.*"}},
	}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for _, bad := range []Settings{
		{TTL: map[string]TTL{"a*": {}}},
		{Cache: map[string]Mode{"server": Never}},
		{Invalidate: map[string][]string{"a.*": {"a.b"}}},
		{Invalidate: map[string][]string{"a.w": {"*.b"}}},
		{StaleIfError: map[string]time.Duration{"a.*": 0}},
		{StaleIfError: map[string]time.Duration{"a": time.Minute}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}

func TestCacheable(t *testing.T) {
	type ann struct{ annotated, ro, idem, destr bool }
	tests := []struct {
		name string
		a    ann
		mode Mode
		want bool
		inv  bool // a forwarded call invalidates
	}{
		{"unannotated", ann{}, Auto, false, true},
		{"read-only", ann{true, true, false, false}, Auto, true, false},
		{"idempotent alone is not read-only", ann{true, false, true, false}, Auto, false, true},
		{"read-only destructive", ann{true, true, false, true}, Auto, false, false},
		{"idempotent destructive", ann{true, false, true, true}, Auto, false, true},
		{"annotated mutating", ann{true, false, false, false}, Auto, false, true},
		{"read-only never", ann{true, true, false, false}, Never, false, false},
		{"unannotated always", ann{}, Always, true, false},
		{"destructive always", ann{true, false, false, true}, Always, true, false},
		{"mutating never", ann{true, false, false, false}, Never, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := Tool{Name: "s.t", Server: "s", Annotated: tt.a.annotated, ReadOnly: tt.a.ro, Idempotent: tt.a.idem, Destructive: tt.a.destr}
			for _, pattern := range []string{"s.t", "s.*", "*"} {
				r := newRules(Settings{Cache: map[string]Mode{pattern: tt.mode}})
				if got := r.cacheable(tool); got != tt.want {
					t.Errorf("pattern %q: cacheable = %v, want %v", pattern, got, tt.want)
				}
				if got := r.invalidates(tool) != nil; got != tt.inv {
					t.Errorf("pattern %q: invalidates = %v, want %v", pattern, got, tt.inv)
				}
			}
		})
	}
	// Exact beats server beats "*".
	r := newRules(Settings{Cache: map[string]Mode{"s.t": Always, "s.*": Never, "*": Never}})
	if !r.cacheable(Tool{Name: "s.t", Server: "s"}) || r.cacheable(Tool{Name: "s.u", Server: "s", Annotated: true, ReadOnly: true}) {
		t.Error("cache mode precedence wrong")
	}
}

func TestFreshnessSources(t *testing.T) {
	s := Settings{
		TTL:        map[string]TTL{"fs.read": {D: time.Minute}, "*": {D: 2 * time.Minute}},
		CommandTTL: map[string]TTL{"fs.*": {D: time.Hour}, "fs.read": {D: 3 * time.Hour}, "kg.*": {D: 4 * time.Hour}},
		CatalogTTL: map[string]TTL{"kg.*": {D: 5 * time.Hour}, "kg.summary": {D: 6 * time.Hour}, "docs.*": {Never: true}},
	}
	tool := func(server, name string) Tool { return Tool{Name: server + "." + name, Server: server} }
	for _, tt := range []struct {
		t    Tool
		want TTL
		from string
	}{
		{tool("fs", "read"), TTL{D: time.Minute}, FromConfig},       // config beats command at one specificity
		{tool("fs", "list"), TTL{D: time.Hour}, FromCommand},        // server.* beats config's "*"
		{tool("kg", "summary"), TTL{D: 6 * time.Hour}, FromCatalog}, // the exact name wins whoever gave it
		{tool("kg", "graph"), TTL{D: 4 * time.Hour}, FromCommand},   // command beats catalog
		{tool("docs", "search"), TTL{Never: true}, FromCatalog},     //
		{tool("other", "x"), TTL{D: 2 * time.Minute}, FromConfig},   // "*"
		{Tool{Name: "y.z", Server: "y"}, TTL{D: 2 * time.Minute}, FromConfig},
	} {
		got, from := s.Freshness(tt.t)
		if got != tt.want || from != tt.from {
			t.Errorf("Freshness(%s) = %v from %q, want %v from %q", tt.t.Name, got, from, tt.want, tt.from)
		}
	}
	if got, from := (Settings{}).Freshness(tool("a", "b")); got.Keeps() || from != "" {
		t.Errorf("nobody said: %v from %q", got, from)
	}
}

func TestTTLString(t *testing.T) {
	for _, tt := range []struct {
		ttl  TTL
		want string
	}{
		{TTL{D: 5 * time.Minute}, "5m"},
		{TTL{D: time.Hour}, "1h"},
		{TTL{D: 90 * time.Minute}, "1h30m"},
		{TTL{D: 90 * time.Second}, "1m30s"},
		{TTL{D: 500 * time.Millisecond}, "500ms"},
		{TTL{D: 24 * time.Hour}, "1d"},
		{TTL{D: 26 * time.Hour}, "1d2h"},
		{TTL{D: 24*time.Hour + time.Second}, "1d1s"},
		{TTL{Never: true}, "never"},
		{TTL{}, "none"},
	} {
		got := tt.ttl.String()
		if got != tt.want {
			t.Errorf("%v: %q, want %q", tt.ttl.D, got, tt.want)
		}
		if tt.ttl.Keeps() {
			back, err := ParseTTL([]byte(`"` + got + `"`))
			if err != nil || back != tt.ttl {
				t.Errorf("%q reads back as %v, %v", got, back, err)
			}
		}
	}
}
