package aggregation

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/jsonrpc"
	"github.com/nexus-mcp/nexus/policy"
)

var clientNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestWireName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 80)
	tests := []struct {
		prefix, tool, style string
		want                string // "" means: check only validity and stability
	}{
		{"gh", "search", config.ToolNamesWire, "gh__search"},
		{"", "search", config.ToolNamesWire, "search"},
		{"gh", "search", config.ToolNamesDotted, "gh.search"},
		{"gh", "repo.search", config.ToolNamesWire, ""},
		{"gh", "do/that", config.ToolNamesWire, ""},
		{"gh", long, config.ToolNamesWire, ""},
		{"gh", long, config.ToolNamesDotted, ""},
	}
	for _, tc := range tests {
		canonical := "gh." + tc.tool
		got := wireName(tc.prefix, canonical, tc.tool, naming{style: tc.style})
		if tc.want != "" && got != tc.want {
			t.Errorf("wireName(%q, %q, %s) = %q, want %q", tc.prefix, tc.tool, tc.style, got, tc.want)
		}
		if tc.style == config.ToolNamesWire && !clientNameRE.MatchString(got) {
			t.Errorf("wireName(%q, %q) = %q: clients would reject it", tc.prefix, tc.tool, got)
		}
		if len(got) > config.DefaultMaxNameLength {
			t.Errorf("%q is longer than %d", got, config.DefaultMaxNameLength)
		}
		if again := wireName(tc.prefix, canonical, tc.tool, naming{style: tc.style}); again != got {
			t.Errorf("not stable: %q then %q", got, again)
		}
	}
	a := wireName("gh", "gh."+long+"a", long+"a", naming{style: config.ToolNamesWire})
	b := wireName("gh", "gh."+long+"b", long+"b", naming{style: config.ToolNamesWire})
	if a == b {
		t.Errorf("two long names shortened to the same %q", a)
	}
}

// TestWireNameBound: names.maxLength shortens every name past it, with the same
// stable hash, and leaves shorter ones alone.
func TestWireNameBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tool string
		max  int
		want string
	}{
		{"search", 20, "gh__search"},
		{"list_pull_request_review_comments", 64, "gh__list_pull_request_review_comments"},
		{"list_pull_request_review_comments", 30, ""},
		{"list_pull_request_review_comments", 20, ""},
	} {
		got := wireName("gh", "gh."+tc.tool, tc.tool, naming{style: config.ToolNamesWire, max: tc.max})
		if tc.want != "" && got != tc.want || len(got) > tc.max || !clientNameRE.MatchString(got) {
			t.Errorf("wireName(%s, max %d) = %q (%d bytes)", tc.tool, tc.max, got, len(got))
		}
		if tc.want == "" && !strings.HasPrefix(got, "gh__list") {
			t.Errorf("wireName(%s, max %d) = %q: the start should stay readable", tc.tool, tc.max, got)
		}
	}
}

// TestToolOverride: a renamed tool goes by its new name everywhere but towards
// the child, with the operator's title and description.
func TestToolOverride(t *testing.T) {
	t.Parallel()
	srv := &config.Server{Name: "gh", Tools: map[string]config.ToolOverride{
		"create_issue": {Name: "open_ticket", Title: "Open a ticket", Description: "Files a ticket"},
		"list_issues":  {Description: "Lists tickets"},
	}}
	for _, tc := range []struct {
		raw, name, canonical, wire, title, desc string
	}{
		{`{"name":"create_issue","description":"Create an issue"}`, "create_issue", "gh.open_ticket", "gh__open_ticket", "Open a ticket", "Files a ticket"},
		{`{"name":"list_issues","title":"List","description":"List issues"}`, "list_issues", "gh.list_issues", "gh__list_issues", "List", "Lists tickets"},
		{`{"name":"get_issue","description":"Get an issue"}`, "get_issue", "gh.get_issue", "gh__get_issue", "", "Get an issue"},
	} {
		tool, err := newTool(srv, json.RawMessage(tc.raw), naming{style: config.ToolNamesWire})
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name != tc.name || tool.Canonical != tc.canonical || tool.Wire != tc.wire || tool.front.Title != tc.title || tool.front.Description != tc.desc {
			t.Errorf("%s: name %s canonical %s wire %s title %q description %q", tc.raw, tool.Name, tool.Canonical, tool.Wire, tool.front.Title, tool.front.Description)
		}
		if tool.MemoryTool().Name != tc.canonical || tool.policyTool().Name != tc.canonical {
			t.Errorf("%s: memory and policy must see %s", tc.raw, tc.canonical)
		}
	}
}

