package memory_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/secrets"

	. "github.com/nexus-mcp/nexus/memory"
	. "github.com/nexus-mcp/nexus/memory/memorytest"
	"github.com/nexus-mcp/nexus/memory/sqlite"

	"github.com/nexus-mcp/nexus/memory/embedder"
)

func TestSemanticHit(t *testing.T) {
	m := openTest(t, Options{})
	c := &Child{}
	first := Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	if s := Status(t, first); s != StatusMiss {
		t.Fatalf("first call: %s", s)
	}
	res := Do(t, m, "", SearchTool(), SearchArgs("connection pool settings for postgres", 10), c)
	st, sim, matched := SemanticReport(t, res)
	if st != StatusSemanticHit || c.Calls.Load() != 1 {
		t.Fatalf("paraphrase: status %s, child calls %d: %s", st, c.Calls.Load(), res)
	}
	if sim < LexicalThresholds.Serve || sim > 1 || matched != "postgres connection pool settings" {
		t.Fatalf("report: similarity %v matched %q", sim, matched)
	}
	if Text(res) != Text(first) {
		t.Fatalf("served %q, stored %q", Text(res), Text(first))
	}
	if s, age, ok := CacheStatus(res); !ok || s != StatusSemanticHit || age < 0 {
		t.Fatalf("CacheStatus: %s %d %v", s, age, ok)
	}
	// The exact repeat is an exact hit (no embedding needed).
	if s := Status(t, Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)); s != StatusHit {
		t.Fatalf("exact repeat: %s", s)
	}
	st2, err := m.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st2.SemanticHits != 1 || st2.Hits != 2 || st2.Misses != 1 || len(st2.Tools) != 1 || st2.Tools[0].SemanticHits != 1 {
		t.Fatalf("stats: %+v", st2)
	}
	list, err := m.List(context.Background(), 0)
	if err != nil || len(list) != 1 || list[0].Text != "postgres connection pool settings" || list[0].Embedder != "lexical/v2" {
		t.Fatalf("list: %+v %v", list, err)
	}
}

func TestSemanticNearMissAndBuckets(t *testing.T) {
	m := openTest(t, Options{})
	c := &Child{}
	Do(t, m, "", SearchTool(), SearchArgs("deploy to staging checklist", 10), c)
	Do(t, m, "", SearchTool(), SearchArgs("turn on the dark mode feature flag", 10), c)
	for _, args := range []string{
		SearchArgs("deploy to production checklist", 10),                           // environment
		SearchArgs("turn off the dark mode feature flag", 10),                      // polarity
		SearchArgs("checklist for deploying to staging", 20),                       // a paraphrase, but another limit: another bucket
		`{"query":"deploy to staging checklist ","limit":10,"source_app":"notes"}`, // another bucket
	} {
		before := c.Calls.Load()
		res := Do(t, m, "", SearchTool(), args, c)
		if s := Status(t, res); s != StatusMiss || c.Calls.Load() != before+1 {
			t.Errorf("%s: status %s, forwarded %v", args, s, c.Calls.Load() == before+1)
		}
	}
	// With both environments stored, each is served its own answer.
	prod := Do(t, m, "", SearchTool(), SearchArgs("show me the deploy to production checklist", 10), c)
	if st, _, matched := SemanticReport(t, prod); st != StatusSemanticHit || matched != "deploy to production checklist" {
		t.Fatalf("production paraphrase: %s %q", st, matched)
	}
	st, err := m.Stats(context.Background())
	if err != nil || st.GuardRejections == 0 {
		t.Fatalf("guard rejections not counted: %+v %v", st.Similarity, err)
	}
}

func TestToolsWithoutFreeText(t *testing.T) {
	m := openTest(t, Options{Embedder: &countingEmbedder{Embedder: embedder.NewLexical()}})
	ce := m.EmbedderOf().(*countingEmbedder)
	c := &Child{}
	noText := Tool{Name: "code-kg.kg_file_context", Server: "code-kg", Annotated: true, ReadOnly: true,
		InputSchema: json.RawMessage(`{"properties":{"path":{"type":"string"},"query":{"type":"string","enum":["a","b"]}}}`)}
	Do(t, m, "", noText, `{"path":"a.go","query":"a"}`, c)
	Do(t, m, "", noText, `{"path":"b.go","query":"a"}`, c)
	// Exact hits never embed.
	Do(t, m, "", SearchTool(), SearchArgs("open bugs", 10), c)
	Do(t, m, "", SearchTool(), SearchArgs("open bugs", 10), c)
	if n := ce.n.Load(); n != 1 {
		t.Fatalf("embedder called %d times, want 1 (the one miss with free text)", n)
	}
}

