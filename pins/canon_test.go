package pins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/nexus-mcp/nexus/samples"
)

// referenceCanonical is the definition as encoding/json makes it: decoded into
// maps with numbers kept as spelt, encoded without HTML escaping. Pins written
// by earlier versions hold hashes of exactly these bytes, so Canonical must
// agree with it byte for byte.
func referenceCanonical(tool []byte) (Definition, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(tool, &obj); err != nil {
		return Definition{}, err
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || name == "" {
		return Definition{}, errors.New("a tool without a name")
	}
	def := map[string]any{}
	for _, f := range definitionFields {
		raw, ok := obj[f]
		if !ok || string(raw) == "null" {
			continue
		}
		v, err := referenceDecode(raw)
		if err != nil {
			return Definition{}, err
		}
		def[f] = v
	}
	canon, err := referenceEncode(def)
	return Definition{Name: name, JSON: canon}, err
}

func referenceDecode(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

func referenceEncode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), err
}

// canonSeeds are tools whose canonical form is easy to get wrong.
var canonSeeds = []string{
	`{"name":"a"}`,
	` { "name" : "a" , "description" : "x" } `,
	`{"name":"a","description":"<b> & \u003c \"quoted\" back\\slash \n\t\b\f\r \u0001 \u001f"}`,
	`{"name":"a","description":"line\u2028sep\u2029 é ☃ 😀 \ud83d\ude00"}`,
	"{\"name\":\"a\",\"description\":\"raw\u2028sep and é\"}",
	`{"name":"a","description":"lone \ud800 surrogate \udc00 and \uDFFF"}`,
	"{\"name\":\"a\",\"description\":\"bad utf8 \xff\xfe here\"}",
	`{"name":"a","inputSchema":{"type":"object","properties":{"n":{"type":"number","minimum":1.0,"maximum":1e2,"default":-0,"multipleOf":0.50E+1}}}}`,
	`{"name":"a","inputSchema":{"z":1,"a":2,"m":{"y":[1,2,{"b":true,"a":null}],"x":[]},"e":{}}}`,
	`{"name":"a","annotations":{"readOnlyHint":false,"readOnlyHint":true},"name":"b"}`,
	`{"name":"a","title":null,"outputSchema":null,"_meta":{"x":1},"icons":[{"src":"i"}],"execution":{"taskSupport":"optional"}}`,
	`{"name":"a","inputSchema":{"b\u0061":1,"ba":2,"\u00e9":3,"e\u0301":4}}`,
	`{"name":"a","description":"tabs	inside"}`,
	`{"name":"","description":"x"}`,
	`{"description":"no name"}`,
	`{"name":3}`,
	`[1,2]`,
	`"a"`,
	`{"name":"a",}`,
	`{"name":"a"} {"name":"b"}`,
}

// FuzzCanonical checks Canonical against encoding/json's round trip on every
// seed, every tool of the samples' contracts and, under go test -fuzz, on
// whatever the fuzzer makes.
func FuzzCanonical(f *testing.F) {
	for _, s := range canonSeeds {
		f.Add([]byte(s))
	}
	for _, tool := range sampleTools(f) {
		f.Add([]byte(tool))
	}
	f.Fuzz(func(t *testing.T, tool []byte) {
		want, wantErr := referenceCanonical(tool)
		got, err := Canonical(tool)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Canonical(%q): error %v, encoding/json's %v", tool, err, wantErr)
		}
		if err != nil {
			return
		}
		if got.Name != want.Name || !bytes.Equal(got.JSON, want.JSON) {
			t.Fatalf("Canonical(%q) =\n %s %s\nencoding/json's\n %s %s", tool, got.Name, got.JSON, want.Name, want.JSON)
		}
		// What a pin file holds (indented) canonicalizes back to the same bytes.
		var indented bytes.Buffer
		if err := json.Indent(&indented, got.JSON, "    ", "  "); err != nil {
			t.Fatal(err)
		}
		// The pin file's check walks it without validating it again.
		again, err := canonicalValid(indented.Bytes())
		if err != nil || !bytes.Equal(again, got.JSON) {
			t.Fatalf("canonicalValid(indented %s) = %s, %v", got.JSON, again, err)
		}
	})
}

// sampleTools are the tools the built-in samples list, as real definitions of
// the size a gateway pins.
func sampleTools(tb testing.TB) []string {
	var tools []string
	for _, name := range []string{"code-kg", "doc-kg"} {
		srv, err := samples.New(name, samples.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		for _, t := range srv.ListTools() {
			raw, err := json.Marshal(t.Tool)
			if err != nil {
				tb.Fatal(err)
			}
			tools = append(tools, string(raw))
		}
	}
	return tools
}

func TestSampleToolsFound(t *testing.T) {
	if n := len(sampleTools(t)); n < 10 {
		t.Fatalf("found %d sample tools to check Canonical against; the samples moved?", n)
	}
}

// BenchmarkCanonical compares Canonical with encoding/json's round trip on the
// samples' tools.
func BenchmarkCanonical(b *testing.B) {
	tools := sampleTools(b)
	for _, impl := range []struct {
		name string
		f    func([]byte) (Definition, error)
	}{{"walk", func(t []byte) (Definition, error) { return Canonical(t) }}, {"encoding-json", referenceCanonical}} {
		b.Run(impl.name, func(b *testing.B) {
			for b.Loop() {
				for _, tool := range tools {
					if _, err := impl.f([]byte(tool)); err != nil {
						b.Fatal(fmt.Errorf("%s: %w", tool, err))
					}
				}
			}
		})
	}
}