func mustTool(t *testing.T, server, prefix, raw string) *Tool {
	t.Helper()
	srv := &config.Server{Name: server, Prefix: &prefix}
	tool, err := newTool(srv, json.RawMessage(raw), naming{style: config.ToolNamesWire})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestManifest(t *testing.T) {
	t.Parallel()
	a := mustTool(t, "alpha", "", `{"name":"search","inputSchema":{"type":"object"}}`)
	b := mustTool(t, "beta", "", `{"name":"search","inputSchema":{"type":"object"}}`)
	c := mustTool(t, "beta", "", `{"name":"fetch"}`)
	m, errs := buildManifest(map[string][]*Tool{"alpha": {a}, "beta": {b, c}}, nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "both go by") {
		t.Fatalf("want one collision error, got %v", errs)
	}
	if m.lookup("search") != a || m.lookup("alpha.search") != a || m.lookup("beta.fetch") != c || m.lookup("fetch") != c {
		t.Error("lookup by wire and canonical names")
	}
	for _, bad := range []string{"Search", " search", "alpha.searc", "alpha__search", ""} {
		if m.lookup(bad) != nil {
			t.Errorf("%q resolved to a tool", bad)
		}
	}
	if got := m.suggest(operator(), "serch"); len(got) == 0 || got[0] != "search" {
		t.Errorf("suggest(serch) = %v", got)
	}
}

func TestAnnotationOverrides(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	srv := &config.Server{Name: "kg", Annotations: map[string]config.Annotations{
		"liar":    {ReadOnlyHint: &no},
		"plain":   {ReadOnlyHint: &yes, DestructiveHint: &no},
		"absent":  {},
		"vouched": {DestructiveHint: &yes},
	}}
	tests := []struct {
		raw                            string
		annotated, readOnly, destroyer bool
	}{
		{`{"name":"liar","annotations":{"readOnlyHint":true}}`, true, false, false},
		{`{"name":"plain"}`, true, true, false},
		{`{"name":"other"}`, false, false, false},
		{`{"name":"wiper","annotations":{"readOnlyHint":false,"destructiveHint":true}}`, true, false, true},
		// mcp-go's NewTool default: destructiveHint true next to readOnlyHint true.
		{`{"name":"mcpgo","annotations":{"readOnlyHint":true,"destructiveHint":true}}`, true, true, false},
		{`{"name":"nohint","annotations":{"destructiveHint":true}}`, true, false, true},
		// The operator's destructiveHint wins over the spec's reading.
		{`{"name":"vouched","annotations":{"readOnlyHint":true}}`, true, true, true},
	}
	for _, tc := range tests {
		tool, err := newTool(srv, json.RawMessage(tc.raw), naming{})
		if err != nil {
			t.Fatal(err)
		}
		h := tool.Hints
		if h.Annotated != tc.annotated || h.ReadOnly != tc.readOnly || h.Destructive != tc.destroyer {
			t.Errorf("%s: hints %+v", tc.raw, h)
		}
	}
}

func TestDefaultExpander(t *testing.T) {
	t.Setenv("NEXUS_T_A", "alpha")
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"plain", "plain", true},
		{"${env:NEXUS_T_A}", "alpha", true},
		{"Bearer ${env:NEXUS_T_A}!", "Bearer alpha!", true},
		{"${env:NEXUS_T_UNSET}", "", false},
		{"${env:NEXUS_T_A", "", false},
	}
	for _, tc := range tests {
		got, err := expandEnv(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("expandEnv(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestAgentHint(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Claude Desktop": "claude-desktop", "cursor": "cursor", "  ": "", "!!!": "",
		"e2e-test": "e2e-test", strings.Repeat("a", 40): strings.Repeat("a", 32),
	} {
		if got := agentHint(in); got != want {
			t.Errorf("agentHint(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormaliseArguments(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "{}", "null": "{}", ` {"a":1} `: `{"a":1}`, "[1]": "error", `"s"`: "error", "3": "error"} {
		got, err := normaliseArguments(json.RawMessage(in))
		if want == "error" {
			if err == nil {
				t.Errorf("%q accepted", in)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("normaliseArguments(%q) = %s, %v", in, got, err)
		}
	}
}

// TestBareTool: a child's own tool name finds the tool when exactly one tool of
// that name is one the agent may call; several are an error naming their wire
// names; none is nil, so the caller gives today's unknown-tool answer. A tool the
// agent may not call is no candidate.
func TestBareTool(t *testing.T) {
	t.Parallel()
	aw := mustTool(t, "alpha", "alpha", `{"name":"get-weather"}`)
	ae := mustTool(t, "alpha", "alpha", `{"name":"echo"}`)
	be := mustTool(t, "beta", "beta", `{"name":"echo"}`)
	m, errs := buildManifest(map[string][]*Tool{"alpha": {aw, ae}, "beta": {be}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	both := audienceOf(t, policy.Rules{Allow: []string{"*"}})
	alphaOnly := audienceOf(t, policy.Rules{Allow: []string{"alpha.*"}})
	for _, tc := range []struct {
		name    string
		v       audience
		want    *Tool
		errHas  []string
		noError bool
	}{
		{"get-weather", both, aw, nil, true},
		{"echo", both, nil, []string{"ambiguous", `"alpha__echo"`, `"beta__echo"`}, false},
		{"echo", alphaOnly, ae, nil, true},
		{"nothing", both, nil, nil, true},
		{"alpha__echo", both, nil, nil, true}, // a wire name is not a child's name
	} {
		got, err := m.bareTool(tc.v, tc.name)
		if got != tc.want || (err == nil) != tc.noError {
			t.Errorf("bareTool(%q) = %v, %v", tc.name, got, err)
			continue
		}
		for _, s := range tc.errHas {
			if !strings.Contains(err.Message, s) || err.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("bareTool(%q): the error %d %q does not say %s", tc.name, err.Code, err.Message, s)
			}
		}
	}
}

// audienceOf is the audience of an agent under default rules r.
func audienceOf(t *testing.T, r policy.Rules) audience {
	t.Helper()
	pol, err := policy.Compile(policy.Config{Default: &r})
	if err != nil {
		t.Fatal(err)
	}
	return audience{pol: pol, agent: "a"}
}

// TestSuggestNamesEachCallableToolOnce: "did you mean" names a tool once, by the
// closer of its two names, and never a tool the agent may not call.
func TestSuggestNamesEachCallableToolOnce(t *testing.T) {
	rf := mustTool(t, "fs", "fs", `{"name":"read_file","annotations":{"readOnlyHint":true}}`)
	wf := mustTool(t, "fs", "fs", `{"name":"write_file"}`)
	m, errs := buildManifest(map[string][]*Tool{"fs": {rf, wf}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	readOnly := audienceOf(t, policy.Rules{Allow: []string{"@readonly"}})
	for _, tc := range []struct {
		name string
		a    audience
		want []string
	}{
		{"fs.read_fil", readOnly, []string{"fs.read_file"}},
		{"fs__read_fil", readOnly, []string{"fs__read_file"}},
		{"fs.write_fil", readOnly, []string{"fs.read_file"}},
		{"fs.write_fil", operator(), []string{"fs.write_file", "fs.read_file"}},
	} {
		if got := m.suggest(tc.a, tc.name); !slices.Equal(got, tc.want) {
			t.Errorf("suggest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSameTools(t *testing.T) {
	t.Parallel()
	a := &Tool{Raw: json.RawMessage(`{"name":"a"}`)}
	a2 := &Tool{Raw: json.RawMessage(`{"name":"a"}`)} // listed again, alike
	b := &Tool{Raw: json.RawMessage(`{"name":"b"}`)}
	changed := &Tool{Raw: json.RawMessage(`{"name":"a","description":"x"}`)}
	for _, tc := range []struct {
		name string
		x, y []*Tool
		want bool
	}{
		{"the same list", []*Tool{a, b}, []*Tool{a, b}, true},
		{"listed again alike", []*Tool{a, b}, []*Tool{a2, b}, true},
		{"a tool changed", []*Tool{a, b}, []*Tool{changed, b}, false},
		{"a tool more", []*Tool{a}, []*Tool{a, b}, false},
		{"a tool fewer", []*Tool{a, b}, []*Tool{a}, false},
		{"reordered", []*Tool{a, b}, []*Tool{b, a}, false},
		{"none and none", []*Tool{}, nil, true},
	} {
		if got := sameTools(tc.x, tc.y); got != tc.want {
			t.Errorf("%s: sameTools = %v, want %v", tc.name, got, tc.want)
		}
	}
}
