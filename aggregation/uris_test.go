package aggregation

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestNamespacedRoundTrip: every namespaced form keeps the original's scheme when it
// has one, and gives back its server and the original byte for byte.
func TestNamespacedRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ server, uri, want string }{
		{"weather", "ui://weather/app.html", "ui://nexus/weather/ui://weather/app.html"},
		{"alpha", "file:///etc/x", "file://nexus/alpha/file:///etc/x"},
		{"b-2", "shared://doc?q=1#top", "shared://nexus/b-2/shared://doc?q=1#top"},
		{"alpha", "{+base}/item/{id}", "nexus://nexus/alpha/{+base}/item/{id}"},
		{"alpha", "urn:isbn:0451450523", "urn://nexus/alpha/urn:isbn:0451450523"},
	} {
		got := namespaced(tc.server, tc.uri)
		if got != tc.want {
			t.Errorf("namespaced(%q, %q) = %q, want %q", tc.server, tc.uri, got, tc.want)
		}
		server, orig, ok := splitNamespaced(got)
		if !ok || server != tc.server || orig != tc.uri {
			t.Errorf("splitNamespaced(%q) = %q, %q, %v", got, server, orig, ok)
		}
	}
	for _, plain := range []string{
		"ui://weather/app.html",
		"ui://nexus/Bad_Name/ui://x",   // not a server name
		"ui://nexus/alpha/file:///x",   // the scheme is not the original's
		"ui://nexus/alpha/",            // nothing namespaced
		"://nexus/alpha/ui://x",        // no scheme
		"mem://nexus/alpha-no-slash",   // no original
		"http://nexus/alpha/https://x", // http is not https
	} {
		if s, o, ok := splitNamespaced(plain); ok {
			t.Errorf("splitNamespaced(%q) = %q, %q: want not namespaced", plain, s, o)
		}
	}
}

