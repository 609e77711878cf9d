// Package replay replays recorded agent tool calls (testdata/*.jsonl,
// published runs of real agents against real tools; testdata/README.md
// says where each comes from) through a gateway, each recorded session
// one MCP session on its stdio front, against replay children that
// answer each call with the recorded output's hash, padded to the
// recorded size. It counts the calls memory saved and the wrong answers
// it served (a served answer whose hash is not what the real tool
// answered at that point of the trace), and the time the saved calls
// took against forwarded ones of the same size.
//
// The gateway is the one `nexus serve` runs (run.Build), in process:
// every call crosses the stdio front, the session, policy, memory and a
// streamable HTTP hop to the child, as in a real deployment, without
// one process start per recorded session.
package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/bits"
	"os"
	"time"

	"github.com/nexus-mcp/nexus/memory"
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
	Calls, Reads                 int
	ExactWithin, ExactAcross     int // exact hits on the same session's / another session's answer
	SimilarWithin, SimilarAcross int // similarity hits
	WrongExact, WrongSimilar     int // hits whose hash is not the recorded one
	CharsSaved                   int64
	Sessions                     int
	ChildCalls                   int64 // calls the children answered
	// Forwarded and Served are the calls' times through the gateway:
	// answered by the child, and from memory.
	Forwarded, Served []time.Duration
	// TimeSaved sums, over the calls served from memory, what a forwarded
	// call of the same size (by powers of 4 of its answer's length) took
	// on average, less what the hit took.
	TimeSaved                     time.Duration
	SimilarRewrites               map[string]int
	wrongSamples, similarExamples []string
}

// Saved is the calls answered from memory.
func (r Result) Saved() int { return r.ExactWithin + r.ExactAcross + r.SimilarWithin + r.SimilarAcross }

// Replay replays calls through one gateway whose home is dir, each
// session a client session of its own, in trace order: with team, every
// session shares the gateway's memory (one team's gateway); without,
// memory is cleared before each session, as `nexus cache clear` does
// from another process, so each session starts with nothing remembered
// (sessions alone).
func Replay(ctx context.Context, calls []Call, dir string, team bool) (Result, error) {
	r := Result{SimilarRewrites: map[string]int{}}
	ch, err := startChildren(calls)
	if err != nil {
		return r, err
	}
	defer ch.close()
	g, err := startGateway(ctx, ch, dir)
	if err != nil {
		return r, err
	}
	defer g.close()
	sizes := map[int][]time.Duration{} // forwarded times by size class
	type hit struct {
		class int
		took  time.Duration
	}
	var hits []hit
	for i, sc := range splitSessions(calls) {
		if i > 0 && !team {
			if err := g.clear(ctx); err != nil {
				return r, err
			}
		}
		s, err := g.session()
		if err != nil {
			return r, err
		}
		r.Sessions++
		for _, c := range sc {
			r.Calls++
			if c.RW == "read" {
				r.Reads++
			}
			out, took, err := s.call(ch, c)
			if err != nil {
				s.close()
				return r, fmt.Errorf("%s #%d: %w", c.Session, c.Index, err)
			}
			class := bits.Len64(uint64(c.Chars)) / 2
			status := out.Meta.Cache.Status
			if status != memory.StatusHit && status != memory.StatusSemanticHit {
				sizes[class] = append(sizes[class], took)
				r.Forwarded = append(r.Forwarded, took)
				continue
			}
			hits = append(hits, hit{class, took})
			r.Served = append(r.Served, took)
			within := out.Structured.Session == c.Session
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
				for _, rw := range out.Meta.Cache.Rewrites {
					r.SimilarRewrites[rw]++
				}
				r.similarExamples = append(r.similarExamples, fmt.Sprintf("%s: %s / %q", recordedTool(c), c.Arguments, out.Meta.Cache.Matched))
			}
			if out.Structured.SHA1 != c.SHA1 || c.IsError {
				if status == memory.StatusHit {
					r.WrongExact++
				} else {
					r.WrongSimilar++
				}
				r.wrongSamples = append(r.wrongSamples, fmt.Sprintf("%s %s #%d %s %s", status, c.Session, c.Index, recordedTool(c), c.Arguments))
			}
		}
		s.close()
	}
	r.ChildCalls = ch.calls.Load()
	all := mean(r.Forwarded)
	for _, h := range hits {
		fwd := all
		if d, ok := sizes[h.class]; ok {
			fwd = mean(d)
		}
		r.TimeSaved += max(fwd-h.took, 0)
	}
	return r, nil
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// splitSessions cuts calls, in trace order, into sessions.
func splitSessions(calls []Call) [][]Call {
	var out [][]Call
	for i, c := range calls {
		if i == 0 || c.Session != calls[i-1].Session {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], c)
	}
	return out
}
