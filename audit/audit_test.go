package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/nexus-mcp/nexus/internal/pgtest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stores are the stores every test runs against: SQLite always, PostgreSQL when
// NEXUS_TEST_PG_DSN names a database (each test in a schema of its own).
func stores(t *testing.T) map[string]func(t *testing.T) *Store {
	out := map[string]func(t *testing.T) *Store{
		"sqlite": func(t *testing.T) *Store {
			s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	if os.Getenv(pgtest.EnvDSN) != "" || os.Getenv(pgtest.EnvRequire) == "1" {
		out["postgres"] = func(t *testing.T) *Store {
			s, err := OpenPostgres(pgtest.Schema(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	} else {
		t.Logf("PostgreSQL audit store not tested: set %s to test it", pgtest.EnvDSN)
	}
	return out
}

func rec(agent, tool string, refused bool, at time.Time) Record {
	r := Record{Time: at, Agent: agent, Method: "tools/call", Tool: tool, Server: strings.Split(tool, ".")[0],
		Refused: refused, Rule: `allow "*"`, Origin: "policy.default", Source: "/etc/nexus.json", Outcome: "ok",
		Duration: 1500 * time.Microsecond, Memory: "bypass"}
	if refused {
		r.Rule, r.Outcome, r.Memory = "no allow rule matches", "refused", ""
	}
	return r
}

func TestStoreWriteQuery(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			now := time.Now().Truncate(time.Microsecond)
			withArgs := rec("coder", "fs.write", false, now)
			withArgs.Arguments = json.RawMessage(`{"path":"/tmp/x"}`)
			in := []Record{
				rec("coder", "fs.read", true, now.Add(-2*time.Hour)),
				rec("coder", "fs.delete", true, now.Add(-time.Minute)),
				rec("reviewer", "git.push", true, now.Add(-time.Second)),
				withArgs,
			}
			if err := s.Write(ctx, in); err != nil {
				t.Fatal(err)
			}
			tests := []struct {
				name string
				f    Filter
				want []string // agent/tool, newest first
			}{
				{"all", Filter{}, []string{"coder/fs.write", "reviewer/git.push", "coder/fs.delete", "coder/fs.read"}},
				{"agent", Filter{Agent: "reviewer"}, []string{"reviewer/git.push"}},
				{"tool", Filter{Tool: "fs.delete"}, []string{"coder/fs.delete"}},
				{"server glob", Filter{Tool: "fs.*"}, []string{"coder/fs.write", "coder/fs.delete", "coder/fs.read"}},
				{"since", Filter{Since: now.Add(-time.Hour)}, []string{"coder/fs.write", "reviewer/git.push", "coder/fs.delete"}},
				{"refused", Filter{Refused: true, Agent: "coder"}, []string{"coder/fs.delete", "coder/fs.read"}},
				{"limit", Filter{Limit: 1}, []string{"coder/fs.write"}},
			}
			for _, tt := range tests {
				got, err := s.Query(ctx, tt.f)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, r := range got {
					names = append(names, r.Agent+"/"+r.Tool)
				}
				if fmt.Sprint(names) != fmt.Sprint(tt.want) {
					t.Errorf("%s: got %v, want %v", tt.name, names, tt.want)
				}
			}
			got, _ := s.Query(ctx, Filter{Limit: 1})
			if g := got[0]; !g.Time.Equal(now) || g.Duration != 1500*time.Microsecond || string(g.Arguments) != `{"path":"/tmp/x"}` ||
				g.Source != "/etc/nexus.json" || g.Memory != "bypass" || g.Refused {
				t.Errorf("a record does not come back as written: %+v", g)
			}
			counts, err := s.Refusals(ctx, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(counts) != "[{coder fs.delete 1} {coder fs.read 1} {reviewer git.push 1}]" {
				t.Errorf("refusal counts: %v", counts)
			}
		})
	}
}

func TestStorePrune(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			now := time.Now()
			var in []Record
			for i := range 100 {
				in = append(in, rec("coder", fmt.Sprintf("fs.t%03d", i), true, now.Add(time.Duration(i-100)*time.Hour)))
			}
			if err := s.Write(ctx, in); err != nil {
				t.Fatal(err)
			}
			// By age: records older than 50h go.
			if n, err := s.Prune(ctx, now, 50*time.Hour+time.Minute, 0); err != nil || n != 50 {
				t.Fatalf("pruned %d by age (%v), want 50", n, err)
			}
			// By size: what is left is 50 records of in[0].size() bytes; a bound
			// of 20 keeps the newest that fit in 90% of it (18).
			size := in[0].size()
			if n, err := s.Prune(ctx, now, 0, 20*size); err != nil || n != 32 {
				t.Fatalf("pruned %d by size (%v), want 32", n, err)
			}
			left, _ := s.Query(ctx, Filter{Limit: 1000})
			if len(left) != 18 || left[0].Tool != "fs.t099" || left[17].Tool != "fs.t082" {
				t.Fatalf("left after pruning: %d records, newest %s", len(left), left[0].Tool)
			}
			if n, err := s.Prune(ctx, now, time.Hour*1000, 20*size); err != nil || n != 0 {
				t.Errorf("a store within its bounds pruned %d (%v)", n, err)
			}
		})
	}
}

// TestWriterLosesNothingOnClose: records added just before Close are written.
func TestWriterLosesNothingOnClose(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			w := NewWriter(s, WriterOptions{})
			for i := range 1000 {
				w.Add(rec("coder", fmt.Sprintf("fs.t%d", i), i%2 == 0, time.Now()))
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := s.Query(context.Background(), Filter{Limit: 5000})
			if err != nil || len(got) != 1000 {
				t.Fatalf("after Close the store holds %d records (%v), want 1000", len(got), err)
			}
			if err := w.Close(); err != ErrClosed {
				t.Errorf("a second Close: %v", err)
			}
		})
	}
}

// TestWriterSurvivesAFailingStore: while the store fails, Add returns at once and
// records wait; once it works again they are written.
func TestWriterSurvivesAFailingStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.db")
	s, err := OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Break the store: its table goes, and a view of the same name makes every
	// insert fail until it is dropped.
	if _, err := s.db.Exec("DROP TABLE " + table + "; CREATE VIEW " + table + " AS SELECT 1 AS x"); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(s, WriterOptions{})
	for i := range 10 {
		w.Add(rec("coder", fmt.Sprintf("fs.t%d", i), true, time.Now()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	waiting := len(w.pending)
	w.mu.Unlock()
	if waiting != 10 {
		t.Fatalf("%d records wait after a failed write, want 10", waiting)
	}
	// Repair the store: the waiting records reach it.
	s.mu.Lock()
	s.migrated = false
	s.mu.Unlock()
	if _, err := s.db.Exec("DROP VIEW " + table); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Query(context.Background(), Filter{})
	if err != nil || len(got) != 10 {
		t.Fatalf("after the repair the store holds %d records (%v), want 10", len(got), err)
	}
}
