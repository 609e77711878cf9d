package jsonedit

import (
	"encoding/json"
	"testing"
)

func TestEdit(t *testing.T) {
	tests := []struct {
		name string
		in   string
		edit func(*Doc) error
		want string
	}{
		{
			name: "replace keeps order and comments",
			in: `{
  // my servers
  "zeta": 1,
  "servers": {
    "b": {"command": "old"}, // keep me
    "a": {"command": "x"}
  },
  "alpha": true
}
`,
			edit: func(d *Doc) error { return d.Set(map[string]string{"command": "new"}, "servers", "b") },
			want: `{
  // my servers
  "zeta": 1,
  "servers": {
    "b": {
      "command": "new"
    }, // keep me
    "a": {"command": "x"}
  },
  "alpha": true
}
`,
		},
		{
			name: "a new member goes last, indented like its siblings",
			in: `{
	"servers": {
		"a": {}
	}
}
`,
			edit: func(d *Doc) error { return d.Set([]string{"x"}, "servers", "b") },
			want: `{
	"servers": {
		"a": {},
		"b": [
			"x"
		]
	}
}
`,
		},
		{
			name: "missing objects along the path are made",
			in:   "{\n  \"ttl\": {}\n}\n",
			edit: func(d *Doc) error { return d.Set("30s", "policy", "agents", "coder") },
			want: `{
  "ttl": {},
  "policy": {
    "agents": {
      "coder": "30s"
    }
  }
}
`,
		},
		{
			name: "into an empty object and an empty file",
			in:   "",
			edit: func(d *Doc) error { return d.Set(true, "secrets", "insecureFileStore") },
			want: `{
  "secrets": {
    "insecureFileStore": true
  }
}
`,
		},
		{
			name: "a trailing comma stays a trailing comma",
			in: `{
  "a": 1,
}
`,
			edit: func(d *Doc) error { return d.Set(2, "b") },
			want: `{
  "a": 1,
  "b": 2,
}
`,
		},
		{
			name: "delete the last member",
			in: `{
  "a": 1,
  "b": 2
}
`,
			edit: func(d *Doc) error { d.Delete(false, "b"); return nil },
			want: `{
  "a": 1
}
`,
		},
		{
			name: "delete a middle member with its comment, dropping the emptied object",
			in: `{
  "keep": 1,
  "mcpServers": {
    // the old one
    "x": {"command": "x"}
  },
  "end": 2
}
`,
			edit: func(d *Doc) error { d.Delete(true, "mcpServers", "x"); return nil },
			want: `{
  "keep": 1,
  "end": 2
}
`,
		},
		{
			name: "through a non-object is an error, nothing changes",
			in:   "{\"policy\": 3}\n",
			edit: func(d *Doc) error { return d.Set(1, "policy", "default") },
			want: "{\"policy\": 3}\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			err = tc.edit(d)
			if got := string(d.Bytes()); got != tc.want {
				t.Errorf("edit error %v; got\n%s\nwant\n%s", err, got, tc.want)
			}
		})
	}
}

func TestGetAndKeys(t *testing.T) {
	d, err := Parse([]byte(`{
  "mcpServers": {
    "z": {"command": "z", /* inline */ "args": ["a",]},
    "a": {"command": "a"},
  },
}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Keys("mcpServers"); len(got) != 2 || got[0] != "z" || got[1] != "a" {
		t.Errorf("keys = %q, want file order [z a]", got)
	}
	raw, ok := d.Get("mcpServers", "z")
	if !ok {
		t.Fatal("z not found")
	}
	var v struct {
		Command string
		Args    []string
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Command != "z" || len(v.Args) != 1 {
		t.Errorf("Get = %s (%v): not standard JSON of the entry", raw, err)
	}
	if !d.HasComments() {
		t.Error("HasComments = false for a file with comments")
	}
	if _, ok := d.Get("mcpServers", "nope"); ok || d.Has("x", "y") {
		t.Error("a missing path was found")
	}
	if _, err := Parse([]byte(`[1]`)); err == nil {
		t.Error("an array document was accepted")
	}
}
