package memory

import (
	"encoding/json"
	"fmt"
)

// perCallMeta are the _meta keys of a call that say which call it is, not what
// it asks: W3C trace context and a client's id of the tool use. They differ on
// every call, so a key that held them would never be found again, and a child
// reads them for its logs and spans, not for its answer.
var perCallMeta = []string{"traceparent", "tracestate", "claudecode/toolUseId"}

// metaScope is the part of a call's scope its _meta makes: "" for a call whose
// _meta holds nothing but per-call ids, else "meta:" and the fingerprint of the
// rest. A child may answer from what _meta tells it (a user, a tenant, a
// locale), so two calls whose _meta differs are two calls, and one is never
// answered with the other's answer. A _meta that is not a JSON object is an
// error: such a call bypasses memory.
func metaScope(meta json.RawMessage) (string, error) {
	if len(meta) == 0 || string(meta) == "null" {
		return "", nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(meta, &members); err != nil {
		return "", fmt.Errorf("memory: the call's _meta: %w", err)
	}
	for _, k := range perCallMeta {
		delete(members, k)
	}
	if len(members) == 0 {
		return "", nil
	}
	b, err := json.Marshal(members) // member values keep their bytes
	if err != nil {
		return "", fmt.Errorf("memory: the call's _meta: %w", err)
	}
	canonical, err := CanonicalJSON(b)
	if err != nil {
		return "", err
	}
	return "meta:" + fingerprint(canonical), nil
}