// TestNamespacedTemplateExpands: a namespaced template is a URI template whose
// expansions are the namespaced forms of the original's expansions.
func TestNamespacedTemplateExpands(t *testing.T) {
	t.Parallel()
	var parsed mcp.ResourceTemplate
	ns := namespaced("c", "shared://item/{id}")
	if err := json.Unmarshal([]byte(`{"uriTemplate":`+quoteJSON(ns)+`,"name":"item"}`), &parsed); err != nil {
		t.Fatalf("the namespaced template %q does not parse: %v", ns, err)
	}
	expanded := strings.Replace(ns, "{id}", "7", 1)
	if !parsed.URITemplate.Regexp().MatchString(expanded) {
		t.Errorf("%q does not match its own expansion %q", ns, expanded)
	}
	if s, orig, ok := splitNamespaced(expanded); !ok || s != "c" || orig != "shared://item/7" {
		t.Errorf("the expansion routes to %q %q %v", s, orig, ok)
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// resourceExtras builds what a child would list: resources by URI and templates by
// pattern.
func resourceExtras(t *testing.T, server string, uris, patterns []string) extras {
	t.Helper()
	ex := extras{servesResources: true}
	for _, u := range uris {
		ex.resources = append(ex.resources, resource{server: server, uri: u, raw: json.RawMessage(`{"uri":` + quoteJSON(u) + `,"name":"r"}`)})
	}
	for _, p := range patterns {
		raw := json.RawMessage(`{"uriTemplate":` + quoteJSON(p) + `,"name":"t"}`)
		var parsed mcp.ResourceTemplate
		if err := json.Unmarshal(raw, &parsed); err != nil {
			t.Fatal(err)
		}
		ex.templates = append(ex.templates, resourceTemplate{server: server, pattern: p, tmpl: parsed.URITemplate, raw: raw})
	}
	return ex
}

// TestResourceRouting: a URI or template only one server lists keeps its name; one
// that several list is listed once per owner, namespaced, and each namespaced form
// reaches its owner; a bare URI several servers could own is not guessed.
func TestResourceRouting(t *testing.T) {
	t.Parallel()
	m, errs := buildManifest(map[string][]*Tool{"a": nil, "b": nil, "c": nil}, map[string]extras{
		"a": resourceExtras(t, "a", []string{"shared://doc", "a://only", "ui://app/main.html"}, []string{"shared://item/{id}"}),
		"b": resourceExtras(t, "b", []string{"shared://doc", "ui://app/main.html", "shared://doc"}, []string{"shared://item/{id}", "b://t/{x}"}),
		"c": resourceExtras(t, "c", nil, []string{"shared://item/{id}"}),
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var listed, patterns []string
	for _, r := range m.res.resources {
		listed = append(listed, uriOf(r.listed))
	}
	for _, tp := range m.res.templates {
		var f struct {
			URITemplate string `json:"uriTemplate"`
		}
		_ = json.Unmarshal(tp.listed, &f)
		patterns = append(patterns, f.URITemplate)
	}
	wantListed := []string{"shared://nexus/a/shared://doc", "a://only", "ui://nexus/a/ui://app/main.html",
		"shared://nexus/b/shared://doc", "ui://nexus/b/ui://app/main.html"}
	if !slices.Equal(listed, wantListed) {
		t.Errorf("resources listed as\n%q\nwant\n%q", listed, wantListed)
	}
	wantPatterns := []string{"shared://nexus/a/shared://item/{id}", "shared://nexus/b/shared://item/{id}", "b://t/{x}", "shared://nexus/c/shared://item/{id}"}
	if !slices.Equal(patterns, wantPatterns) {
		t.Errorf("templates listed as\n%q\nwant\n%q", patterns, wantPatterns)
	}
	for _, tc := range []struct {
		uri, server, childURI string
		candidates            []string
	}{
		{"a://only", "a", "a://only", nil},
		{"shared://nexus/a/shared://doc", "a", "shared://doc", nil},
		{"shared://nexus/b/shared://doc", "b", "shared://doc", nil},
		{"ui://nexus/b/ui://app/main.html", "b", "ui://app/main.html", nil},
		{"shared://doc", "", "", []string{"shared://nexus/a/shared://doc", "shared://nexus/b/shared://doc"}},
		{"shared://nexus/c/shared://item/9", "c", "shared://item/9", nil},
		{"shared://item/9", "", "", []string{"shared://nexus/a/shared://item/9", "shared://nexus/b/shared://item/9", "shared://nexus/c/shared://item/9"}},
		{"b://t/1", "b", "b://t/1", nil},
		{"x://nothing", "", "", nil},
		{"shared://nexus/zed/shared://doc", "", "", nil}, // no such server
	} {
		server, childURI, candidates := m.res.route(tc.uri)
		if server != tc.server || childURI != tc.childURI || !slices.Equal(candidates, tc.candidates) {
			t.Errorf("route(%q) = %q, %q, %q; want %q, %q, %q", tc.uri, server, childURI, candidates, tc.server, tc.childURI, tc.candidates)
		}
	}
}

// TestResourceIndexPerAgent: an agent that may read one of the servers that share a
// URI or template sees it as that server alone would name it.
func TestResourceIndexPerAgent(t *testing.T) {
	t.Parallel()
	m, _ := buildManifest(map[string][]*Tool{"a": nil, "b": nil}, map[string]extras{
		"a": resourceExtras(t, "a", []string{"shared://doc"}, []string{"shared://item/{id}"}),
		"b": resourceExtras(t, "b", []string{"shared://doc", "b://own"}, []string{"shared://item/{id}"}),
	})
	x := newResourceIndex(m, func(s string) bool { return s == "a" })
	if len(x.resources) != 1 || uriOf(x.resources[0].listed) != "shared://doc" || x.templates[0].client != "shared://item/{id}" || x.namespacing {
		t.Errorf("a alone: resources %+v, templates %+v", x.resources, x.templates)
	}
	for _, tc := range []struct{ uri, server, childURI string }{
		{"shared://doc", "a", "shared://doc"},
		{"shared://item/1", "a", "shared://item/1"},
		{"shared://nexus/a/shared://doc", "a", "shared://doc"},
		{"shared://nexus/b/shared://doc", "", ""}, // b is not a's to route: the manifest's index does, for policy
		{"b://own", "", ""},
	} {
		if server, childURI, candidates := x.route(tc.uri); server != tc.server || childURI != tc.childURI || candidates != nil {
			t.Errorf("route(%q) = %q, %q, %q; want %q, %q", tc.uri, server, childURI, candidates, tc.server, tc.childURI)
		}
	}
	if server, _, _ := m.res.route("b://own"); server != "b" {
		t.Errorf("the manifest's index routes b://own to %q", server)
	}
}

// TestRewriteURIs: what a server sends names a shared URI by its namespaced form for
// that server, in exactly the documented places; nothing else changes.
func TestRewriteURIs(t *testing.T) {
	t.Parallel()
	m, _ := buildManifest(map[string][]*Tool{"a": nil, "b": nil}, map[string]extras{
		"a": resourceExtras(t, "a", []string{"ui://app/main.html", "a://mine"}, nil),
		"b": resourceExtras(t, "b", []string{"ui://app/main.html"}, nil),
	})
	for _, tc := range []struct{ name, in, want string }{
		{"tool listing", `{"name":"w","_meta":{"ui":{"resourceUri":"ui://app/main.html","x":1}}}`,
			`{"_meta":{"ui":{"resourceUri":"ui://nexus/b/ui://app/main.html","x":1}},"name":"w"}`},
		{"legacy key", `{"_meta":{"ui/resourceUri":"ui://app/main.html"}}`, `{"_meta":{"ui/resourceUri":"ui://nexus/b/ui://app/main.html"}}`},
		{"result links", `{"content":[{"type":"text","text":"ui://app/main.html"},{"type":"resource_link","uri":"ui://app/main.html","name":"n"},{"type":"resource","resource":{"uri":"ui://app/main.html","text":"t"}}]}`,
			`{"content":[{"type":"text","text":"ui://app/main.html"},{"name":"n","type":"resource_link","uri":"ui://nexus/b/ui://app/main.html"},{"resource":{"text":"t","uri":"ui://nexus/b/ui://app/main.html"},"type":"resource"}]}`},
		{"read contents", `{"contents":[{"uri":"ui://app/main.html","text":"<html>"}]}`, `{"contents":[{"text":"<html>","uri":"ui://nexus/b/ui://app/main.html"}]}`},
		{"unshared untouched", `{"content":[{"type":"resource_link","uri":"a://mine"}],  "_meta":{"ui":{"resourceUri":"https://x"}}}`,
			`{"content":[{"type":"resource_link","uri":"a://mine"}],  "_meta":{"ui":{"resourceUri":"https://x"}}}`},
		{"structured untouched", `{"structuredContent":{"uri":"ui://app/main.html"}}`, `{"structuredContent":{"uri":"ui://app/main.html"}}`},
	} {
		if got := string(m.res.clientURIs("b", json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
