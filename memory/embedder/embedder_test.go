package embedder

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestLexicalEmbedder(t *testing.T) {
	e := NewLexical()
	vs, err := e.Embed(context.Background(), []string{"Open bugs in the auth module", "open bugs in the auth module", ""})
	if err != nil || len(vs) != 3 || len(vs[0]) != LexicalDims {
		t.Fatalf("embed: %v %d", err, len(vs))
	}
	var n float64
	for _, f := range vs[0] {
		n += float64(f) * float64(f)
	}
	if math.Abs(n-1) > 1e-5 || Cosine(vs[0], vs[1]) < 0.9999 {
		t.Fatalf("norm %v, cosine %v", n, Cosine(vs[0], vs[1]))
	}
	if Cosine(e.Vector("kubernetes autoscaling docs"), e.Vector("invoice complaints")) > 0.3 {
		t.Fatal("unrelated texts are close")
	}
}

// ---- HTTP clients ----

func TestOpenAIEmbedder(t *testing.T) {
	var mode atomic.Value
	mode.Store("ok")
	var gotAuth, gotPath atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		gotPath.Store(r.URL.Path)
		var req struct {
			Model  string   `json:"model"`
			Input  []string `json:"input"`
			Format string   `json:"encoding_format"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		switch mode.Load() {
		case "error":
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			return
		case "short":
			req.Input = req.Input[:len(req.Input)-1]
		case "garbage":
			w.Write([]byte(`<html>`))
			return
		case "slow":
			<-r.Context().Done() // never answers: the client's timeout ends the request
			return
		}
		if req.Model != "emb" || req.Format != "float" {
			http.Error(w, "bad request", 400)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i := len(req.Input) - 1; i >= 0; i-- { // reversed: the client must sort
			data = append(data, item{Index: i, Embedding: []float32{float32(i + 1), 0, 3}})
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	defer srv.Close()
	e, err := NewOpenAIEmbedder(HTTPConfig{BaseURL: srv.URL + "/v1/", Model: "emb", APIKey: "sk-test", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Embed(context.Background(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if gotAuth.Load() != "Bearer sk-test" || gotPath.Load() != "/v1/embeddings" {
		t.Fatalf("auth %v path %v", gotAuth.Load(), gotPath.Load())
	}
	if math.Abs(float64(vs[0][0])-1/math.Sqrt(10)) > 1e-6 || math.Abs(float64(vs[1][0])-2/math.Sqrt(13)) > 1e-6 {
		t.Fatalf("not sorted by index or not normalised: %v", vs)
	}
	for _, m := range []string{"error", "short", "garbage", "slow"} {
		mode.Store(m)
		if _, err := e.Embed(context.Background(), []string{"a", "b"}); err == nil {
			t.Errorf("%s: no error", m)
		} else {
			t.Logf("%s: %v", m, err)
		}
	}
	if _, err := NewOpenAIEmbedder(HTTPConfig{Model: "x"}); err == nil {
		t.Error("empty base URL accepted")
	}
	wrongDims, _ := NewOpenAIEmbedder(HTTPConfig{BaseURL: srv.URL, Model: "emb", Dims: 8})
	mode.Store("ok")
	if _, err := wrongDims.Embed(context.Background(), []string{"a"}); err == nil {
		t.Error("wrong dimensions accepted")
	}
}

func TestChatVerifier(t *testing.T) {
	var answer atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if len(req.Messages) != 2 || !strings.Contains(req.Messages[1].Content, "deploy") {
			http.Error(w, "bad request", 400)
			return
		}
		a := answer.Load().(string)
		switch a {
		case "500":
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		case "slow":
			<-r.Context().Done() // never answers: the client's timeout ends the request
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": a}}}})
	}))
	defer srv.Close()
	v, err := NewChatVerifier(HTTPConfig{BaseURL: srv.URL, Model: "gpt", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		answer string
		same   bool
		err    bool
	}{{"Yes.", true, false}, {"no", false, false}, {" NO, they differ", false, false}, {"maybe", false, true}, {"500", false, true}, {"slow", false, true}} {
		answer.Store(tc.answer)
		same, err := v.Same(context.Background(), "ops.search", "deploy a", "deploy b")
		if same != tc.same || (err != nil) != tc.err {
			t.Errorf("answer %q: same %v err %v", tc.answer, same, err)
		}
	}
}

// TestLexicalSynonyms: abbreviations and their long forms embed alike.
func TestLexicalSynonyms(t *testing.T) {
	e := NewLexical()
	for _, p := range [][2]string{
		{"auth config in the repo", "authentication configuration in the repository"},
		{"db env docs", "database environment documentation"},
		{"k8s PRs", "kubernetes pull requests"},
	} {
		if s := Cosine(e.Vector(p[0]), e.Vector(p[1])); s < 0.99 {
			t.Errorf("%q / %q: similarity %.3f, want ~1", p[0], p[1], s)
		}
	}
}