type countingEmbedder struct {
	embedder.Embedder
	n   atomic.Int64
	err error
	id  *embedder.Identity
}

func (e *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.n.Add(1)
	if e.err != nil {
		return nil, e.err
	}
	return e.Embedder.Embed(ctx, texts)
}

func (e *countingEmbedder) Identity() embedder.Identity {
	if e.id != nil {
		return *e.id
	}
	return e.Embedder.Identity()
}

func TestEmbedderOutage(t *testing.T) {
	ce := &countingEmbedder{Embedder: embedder.NewLexical(), err: errors.New("connection refused")}
	m := openTest(t, Options{Embedder: ce})
	c := &Child{}
	Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	res := Do(t, m, "", SearchTool(), SearchArgs("connection pool settings for postgres", 10), c)
	if s := Status(t, res); s != StatusMiss || c.Calls.Load() != 2 {
		t.Fatalf("outage: %s, calls %d", s, c.Calls.Load())
	}
	// Exact hits still work; the embedder is not retried during the backoff.
	if s := Status(t, Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)); s != StatusHit {
		t.Fatalf("exact hit during outage: %s", s)
	}
	if n := ce.n.Load(); n != 1 {
		t.Fatalf("embedder called %d times during backoff, want 1", n)
	}
	st, _ := m.Stats(context.Background())
	if st.EmbedFailures != 1 {
		t.Fatalf("embed failures: %+v", st.Similarity)
	}
}

func TestHTTPEmbedderTimeoutStillAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer srv.Close()
	e, err := embedder.NewOpenAIEmbedder(embedder.HTTPConfig{BaseURL: srv.URL, Model: "m", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := openTest(t, Options{Embedder: e})
	c := &Child{}
	start := time.Now()
	res := Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	if s := Status(t, res); s != StatusMiss || c.Calls.Load() != 1 {
		t.Fatalf("timeout: %s", s)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("call took %v", d)
	}
	if s := Status(t, Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)); s != StatusHit {
		t.Fatalf("exact hit after timeout: %s", s)
	}
}

func TestOtherEmbedderNeverCompared(t *testing.T) {
	path := t.TempDir() + "/memory.db"
	m := openTest(t, Options{Backend: sqlite.File(path)})
	c := &Child{}
	Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	m.Close()
	// Same vectors, same length, another identity: must not be compared.
	other := &countingEmbedder{Embedder: embedder.NewLexical(), id: &embedder.Identity{Name: "openai", Model: "x", Dims: embedder.LexicalDims}}
	m2 := openTest(t, Options{Backend: sqlite.File(path), Embedder: other})
	if s := Status(t, Do(t, m2, "", SearchTool(), SearchArgs("connection pool settings for postgres", 10), c)); s != StatusMiss {
		t.Fatalf("vectors of another embedder compared: %s", s)
	}
	// Its own entries are.
	if s := Status(t, Do(t, m2, "", SearchTool(), SearchArgs("settings for postgres connection pool", 10), c)); s != StatusSemanticHit {
		t.Fatalf("own embedder: %s", s)
	}
}

