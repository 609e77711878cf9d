package toolsearch

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"getFileContents", []string{"get", "file", "content"}},
		{"github.create_pull_request", []string{"github", "creat", "pr"}},
		{"list-directory", []string{"list", "dir"}},
		{"HTTPServer", []string{"http", "server"}},
		{"show me the repositories", []string{"show", "repo"}},
	} {
		if got := Words(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Words(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParams(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Where"},
		"opts":{"type":"object","properties":{"depth":{"type":"number"}}},
		"files":{"type":"array","items":{"type":"object","properties":{"name":{"description":"File name"}}}}}}`)
	got := Params(schema)
	want := []Param{{"files", ""}, {"name", "File name"}, {"opts", ""}, {"depth", ""}, {"path", "Where"}}
	if !slices.Equal(got, want) {
		t.Errorf("Params = %v, want %v", got, want)
	}
	for _, bad := range []string{``, `[]`, `{"properties": 3}`} {
		if got := Params(json.RawMessage(bad)); got != nil {
			t.Errorf("Params(%s) = %v, want none", bad, got)
		}
	}
}

func docs() []Doc {
	return []Doc{
		{Name: "files.read_file", Words: "files read_file", Description: "Read a file's contents", Params: []Param{{"path", "Path of the file"}}},
		{Name: "files.write_file", Words: "files write_file", Description: "Create or overwrite a file"},
		{Name: "gh.create_issue", Words: "gh create_issue", Description: "Create a new issue in a repository"},
		{Name: "gh.list_issues", Words: "gh list_issues", Description: "List issues of a repository"},
		{Name: "chat.post_message", Words: "chat post_message", Description: "Post a message to a channel"},
	}
}

func TestSearch(t *testing.T) {
	ix := New(docs(), Options{})
	for _, tc := range []struct {
		task  string
		limit int
		first string
		n     int
	}{
		{"open a new ticket in the repo", 3, "gh.create_issue", 3},
		{"list the issues of the repo", 5, "gh.list_issues", -1},
		{"show the contents of a file", 1, "files.read_file", 1},
		{"send a message to the team channel", 5, "chat.post_message", -1},
		{"zebra quantum", 5, "", 0},
		{"read a file", 0, "", 0},
	} {
		hits, err := ix.Search(context.Background(), tc.task, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if tc.n >= 0 && len(hits) != tc.n {
			t.Errorf("%q: %d hits, want %d", tc.task, len(hits), tc.n)
		}
		if tc.first != "" && (len(hits) == 0 || hits[0].Doc.Name != tc.first) {
			t.Errorf("%q: first hit %v, want %s", tc.task, hits, tc.first)
		}
	}
}

// fakeEmbedder puts every text on one axis of its own but those saying "letter",
// which it knows mean a message.
type fakeEmbedder struct{ err error }

func (f fakeEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := make([][]float32, len(texts))
	for i, s := range texts {
		v := make([]float32, 8)
		switch {
		case s == "deliver a letter" || s == "chat post_message. . Post a message to a channel":
			v[0] = 1
		default:
			v[1+i%7] = 1
		}
		out[i] = v
	}
	return out, nil
}

func TestSearchBlendsEmbedder(t *testing.T) {
	ix := New(docs(), Options{Embedder: fakeEmbedder{}})
	hits, err := ix.Search(context.Background(), "deliver a letter", 1)
	if err != nil || len(hits) != 1 || hits[0].Doc.Name != "chat.post_message" {
		t.Fatalf("hits %v, %v: want chat.post_message, found by the embedder alone", hits, err)
	}
	broken := New(docs(), Options{Embedder: fakeEmbedder{err: errors.New("down")}})
	hits, err = broken.Search(context.Background(), "read a file", 1)
	if err == nil || len(hits) != 1 || hits[0].Doc.Name != "files.read_file" {
		t.Fatalf("with a failing embedder: %v, %v; want its error and the lexical ranking", hits, err)
	}
}
