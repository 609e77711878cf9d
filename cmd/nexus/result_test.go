package main

import (
	"strings"
	"testing"
)

func TestPrintResult(t *testing.T) {
	tests := []struct{ name, raw, want string }{
		{"text as text", `{"content":[{"type":"text","text":"line one\nline two\n"}]}`, "line one\nline two\n"},
		{"structured once, pretty", `{"content":[{"type":"text","text":"{\"a\":1,\"b\":[2]}"}],"structuredContent":{"a":1,"b":[2]}}`,
			"{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}\n"},
		{"text and structured", `{"content":[{"type":"text","text":"summary"}],"structuredContent":{"a":1}}`, "summary\n{\n  \"a\": 1\n}\n"},
		{"structured as the text", `{"content":[{"type":"text","text":"{\n  \"timezone\": \"UTC\",\n  \"hour\": 23\n}"}],"structuredContent":{"hour":23,"timezone":"UTC"}}`,
			"{\n  \"hour\": 23,\n  \"timezone\": \"UTC\"\n}\n"},
		{"structured said in words", `{"content":[{"type":"text","text":"It is 23:00 in UTC."}],"structuredContent":{"zone":"UTC","time":"23:00"}}`, "It is 23:00 in UTC.\n"},
		{"tool error", `{"content":[{"type":"text","text":"boom"}],"isError":true}`, "tool error:\nboom\n"},
		{"image", `{"content":[{"type":"image","mimeType":"image/png","data":"aGVsbG8="}]}`, "[image image/png, 8 bytes base64; --json shows it]\n"},
		{"resource", `{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"body"}}]}`, "[resource file:///a]\nbody\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := printResult(&b, []byte(tc.raw)); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
}

func TestSizeIEC(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {1536, "1.5 KiB"}, {268435456, "256 MiB"}, {1 << 30, "1 GiB"}}
	for _, tc := range tests {
		if got := sizeIEC(tc.n); got != tc.want {
			t.Errorf("sizeIEC(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