func vecCount(t testing.TB, m *Memory) int {
	t.Helper()
	var n int
	if err := sqlDB(t, m).QueryRow(`SELECT count(*) FROM vec_f512`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSemanticFreshness(t *testing.T) {
	clk := NewClock()
	m := openTest(t, Options{Now: clk.Now})
	m.SetSettings(Kept(Settings{TTL: map[string]TTL{"*": {D: time.Minute}}}))
	c := &Child{}
	para := SearchArgs("connection pool settings for postgres", 10)
	Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)

	// TTL: an expired entry is never served by similarity.
	clk.Advance(2 * time.Minute)
	if s := Status(t, Do(t, m, "", SearchTool(), para, c)); s != StatusMiss {
		t.Fatalf("expired: %s", s)
	}
	// A stale entry (its server restarted) is never served by similarity,
	// and keeps its vector until it goes.
	if n := vecCount(t, m); n != 2 {
		t.Fatalf("vectors: %d, want 2", n)
	}
	Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	if err := m.MarkStale(context.Background(), "doc-kg"); err != nil {
		t.Fatal(err)
	}
	if s := Status(t, Do(t, m, "", SearchTool(), para, c)); s != StatusMiss {
		t.Fatalf("stale: %s", s)
	}
	if n := vecCount(t, m); n != 2 {
		t.Fatalf("vectors after marking stale: %d, want 2", n)
	}
	// A mutating call drops entries and their vectors.
	if _, err := m.Clear(context.Background(), "", ""); err != nil {
		t.Fatal(err)
	}
	Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	write := Tool{Name: "doc-kg.reindex", Server: "doc-kg", Annotated: true}
	Do(t, m, "", write, `{}`, c)
	if s := Status(t, Do(t, m, "", SearchTool(), para, c)); s != StatusMiss {
		t.Fatalf("after a mutating call: %s", s)
	}
	// Replacing an entry replaces its vector; Clear drops them.
	Do(t, m, "", SearchTool(), para, &Child{})
	if _, err := m.Clear(context.Background(), "", ""); err != nil {
		t.Fatal(err)
	}
	if n := vecCount(t, m); n != 0 {
		t.Fatalf("vectors after clear: %d", n)
	}
}

func TestSemanticEviction(t *testing.T) {
	m := openTest(t, Options{MaxEntries: 20})
	c := &Child{}
	for i := range 60 {
		Do(t, m, "", SearchTool(), SearchArgs(fmt.Sprintf("topic %d design notes", i), 10), c)
	}
	var entries int
	sqlDB(t, m).QueryRow(`SELECT count(*) FROM entries`).Scan(&entries)
	if n := vecCount(t, m); n != entries {
		t.Fatalf("%d vectors for %d entries", n, entries)
	}
}

func TestSemanticSettings(t *testing.T) {
	m := openTest(t, Options{})
	c := &Child{}
	Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	para := SearchArgs("connection pool settings for postgres", 10)
	for _, s := range []Settings{
		{SemanticOff: true},
		{Semantic: map[string][]string{"doc-kg.doc_kg_search": nil}},
		{Semantic: map[string][]string{"doc-kg.*": {}}},
		{Semantic: map[string][]string{"*": {"topic"}}},
	} {
		m.SetSettings(s)
		if got := Status(t, Do(t, m, "", SearchTool(), para, c)); got != StatusMiss {
			t.Errorf("settings %+v: %s", s, got)
		}
		if _, err := m.Clear(context.Background(), "", ""); err != nil {
			t.Fatal(err)
		}
		m.SetSettings(Kept(Settings{}))
		Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	}
	// Config names a field the schema would not: it is used.
	tool := Tool{Name: "wiki.find", Server: "wiki", Annotated: true, ReadOnly: true}
	m.SetSettings(Kept(Settings{Semantic: map[string][]string{"wiki.find": {"topic"}}}))
	Do(t, m, "", tool, `{"topic":"postgres connection pool settings"}`, c)
	if got := Status(t, Do(t, m, "", tool, `{"topic":"connection pool settings for postgres"}`, c)); got != StatusSemanticHit {
		t.Fatalf("configured field: %s", got)
	}
	if err := (Settings{Semantic: map[string][]string{"nodot": {"q"}}}).Validate(); err == nil {
		t.Fatal("bad semantic pattern accepted")
	}
}

type fakeVerifier struct {
	same  bool
	err   error
	calls atomic.Int64
}

func (v *fakeVerifier) Same(context.Context, string, string, string) (bool, error) {
	v.calls.Add(1)
	return v.same, v.err
}

func TestGrayZone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ver      *fakeVerifier
		want     string
		accepted int64
	}{
		{"yes", &fakeVerifier{same: true}, StatusSemanticHit, 1},
		{"no", &fakeVerifier{same: false}, StatusMiss, 0},
		{"error", &fakeVerifier{err: errors.New("500")}, StatusMiss, 0},
		{"none", nil, StatusMiss, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Thresholds: &Thresholds{Serve: 0.999, Verify: 0.5}}
			if tc.ver != nil {
				opts.Verifier = tc.ver
			}
			m := openTest(t, opts)
			c := &Child{}
			Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
			// No rewrite explains "options" for "settings": a verifier decides.
			res := Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool options", 10), c)
			if s := Status(t, res); s != tc.want {
				t.Fatalf("status %s, want %s", s, tc.want)
			}
			if tc.accepted == 1 && !strings.Contains(string(res), `"verified":true`) {
				t.Fatalf("no verified flag: %s", res)
			}
			st, _ := m.Stats(context.Background())
			if st.GrayAccepted != tc.accepted || st.GrayAccepted+st.GrayRejected+st.GrayUnverified != 1 {
				t.Fatalf("gray verdicts: %+v", st.Similarity)
			}
		})
	}
}

