package config

import (
	"encoding/json"
	"testing"
)

// TestAuditArguments: audit.arguments takes "redacted" and "hash", and the
// booleans of earlier configs.
func TestAuditArguments(t *testing.T) {
	for in, want := range map[string]bool{`true`: true, `"redacted"`: true, `false`: false, `"hash"`: false} {
		var a Audit
		if err := json.Unmarshal([]byte(`{"arguments": `+in+`}`), &a); err != nil || a.Arguments.Redacted() != want {
			t.Errorf("arguments %s: redacted %v, %v; want %v", in, a.Arguments.Redacted(), err, want)
		}
	}
	var a Audit
	if err := json.Unmarshal([]byte(`{"arguments": "all"}`), &a); err == nil {
		t.Error(`arguments "all" was accepted`)
	}
}
