package embedder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// HTTPConfig configures the HTTP embedders and the chat verifier.
type HTTPConfig struct {
	BaseURL string        // e.g. "https://api.openai.com" or "http://localhost:11434"; a trailing "/v1" is accepted
	Model   string        // e.g. "text-embedding-3-small", "nomic-embed-text", "gpt-4o-mini"
	APIKey  string        // sent as "Authorization: Bearer KEY" when not empty (resolved by the gateway)
	Dims    int           // expected vector length; 0: whatever the server returns
	Timeout time.Duration // per request; 0: DefaultHTTPTimeout
	Client  *http.Client  // nil: a client of its own
}

// DefaultHTTPTimeout bounds one embedding or verifier request.
const DefaultHTTPTimeout = 2 * time.Second

// maxHTTPResponse caps what an embedding or chat response may be.
const maxHTTPResponse = 64 << 20

func (c HTTPConfig) check(what string) (HTTPConfig, error) {
	if c.BaseURL == "" {
		return c, fmt.Errorf("memory: %s: base URL is empty", what)
	}
	if c.Model == "" {
		return c, fmt.Errorf("memory: %s: model is empty", what)
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultHTTPTimeout
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: c.Timeout}
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return c, nil
}

// url joins the base URL and path; a base that already ends with the
// path's first segment ("/v1", "/api") does not repeat it.
func (c HTTPConfig) url(path string) string {
	first := path[:strings.Index(path[1:], "/")+1]
	return strings.TrimSuffix(c.BaseURL, first) + path
}

// post sends body as JSON and decodes a 2xx answer into out.
func (c HTTPConfig) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(path), bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPResponse+1))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if len(data) > maxHTTPResponse {
		return fmt.Errorf("response over %d bytes", maxHTTPResponse)
	}
	if resp.StatusCode/100 != 2 {
		snippet := strings.TrimSpace(string(data))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		return fmt.Errorf("%s: HTTP %d: %s", req.URL.Path, resp.StatusCode, snippet)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: decode response: %w", req.URL.Path, err)
	}
	return nil
}

// OpenAIEmbedder calls an OpenAI-compatible POST {base}/v1/embeddings
// (OpenAI, vLLM, llama.cpp server, LM Studio, Ollama's /v1).
type OpenAIEmbedder struct{ c HTTPConfig }

// NewOpenAIEmbedder checks c and returns the client.
func NewOpenAIEmbedder(c HTTPConfig) (*OpenAIEmbedder, error) {
	c, err := c.check("openai embedder")
	if err != nil {
		return nil, err
	}
	return &OpenAIEmbedder{c: c}, nil
}

// Identity implements Embedder.
func (e *OpenAIEmbedder) Identity() Identity {
	return Identity{Name: "openai", Model: e.c.Model, Dims: e.c.Dims}
}