func TestDefaultFreeTextFields(t *testing.T) {
	got := DefaultFreeTextFields(json.RawMessage(`{"properties":{
		"query":{"type":"string"}, "Q":{"type":["string","null"]}, "text":{"type":"string","format":"uri"},
		"search":{"type":"string","pattern":"^x"}, "prompt":{"type":"string","enum":["a"]},
		"question":{"type":"integer"}, "title":{"type":"string"}}}`))
	if fmt.Sprint(got) != "[Q query]" {
		t.Fatalf("fields: %v", got)
	}
	if DefaultFreeTextFields(nil) != nil || DefaultFreeTextFields(json.RawMessage(`[1]`)) != nil {
		t.Fatal("fields of no schema")
	}
}

func TestSemanticCoalesced(t *testing.T) {
	m := openTest(t, Options{})
	c := &Child{}
	Do(t, m, "", SearchTool(), SearchArgs("postgres connection pool settings", 10), c)
	done := make(chan json.RawMessage, 8)
	for range 8 {
		go func() {
			res, _ := m.Call(context.Background(), "", SearchTool(), json.RawMessage(SearchArgs("connection pool settings for postgres", 10)), c.Forward(nil))
			done <- res
		}()
	}
	for range 8 {
		if s := Status(t, <-done); s != StatusSemanticHit && s != StatusHit {
			t.Errorf("concurrent paraphrase: %s", s)
		}
	}
	if c.Calls.Load() != 1 {
		t.Fatalf("child calls: %d", c.Calls.Load())
	}
}

// ---- benchmark ----

