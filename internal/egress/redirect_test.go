package egress

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		from, to, want string // want: "" when followed, else part of the refusal
	}{
		{"https://a.example/mcp", "https://a.example/mcp/", ""},
		{"https://a.example/mcp", "https://a.example:443/x", ""},
		{"http://127.0.0.1:8/mcp", "http://127.0.0.1:8/x", ""},
		{"https://a.example/mcp", "https://b.example/mcp", "another origin"},
		{"https://a.example/mcp", "https://x.a.example/mcp", "another origin"},
		{"https://a.example/mcp", "https://a.example:8443/mcp", "another origin"},
		{"https://a.example/mcp", "http://a.example/mcp", "plain http"},
		{"http://127.0.0.1:8/mcp", "http://127.0.0.1:9/mcp", "another origin"},
	}
	for _, tc := range tests {
		from, _ := url.Parse(tc.from)
		to, _ := url.Parse(tc.to)
		err := SameOrigin(&http.Request{URL: to}, []*http.Request{{URL: from}})
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s -> %s: %v, want %q", tc.from, tc.to, err, tc.want)
		}
	}
	from, _ := url.Parse("https://a.example/1")
	via := make([]*http.Request, MaxRedirects)
	for i := range via {
		via[i] = &http.Request{URL: from}
	}
	if err := SameOrigin(&http.Request{URL: from}, via); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("redirect %d: %v, want a refusal", MaxRedirects+1, err)
	}
}
