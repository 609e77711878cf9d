package aggregation

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeCallParams holds decodeCallParams to what encoding/json decodes
// the same params into: the same params, and an error exactly when it has one.
func FuzzDecodeCallParams(f *testing.F) {
	for _, seed := range []string{
		`{"name":"fx__echo","arguments":{"message":"m1"}}`,
		`{"name":"fx__echo","arguments":{"a":[1,2]},"_meta":{"progressToken":7},"task":{"ttl":60000}}`,
		`{"name":"x","arguments":null,"inputResponses":{"q":{"action":"accept"}},"requestState":"s1"}`,
		`{"name":null}`,
		`{"Name":"fx__echo"}`,
		`{"name":"f\u0078"}`,
		`{"name":"fé"}`,
		`{"name":7}`,
		`{"nAme":"a","name":"b"}`,
		`{"name":"a","name":"b"}`,
		`{"name":"a","name":null}`,
		`{"name":1,"name":"x"}`,
		`{"name":"a","arguments":{},"arguments":null}`,
		`[1]`,
		`null`,
		``,
		`{"name":"a",}`,
		`{"_META":{}}`,
		`{"name":"a","ſ":1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want callParams
		wantErr := json.Unmarshal(b, &want)
		got, gotErr := decodeCallParams(bytes.Clone(b))
		if (wantErr == nil) != (gotErr == nil) || wantErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("%q: error %v, encoding/json's %v", b, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(normalParams(got), normalParams(want)) {
			t.Fatalf("%q:\n got %+v\nwant %+v", b, got, want)
		}
	})
}

// normalParams is p with its empty raw members nil: absent either way.
func normalParams(p callParams) callParams {
	for _, r := range []*json.RawMessage{&p.Arguments, &p.Meta, &p.Task, &p.InputResponses, &p.RequestState} {
		if len(*r) == 0 {
			*r = nil
		}
	}
	return p
}