// Embed implements Embedder.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	var resp struct {
		Data []struct {
			Index     *int      `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	body := map[string]any{"model": e.c.Model, "input": texts, "encoding_format": "float"}
	if err := e.c.post(ctx, "/v1/embeddings", body, &resp); err != nil {
		return nil, fmt.Errorf("openai embeddings: %w", err)
	}
	if len(resp.Data) != len(texts) {
		return nil, fmt.Errorf("openai embeddings: got %d vectors for %d texts", len(resp.Data), len(texts))
	}
	d := resp.Data
	slices.SortStableFunc(d, func(a, b struct {
		Index     *int      `json:"index"`
		Embedding []float32 `json:"embedding"`
	}) int {
		return idx(a.Index) - idx(b.Index)
	})
	out := make([][]float32, len(d))
	for i, x := range d {
		if x.Index != nil && *x.Index != i {
			return nil, fmt.Errorf("openai embeddings: indexes are not 0..%d", len(texts)-1)
		}
		out[i] = x.Embedding
	}
	if err := CheckVectors(out, len(texts), e.c.Dims); err != nil {
		return nil, fmt.Errorf("openai embeddings: %w", err)
	}
	return out, nil
}

func idx(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// OllamaEmbedder calls Ollama's native POST {base}/api/embed.
type OllamaEmbedder struct{ c HTTPConfig }

// NewOllamaEmbedder checks c and returns the client.
func NewOllamaEmbedder(c HTTPConfig) (*OllamaEmbedder, error) {
	c, err := c.check("ollama embedder")
	if err != nil {
		return nil, err
	}
	return &OllamaEmbedder{c: c}, nil
}

// Identity implements Embedder.
func (e *OllamaEmbedder) Identity() Identity {
	return Identity{Name: "ollama", Model: e.c.Model, Dims: e.c.Dims}
}

// Embed implements Embedder.
func (e *OllamaEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	var resp struct {
		Embeddings [][]float32 `json:"embeddings"`
	}
	if err := e.c.post(ctx, "/api/embed", map[string]any{"model": e.c.Model, "input": texts}, &resp); err != nil {
		return nil, fmt.Errorf("ollama embed: %w", err)
	}
	if err := CheckVectors(resp.Embeddings, len(texts), e.c.Dims); err != nil {
		return nil, fmt.Errorf("ollama embed: %w", err)
	}
	return resp.Embeddings, nil
}

// Config selects and configures an embedder, as config names it.
type Config struct {
	Provider string // "lexical" (or ""), "openai", "ollama"
	HTTPConfig
}

// New returns the embedder c names.
func New(c Config) (Embedder, error) {
	switch strings.ToLower(c.Provider) {
	case "", LexicalName:
		return NewLexical(), nil
	case "openai":
		return NewOpenAIEmbedder(c.HTTPConfig)
	case "ollama":
		return NewOllamaEmbedder(c.HTTPConfig)
	}
	return nil, fmt.Errorf(`memory: embedder provider %q: write "lexical", "openai" or "ollama"`, c.Provider)
}

// ChatVerifier asks an OpenAI-compatible POST {base}/v1/chat/completions
// model for a yes/no verdict.
type ChatVerifier struct{ c HTTPConfig }

// NewChatVerifier checks c and returns the client.
func NewChatVerifier(c HTTPConfig) (*ChatVerifier, error) {
	c, err := c.check("verifier")
	if err != nil {
		return nil, err
	}
	return &ChatVerifier{c: c}, nil
}

const verifierPrompt = `You decide whether two requests made to the tool %s ask for exactly the same thing, so that the answer to the first can be given for the second. Requests that differ in any number, date, version, name, identifier, environment, scope or negation are different. Answer with one word: yes or no.`

// Same implements Verifier.
func (v *ChatVerifier) Same(ctx context.Context, tool, a, b string) (bool, error) {
	body := map[string]any{
		"model": v.c.Model,
		"messages": []map[string]string{
			{"role": "system", "content": fmt.Sprintf(verifierPrompt, tool)},
			{"role": "user", "content": "Request 1: " + strconv.Quote(a) + "\nRequest 2: " + strconv.Quote(b) + "\nSame request?"},
		},
		"temperature": 0,
		"max_tokens":  3,
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := v.c.post(ctx, "/v1/chat/completions", body, &resp); err != nil {
		return false, fmt.Errorf("verifier: %w", err)
	}
	if len(resp.Choices) == 0 {
		return false, errors.New("verifier: no choices in the answer")
	}
	ans := strings.ToLower(strings.TrimLeftFunc(resp.Choices[0].Message.Content, func(r rune) bool {
		return !unicode.IsLetter(r)
	}))
	switch {
	case strings.HasPrefix(ans, "yes"):
		return true, nil
	case strings.HasPrefix(ans, "no"):
		return false, nil
	}
	return false, fmt.Errorf("verifier: answer %q is neither yes nor no", resp.Choices[0].Message.Content)
}
