package toolsearch

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/nexus-mcp/nexus/memory/embedder"
)

// Doc is one tool as search reads it.
type Doc struct {
	// Name identifies the tool in results: the caller's own name for it.
	Name string
	// Words is the tool's name split into words for ranking ("github.create_issue":
	// the server's name counts too, since tasks often say which service they mean).
	Words       string
	Title       string
	Description string
	Params      []Param
}

// Param is one input parameter of a tool.
type Param struct {
	Name, Description string
}

// Params reads the parameters of a JSON Schema's top-level object and of the
// objects one level down (an "options" object, the items of an array): their
// names and descriptions say what a tool acts on. A schema it cannot read gives
// none: ranking then goes by name and description.
func Params(schema json.RawMessage) []Param {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []Param
	for _, name := range sortedKeys(s.Properties) {
		var p struct {
			Description string          `json:"description"`
			Properties  json.RawMessage `json:"properties"`
			Items       json.RawMessage `json:"items"`
		}
		_ = json.Unmarshal(s.Properties[name], &p)
		out = append(out, Param{Name: name, Description: p.Description})
		if len(p.Items) > 0 {
			out = append(out, Params(p.Items)...)
		}
		if len(p.Properties) > 0 {
			wrapped, _ := json.Marshal(map[string]json.RawMessage{"properties": p.Properties})
			out = append(out, Params(wrapped)...)
		}
	}
	return out
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Field weights: a word in a tool's name says more about what it does than one in
// a parameter's description.
const (
	weightName      = 3.0
	weightTitle     = 2.0
	weightDesc      = 1.0
	weightParam     = 0.8
	weightParamDesc = 0.4
	// weightRelated is what a word related to a query word counts for, against 1
	// for the query word itself.
	weightRelated = 0.35
	// BM25's usual constants: term frequency saturates at k1, length is
	// normalised by b.
	k1 = 1.2
	b  = 0.75
)

// Embedder turns texts into vectors of one space (memory's embedders are).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Options tune an Index.
type Options struct {
	// Embedder, when set, is blended with BM25: Blend of the score is its cosine
	// similarity, 1-Blend the lexical score scaled to the best hit.
	Embedder Embedder
	// Blend is the embedder's share, in [0, 1]; 0 with an Embedder means 0.5.
	Blend float64
}

// Index ranks a fixed set of tools. It is safe for concurrent use.
type Index struct {
	docs   []Doc
	tf     []map[string]float64 // per doc: weighted term frequency
	length []float64            // per doc: weighted length
	avgLen float64
	df     map[string]int
	opts   Options

	vecMu sync.Mutex
	vecs  [][]float32 // the docs' embeddings, once made; a failure is tried again
}

// New indexes docs.
func New(docs []Doc, opts Options) *Index {
	ix := &Index{docs: docs, tf: make([]map[string]float64, len(docs)), length: make([]float64, len(docs)), df: map[string]int{}, opts: opts}
	if ix.opts.Embedder != nil && ix.opts.Blend == 0 {
		ix.opts.Blend = 0.5
	}
	total := 0.0
	for i, d := range docs {
		tf := map[string]float64{}
		n := 0.0
		add := func(text string, w float64) {
			for _, word := range Words(text) {
				tf[word] += w
				n += w
			}
		}
		add(d.Words, weightName)
		add(d.Title, weightTitle)
		add(d.Description, weightDesc)
		for _, p := range d.Params {
			add(p.Name, weightParam)
			add(p.Description, weightParamDesc)
		}
		for w := range tf {
			ix.df[w]++
		}
		ix.tf[i], ix.length[i] = tf, n
		total += n
	}
	if len(docs) > 0 {
		ix.avgLen = total / float64(len(docs))
	}
	return ix
}

// Len is the number of tools indexed.
func (ix *Index) Len() int { return len(ix.docs) }

// Hit is one ranked tool.
type Hit struct {
	Doc   Doc
	Score float64
}

// Search returns up to limit tools for the task, best first; none when no word of
// the task is known to any tool. With an embedder, its error is returned (and
// the lexical ranking with it, so a caller may still serve it).
func (ix *Index) Search(ctx context.Context, task string, limit int) ([]Hit, error) {
	if limit <= 0 || len(ix.docs) == 0 {
		return nil, nil
	}
	query := ix.queryWeights(task)
	scores := make([]float64, len(ix.docs))
	best := 0.0
	for i := range ix.docs {
		scores[i] = ix.bm25(i, query)
		best = math.Max(best, scores[i])
	}
	var err error
	if ix.opts.Embedder != nil {
		err = ix.blend(ctx, task, scores, best)
	}
	order := make([]int, 0, len(ix.docs))
	for i, s := range scores {
		if s > 0 {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		if scores[order[a]] != scores[order[b]] {
			return scores[order[a]] > scores[order[b]]
		}
		return ix.docs[order[a]].Name < ix.docs[order[b]].Name
	})
	if len(order) > limit {
		order = order[:limit]
	}
	hits := make([]Hit, len(order))
	for i, d := range order {
		hits[i] = Hit{Doc: ix.docs[d], Score: scores[d]}
	}
	return hits, err
}

// queryWeights are the task's words, each at weight 1 (more if repeated), and the
// words related to them at weightRelated, unless the task says them itself.
func (ix *Index) queryWeights(task string) map[string]float64 {
	q := map[string]float64{}
	words := Words(task)
	for _, w := range words {
		q[w]++
	}
	for _, w := range words {
		for _, r := range related()[w] {
			if _, said := q[r]; !said || q[r] < weightRelated {
				q[r] = math.Max(q[r], weightRelated)
			}
		}
	}
	return q
}

func (ix *Index) bm25(i int, query map[string]float64) float64 {
	n := float64(len(ix.docs))
	score := 0.0
	for w, qw := range query {
		f := ix.tf[i][w]
		if f == 0 {
			continue
		}
		df := float64(ix.df[w])
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		norm := f * (k1 + 1) / (f + k1*(1-b+b*ix.length[i]/ix.avgLen))
		score += qw * idf * norm
	}
	return score
}

// blend mixes the embedder's cosine similarities into scores, whose best is best.
func (ix *Index) blend(ctx context.Context, task string, scores []float64, best float64) error {
	vecs, err := ix.docVectors(ctx)
	if err != nil {
		return err
	}
	qv, err := ix.opts.Embedder.Embed(ctx, []string{task})
	if err != nil {
		return fmt.Errorf("embedding the task: %w", err)
	}
	if len(qv) != 1 {
		return fmt.Errorf("embedding the task: the embedder gave %d vectors for one", len(qv))
	}
	w := ix.opts.Blend
	for i := range scores {
		lex := 0.0
		if best > 0 {
			lex = scores[i] / best
		}
		scores[i] = (1-w)*lex + w*embedder.Cosine(qv[0], vecs[i])
	}
	return nil
}

// docVectors embeds the tools once; a failure (a model that is down, a search
// whose context ended) is not kept, so the next search tries again.
func (ix *Index) docVectors(ctx context.Context) ([][]float32, error) {
	ix.vecMu.Lock()
	defer ix.vecMu.Unlock()
	if ix.vecs != nil {
		return ix.vecs, nil
	}
	texts := make([]string, len(ix.docs))
	for i, d := range ix.docs {
		texts[i] = strings.Join([]string{d.Words, d.Title, d.Description}, ". ")
	}
	vecs, err := ix.opts.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embedding the tools: %w", err)
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("embedding the tools: the embedder gave %d vectors for %d tools", len(vecs), len(texts))
	}
	ix.vecs = vecs
	return vecs, nil
}
