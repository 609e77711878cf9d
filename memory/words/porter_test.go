package words

import "testing"

func TestPorter(t *testing.T) {
	tests := map[string]string{
		"caresses": "caress", "ponies": "poni", "cats": "cat", "agreed": "agre", "plastered": "plaster",
		"motoring": "motor", "sing": "sing", "conflated": "conflat", "hopping": "hop", "filing": "file",
		"happy": "happi", "relational": "relat", "conditional": "condit", "digitizer": "digit",
		"hopefulness": "hope", "formality": "formal", "electrical": "electr", "adjustment": "adjust",
		"adoption": "adopt", "controlling": "control", "generalization": "gener", "connections": "connect",
		"connected": "connect", "connecting": "connect", "configuration": "configur", "configure": "configur",
		"authentication": "authent", "go": "go", "v1": "v1", "naïve": "naïve",
	}
	for in, want := range tests {
		if got := Porter(in); got != want {
			t.Errorf("Porter(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInflection(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"queries", "query"}, {"parsing", "parse"}, {"parses", "parse"}, {"configured", "configure"},
		{"controlled", "control"}, {"works", "work"}, {"running", "run"}, {"agreed", "agree"},
	} {
		if Inflection(tc.a) != Inflection(tc.b) {
			t.Errorf("Inflection(%q) = %q, Inflection(%q) = %q: want one word", tc.a, Inflection(tc.a), tc.b, Inflection(tc.b))
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"generic", "general"}, {"deployer", "deployment"}, {"operator", "operation"}, {"experiment", "experience"},
	} {
		if Inflection(tc.a) == Inflection(tc.b) {
			t.Errorf("Inflection makes %q and %q one word (%q)", tc.a, tc.b, Inflection(tc.a))
		}
	}
}