// populateSemantic inserts n entries of tool spread over buckets buckets,
// with their lexical vectors, in one transaction, and returns the texts.
func populateSemantic(tb testing.TB, m *Memory, n, buckets int) []string {
	tb.Helper()
	ctx := context.Background()
	now := m.NowOf().UnixMilli()
	res := TextResult(strings.Repeat("r", 200))
	vocab := strings.Fields(`auth billing search cache deploy queue worker index gateway token
		session upload report invoice schema migration latency error timeout retry webhook config
		policy module service database replica cluster metric alert dashboard pipeline release`)
	texts := make([]string, n)
	emb := embedder.NewLexical()
	// A call stores the first vector, which creates vec_f512 and its
	// triggers; the rest go in one transaction of another connection.
	Do(tb, m, "", SearchTool(), SearchArgs("warm up the vector table", 0), &Child{})
	err := inTx(ctx, sqlDB(tb, m), func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO entries (key, tool, server, scope, fingerprint, args, result, size,
			duration_ms, created_at, expires_at, last_used_at, bucket, embedder, free_text, vec_dims)
			VALUES (?, ?, ?, '', ?, ?, ?, ?, 5, ?, NULL, ?, ?, ?, ?, ?) RETURNING id`)
		if err != nil {
			return err
		}
		defer ins.Close()
		vec, err := tx.PrepareContext(ctx, `INSERT INTO vec_f512 (rowid, part, embedding) VALUES (?, ?, ?)`)
		if err != nil {
			return err
		}
		defer vec.Close()
		for i := range n {
			x := uint64(i)*0x9E3779B97F4A7C15 + 1
			var w []string
			for range 4 {
				w = append(w, vocab[x%uint64(len(vocab))])
				x = x*6364136223846793005 + 1442695040888963407
				x ^= x >> 29
			}
			texts[i] = strings.Join(w, " ") + fmt.Sprintf(" notes %c%c%c%c", 'a'+i%26, 'a'+(i/26)%26, 'a'+(i/676)%26, 'a'+(i/17576)%26)
			limit := i % buckets
			args := []byte(SearchArgs(texts[i], limit))
			sc := m.FreeTextOf(SearchTool(), args)
			sc.Embedder = emb.Identity()
			sc.Vec = emb.Vector(texts[i])
			sc.Part = Partition(sc.Embedder.ID(), embedder.LexicalDims, sc.Bucket)
			fp := Fingerprint(args)
			var id int64
			if err := ins.QueryRowContext(ctx, CacheKey(SearchTool().Name, "", fp), SearchTool().Name, SearchTool().Server, fp, args, res, len(res),
				now, now, sc.Bucket, sc.Embedder.ID(), sc.Text, embedder.LexicalDims).Scan(&id); err != nil {
				return err
			}
			if _, err := vec.ExecContext(ctx, id, sc.Part, EncodeVector(sc.Vec)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return texts
}

// inTx runs fn in a transaction of db, committed if fn succeeds.
func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// BenchmarkSemantic measures a similarity hit through Call (exact miss,
// embedding, nearest neighbours in the bucket, guard, serve) and the
// nearest-neighbour query alone.
func BenchmarkSemantic(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		for _, buckets := range []int{1, 100} {
			b.Run(fmt.Sprintf("entries=%d/buckets=%d", n, buckets), func(b *testing.B) {
				m := openTest(b, Options{MaxEntries: 2 * n, FlushInterval: time.Hour, Logger: Logger(b)})
				m.SetSettings(Kept(Settings{TTL: map[string]TTL{"*": {Never: true}}}))
				texts := populateSemantic(b, m, n, buckets)
				ctx := context.Background()
				forward := Plain(func(context.Context) (json.RawMessage, error) {
					return nil, errors.New("forwarded: not a semantic hit")
				})
				b.Run("call", func(b *testing.B) {
					i := 0
					for b.Loop() {
						k := (i * 7919) % n
						// "please" is a stop word: not the exact call, the same request.
						res, err := m.Call(ctx, "", SearchTool(), json.RawMessage(SearchArgs("please "+texts[k], k%buckets)), forward)
						if err != nil {
							b.Fatal(err)
						}
						if s, _, _ := CacheStatus(res); s != StatusSemanticHit {
							b.Fatalf("status %s", s)
						}
						i++
					}
				})
				b.Run("knn", func(b *testing.B) {
					emb := embedder.NewLexical()
					i := 0
					for b.Loop() {
						k := (i * 7919) % n
						sc := m.FreeTextOf(SearchTool(), []byte(SearchArgs(texts[k], k%buckets)))
						sc.Embedder, sc.Vec = emb.Identity(), emb.Vector(texts[k])
						sc.Part = Partition(sc.Embedder.ID(), embedder.LexicalDims, sc.Bucket)
						cands, err := m.StoreOf().ScanNeighbours(ctx, sc, SemanticCandidates)
						if err != nil || len(cands) == 0 {
							b.Fatal(err, len(cands))
						}
						i++
					}
				})
			})
		}
	}
}

// TestRedactFreeText: a registered secret in free text never reaches
// the embedder or memory.db, with RedactText or with Redact alone.
func TestRedactFreeText(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	real := secrets.NewRedactor()
	real.Add("api-key", secret)
	for name, opts := range map[string]Options{
		"secrets.Redactor": {RedactText: real.String, Redact: real.Bytes},
		"RedactText":       {RedactText: func(s string) string { return strings.ReplaceAll(s, secret, "[redacted:key]") }},
		"Redact":           {Redact: func(b []byte) []byte { return []byte(strings.ReplaceAll(string(b), secret, "[redacted:key]")) }},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory.db")
			emb := &recordingEmbedder{}
			opts.Backend, opts.Embedder = sqlite.File(path), emb
			m := openTest(t, opts)
			c := &Child{}
			Do(t, m, "", SearchTool(), SearchArgs("why does the key "+secret+" fail", 10), c)
			res := Do(t, m, "", SearchTool(), SearchArgs("why is the key "+secret+" failing", 10), c)
			if st, _, matched := SemanticReport(t, res); st == StatusSemanticHit && strings.Contains(matched, secret) {
				t.Fatalf("matched text holds the secret: %q", matched)
			}
			m.Close()
			for _, text := range emb.texts {
				if strings.Contains(text, secret) {
					t.Fatalf("embedder was sent the secret: %q", text)
				}
			}
			for _, p := range []string{path, path + "-wal"} {
				b, _ := os.ReadFile(p)
				if strings.Contains(string(b), secret) {
					t.Fatalf("secret in %s", p)
				}
			}
		})
	}
}

// recordingEmbedder is the lexical embedder, recording what it was sent.
type recordingEmbedder struct {
	mu    sync.Mutex
	texts []string
}

func (e *recordingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	e.texts = append(e.texts, texts...)
	e.mu.Unlock()
	return embedder.NewLexical().Embed(ctx, texts)
}

func (e *recordingEmbedder) Identity() embedder.Identity { return embedder.NewLexical().Identity() }

func TestOllamaEmbedder(t *testing.T) {
	var mode atomic.Value
	mode.Store("ok")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/embed" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		var out [][]float32
		for range req.Input {
			out = append(out, []float32{0, 2, 0})
		}
		switch mode.Load() {
		case "error":
			w.WriteHeader(500)
			w.Write([]byte(`{"error":"model not found"}`))
			return
		case "zero":
			out[0] = []float32{0, 0, 0}
		case "extra":
			out = append(out, []float32{1, 1, 1})
		case "slow":
			<-r.Context().Done() // never answers: the client's timeout ends the request
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"model": req.Model, "embeddings": out})
	}))
	defer srv.Close()
	e, err := embedder.NewOllamaEmbedder(embedder.HTTPConfig{BaseURL: srv.URL, Model: "nomic-embed-text", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Embed(context.Background(), []string{"a"})
	if err != nil || len(vs) != 1 || vs[0][1] != 1 {
		t.Fatalf("embed: %v %v", vs, err)
	}
	if id := e.Identity(); id.ID() != "ollama/nomic-embed-text" {
		t.Fatalf("identity %v", id)
	}
	for _, m := range []string{"error", "zero", "extra", "slow"} {
		mode.Store(m)
		if _, err := e.Embed(context.Background(), []string{"a"}); err == nil {
			t.Errorf("%s: no error", m)
		}
	}
	// Through Memory: an Ollama outage still answers.
	mode.Store("error")
	mem := openTest(t, Options{Embedder: e})
	c := &Child{}
	if s := Status(t, Do(t, mem, "", SearchTool(), SearchArgs("x y z", 10), c)); s != StatusMiss {
		t.Fatalf("outage: %s", s)
	}
}

// TestSemanticHitSaysRewrites: a similarity hit names the rewrites that
// made it one; a text no rewrite explains is not served, however similar.
func TestSemanticHitSaysRewrites(t *testing.T) {
	m := openTest(t, Options{})
	c := &Child{}
	Do(t, m, "", SearchTool(), SearchArgs("how do I rotate the api keys", 10), c)
	res := Do(t, m, "", SearchTool(), SearchArgs("how to rotate api keys", 10), c)
	var r struct {
		Meta struct {
			Cache struct {
				Status   string   `json:"status"`
				Rewrites []string `json:"rewrites"`
			} `json:"nexus/cache"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	if got := r.Meta.Cache; got.Status != StatusSemanticHit || strings.Join(got.Rewrites, ",") != "article,how-to" {
		t.Fatalf("report %+v, want semantic_hit with rewrites article,how-to", got)
	}
	for _, q := range []string{"why rotate the api keys", "how do I rotate the api key quickly"} {
		if s := Status(t, Do(t, m, "", SearchTool(), SearchArgs(q, 10), c)); s != StatusMiss {
			t.Errorf("%q: %s, want miss", q, s)
		}
	}
}
