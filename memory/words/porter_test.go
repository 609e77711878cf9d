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
