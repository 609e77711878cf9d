// Package replay replays recorded agent tool calls (testdata/*.jsonl,
// published runs of real agents against real tools; testdata/README.md
// says where each comes from) through memory's call step, against a
// replay child that answers each call with the recorded output's hash.
// It counts the calls memory saved and the wrong answers it served: a
// served answer whose hash is not what the real tool answered at that
// point of the trace.
package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/sqlite"
)

// Call is one recorded tool call (the fields the replay reads).
type Call struct {
	Dataset   string          `json:"dataset"`
	Session   string          `json:"session_id"`
	Index     int             `json:"index"`
	Tool      string          `json:"tool"`
	Action    *string         `json:"action"`
	Arguments json.RawMessage `json:"arguments"`
	RW        string          `json:"rw"` // read, write or other
	Server    string          `json:"mcp_server"`
	Model     string          `json:"model"`
	SHA1      string          `json:"output_sha1"`
	Chars     int64           `json:"output_chars"`
	IsError   bool            `json:"output_is_error"`
}

// Load reads a trace file, in its order (sessions one after another).
func Load(path string) ([]Call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Call
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, len(out)+1, err)
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// Result is what one replay found.
type Result struct {
	Calls, Reads                  int
	ExactWithin, ExactAcross      int // exact hits on the same session's / another session's answer
	SimilarWithin, SimilarAcross  int // similarity hits
	WrongExact, WrongSimilar      int // hits whose hash is not the recorded one
	CharsSaved                    int64
	Sessions                      int
	SimilarRewrites               map[string]int
	wrongSamples, similarExamples []string
}

// Saved is the calls answered from memory.
func (r Result) Saved() int { return r.ExactWithin + r.ExactAcross + r.SimilarWithin + r.SimilarAcross }

// Replay replays calls through memory, in dir: with team, one memory for
// every session in order (one team's gateway); without, a new memory for
// each session (sessions alone).
func Replay(ctx context.Context, calls []Call, dir string, team bool) (Result, error) {
	r := Result{SimilarRewrites: map[string]int{}}
	var m *memory.Memory
	open := func(name string) error {
		if m != nil {
			m.Close()
		}
		var err error
		m, err = memory.Open(ctx, memory.Options{Backend: sqlite.File(filepath.Join(dir, name+".db"))})
		if err != nil {
			return err
		}
		if err := m.Err(); err != nil {
			return err
		}
		m.SetSettings(memory.Settings{TTL: map[string]memory.TTL{"*": {Never: true}}})
		return nil
	}
	defer func() {
		if m != nil {
			m.Close()
		}
	}()
	session := ""
	for i, c := range calls {
		if c.Session != session {
			session = c.Session
			r.Sessions++
			if m == nil || !team {
				if err := open(fmt.Sprintf("m%d", i)); err != nil {
					return r, err
				}
			}
		}
		r.Calls++
		if c.RW == "read" {
			r.Reads++
		}
		t := tool(c)
		args := c.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		fwd := func(context.Context) (memory.Answer, error) {
			return memory.Answer{Result: answer(c)}, nil
		}
		res, err := m.Query(c.Model, t, args).Session(c.Session).Call(ctx, fwd)
		if err != nil {
			return r, fmt.Errorf("%s #%d: %w", c.Session, c.Index, err)
		}
		status, _, _ := memory.CacheStatus(res)
		if status != memory.StatusHit && status != memory.StatusSemanticHit {
			continue
		}
		var got struct {
			Meta struct {
				Cache struct {
					Rewrites []string `json:"rewrites"`
					Matched  string   `json:"matched"`
				} `json:"nexus/cache"`
			} `json:"_meta"`
			Structured struct {
				SHA1    string `json:"sha1"`
				Session string `json:"session"`
			} `json:"structuredContent"`
		}
		if err := json.Unmarshal(res, &got); err != nil {
			return r, err
		}
		within := got.Structured.Session == c.Session
		wrong := got.Structured.SHA1 != c.SHA1 || c.IsError
		r.CharsSaved += c.Chars
		switch {
		case status == memory.StatusHit && within:
			r.ExactWithin++
		case status == memory.StatusHit:
			r.ExactAcross++
		case within:
			r.SimilarWithin++
		default:
			r.SimilarAcross++
		}
		if status == memory.StatusSemanticHit {
			for _, rw := range got.Meta.Cache.Rewrites {
				r.SimilarRewrites[rw]++
			}
			r.similarExamples = append(r.similarExamples, fmt.Sprintf("%s: %s / %q", t.Name, args, got.Meta.Cache.Matched))
		}
		if wrong {
			if status == memory.StatusHit {
				r.WrongExact++
			} else {
				r.WrongSimilar++
			}
			r.wrongSamples = append(r.wrongSamples, fmt.Sprintf("%s %s #%d %s %s", status, c.Session, c.Index, t.Name, args))
		}
	}
	return r, nil
}

// tool is the memory.Tool of a recorded call: read calls are read-only,
// write calls are not (they invalidate their server's entries), and
// calls the trace could not class carry no annotations (not remembered).
func tool(c Call) memory.Tool {
	server := name(c.Server)
	n := c.Tool
	if c.Action != nil && *c.Action != "" {
		n += "__" + *c.Action
	}
	t := memory.Tool{Name: server + "." + name(n), Server: server, Annotated: c.RW != "other", ReadOnly: c.RW == "read"}
	// A schema with the call's string arguments, so free text (query, q,
	// text ...) is compared by similarity as with a real child's schema.
	var args map[string]json.RawMessage
	props := map[string]any{}
	if json.Unmarshal(c.Arguments, &args) == nil {
		for k, v := range args {
			if len(v) > 0 && v[0] == '"' {
				props[k] = map[string]string{"type": "string"}
			}
		}
	}
	t.InputSchema, _ = json.Marshal(map[string]any{"type": "object", "properties": props})
	return t
}

// name makes a server or tool name of letters, digits, - and _.
func name(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// answer is the replay child's answer to c: the recorded output's hash
// (and the session that made the call, so a hit says whose answer it was).
func answer(c Call) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]string{"type": "text", "text": c.SHA1}},
		"structuredContent": map[string]string{"sha1": c.SHA1, "session": c.Session},
		"isError":           c.IsError,
	})
	return b
}
