package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/internal/sqlitedb"
)

var at = time.Date(2026, 12, 3, 18, 4, 5, 123456000, time.UTC)

// golden is one record per decision type and the line it is shipped as. A
// change here is a change of the documented schema (docs/operations.md).
var golden = []struct {
	name string
	rec  Record
	line string
}{
	{"allowed", Record{Time: at, Agent: "coder", Client: "claude-code", ClientVersion: "2.1.0", Session: "s-1", Method: "tools/call",
		Tool: "fs.write_file", Server: "fs", Rule: `allow "fs.*"`, Origin: "policy.agents.coder", Source: "/home/u/.nexus/config.json",
		Revision: "0123456789ab", Outcome: "ok", Duration: 2500 * time.Microsecond, Child: 2 * time.Millisecond, Memory: "bypass",
		ArgumentsHash: HashArguments([]byte(`{"path":"/tmp/x"}`)), Arguments: json.RawMessage(`{"path":"/tmp/x"}`)},
		`{"schema":"nexus.audit/v1","time":"2026-12-03T18:04:05.123456Z","agent":"coder","client_name":"claude-code","client_version":"2.1.0","session":"s-1","method":"tools/call","tool":"fs.write_file","server":"fs","arguments_sha256":"cb1533f3eb4170695956d87bb17a94f79c8126c59bb60392d71d7e7c20192465","arguments":{"path":"/tmp/x"},"decision":"allowed","rule":"allow \"fs.*\"","policy":"policy.agents.coder","policy_source":"/home/u/.nexus/config.json","policy_revision":"0123456789ab","cache":"bypass","child_ms":2,"duration_ms":2.5,"outcome":"ok"}`},
	{"denied by rule", Record{Time: at, Agent: "coder", Session: "s-1", Method: "tools/call", Tool: "fs.delete", Server: "fs",
		Refused: true, Rule: `deny "fs.delete"`, Origin: "policy.agents.coder", Revision: "0123456789ab", Outcome: "refused", Duration: 40 * time.Microsecond},
		`{"schema":"nexus.audit/v1","time":"2026-12-03T18:04:05.123456Z","agent":"coder","client_name":"","client_version":"","session":"s-1","method":"tools/call","tool":"fs.delete","server":"fs","arguments_sha256":"","decision":"denied","rule":"deny \"fs.delete\"","policy":"policy.agents.coder","policy_source":"","policy_revision":"0123456789ab","cache":"none","child_ms":0,"duration_ms":0.04,"outcome":"refused"}`},
	{"denied by the default read-only", Record{Time: at, Agent: "anonymous", Client: "cursor", ClientVersion: "1.0", Session: "request 7",
		Method: "tools/call", Tool: "fs.write_file", Server: "fs", Refused: true, Rule: "no allow rule matches", Origin: "built-in default",
		Revision: "ffeeddccbbaa", Outcome: "refused", Duration: 30 * time.Microsecond},
		`{"schema":"nexus.audit/v1","time":"2026-12-03T18:04:05.123456Z","agent":"anonymous","client_name":"cursor","client_version":"1.0","session":"request 7","method":"tools/call","tool":"fs.write_file","server":"fs","arguments_sha256":"","decision":"denied","rule":"no allow rule matches","policy":"built-in default","policy_source":"","policy_revision":"ffeeddccbbaa","cache":"none","child_ms":0,"duration_ms":0.03,"outcome":"refused"}`},
	{"cache hit", Record{Time: at, Agent: "coder", Session: "s-2", Method: "tools/call", Tool: "fs.read_file", Server: "fs",
		Rule: `allow "@readonly"`, Origin: "built-in default", Revision: "0123456789ab", Outcome: "ok", Duration: 300 * time.Microsecond, Memory: "hit",
		ArgumentsHash: HashArguments([]byte(`{"path":"/tmp/x"}`))},
		`{"schema":"nexus.audit/v1","time":"2026-12-03T18:04:05.123456Z","agent":"coder","client_name":"","client_version":"","session":"s-2","method":"tools/call","tool":"fs.read_file","server":"fs","arguments_sha256":"cb1533f3eb4170695956d87bb17a94f79c8126c59bb60392d71d7e7c20192465","decision":"allowed","rule":"allow \"@readonly\"","policy":"built-in default","policy_source":"","policy_revision":"0123456789ab","cache":"hit","child_ms":0,"duration_ms":0.3,"outcome":"ok"}`},
	{"child error", Record{Time: at, Agent: "coder", Session: "s-2", Method: "tools/call", Tool: "fs.write_file", Server: "fs",
		Rule: `allow "fs.*"`, Origin: "policy.agents.coder", Revision: "0123456789ab", Outcome: "rpc_error", Duration: 12 * time.Millisecond, Child: 11 * time.Millisecond, Memory: "bypass"},
		`{"schema":"nexus.audit/v1","time":"2026-12-03T18:04:05.123456Z","agent":"coder","client_name":"","client_version":"","session":"s-2","method":"tools/call","tool":"fs.write_file","server":"fs","arguments_sha256":"","decision":"allowed","rule":"allow \"fs.*\"","policy":"policy.agents.coder","policy_source":"","policy_revision":"0123456789ab","cache":"bypass","child_ms":11,"duration_ms":12,"outcome":"rpc_error"}`},
	{"child timeout", Record{Time: at, Agent: "coder", Session: "s-2", Method: "tools/call", Tool: "fs.slow", Server: "fs",
		Rule: `allow "fs.*"`, Origin: "policy.agents.coder", Revision: "0123456789ab", Outcome: "timeout", Duration: 30 * time.Second, Child: 30 * time.Second, Memory: "bypass"},
		`{"schema":"nexus.audit/v1","time":"2026-12-03T18:04:05.123456Z","agent":"coder","client_name":"","client_version":"","session":"s-2","method":"tools/call","tool":"fs.slow","server":"fs","arguments_sha256":"","decision":"allowed","rule":"allow \"fs.*\"","policy":"policy.agents.coder","policy_source":"","policy_revision":"0123456789ab","cache":"bypass","child_ms":30000,"duration_ms":30000,"outcome":"timeout"}`},
	{"denied resource read", Record{Time: at, Agent: "coder", Method: "resources/read", Tool: "fs.*", Server: "fs",
		Refused: true, Rule: `deny "fs.*"`, Origin: "policy.default", Revision: "0123456789ab", Outcome: "refused"},
		`{"schema":"nexus.audit/v1","time":"2026-12-03T18:04:05.123456Z","agent":"coder","client_name":"","client_version":"","session":"","method":"resources/read","tool":"fs.*","server":"fs","arguments_sha256":"","decision":"denied","rule":"deny \"fs.*\"","policy":"policy.default","policy_source":"","policy_revision":"0123456789ab","cache":"none","child_ms":0,"duration_ms":0,"outcome":"refused"}`},
}

// TestGoldenLines: each decision type is shipped as its golden line, and a
// record read back from the store ships the same.
func TestGoldenLines(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, g := range golden {
		e := g.rec.Entry()
		if got := strings.TrimSuffix(string(e.Line()), "\n"); got != g.line {
			t.Errorf("%s:\n got %s\nwant %s", g.name, got, g.line)
		}
		if err := s.Write(ctx, []Record{g.rec}); err != nil {
			t.Fatal(err)
		}
		back, err := s.Query(ctx, Filter{Limit: 1})
		if err != nil || len(back) != 1 {
			t.Fatalf("%s: read back %v, %v", g.name, back, err)
		}
		if got := back[0].Entry(); string(got.Line()) != string(e.Line()) {
			t.Errorf("%s: read back from the store as\n%s", g.name, got.Line())
		}
	}
}

// TestOldTrailGainsColumns: a trail written before the schema's new columns
// opens, keeps its rows and takes the new fields.
func TestOldTrailGainsColumns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	db, err := sqlitedb.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE TABLE nexus_audit (id INTEGER PRIMARY KEY AUTOINCREMENT, at BIGINT NOT NULL,
			agent TEXT NOT NULL, method TEXT NOT NULL, tool TEXT NOT NULL, server TEXT NOT NULL,
			refused INTEGER NOT NULL, rule TEXT NOT NULL, origin TEXT NOT NULL, source TEXT NOT NULL,
			outcome TEXT NOT NULL, duration_us BIGINT NOT NULL, memory TEXT NOT NULL, arguments TEXT, size BIGINT NOT NULL)`,
		`INSERT INTO nexus_audit (at, agent, method, tool, server, refused, rule, origin, source, outcome, duration_us, memory, size)
			VALUES (1, 'old', 'tools/call', 'fs.x', 'fs', 1, 'r', 'o', '', 'refused', 5, '', 100)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Write(ctx, []Record{golden[0].rec}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Query(ctx, Filter{})
	if err != nil || len(recs) != 2 || recs[1].Agent != "old" || recs[0].Revision != "0123456789ab" || recs[0].Client != "claude-code" {
		t.Fatalf("records %+v, %v", recs, err)
	}
}

// TestExportRotates: the export appends one line per entry and rotates past its
// bound, keeping Keep old files; every line is a whole entry.
func TestExportRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "export", "audit.jsonl")
	line := golden[1].rec.Entry().Line()
	x, err := NewExporter(path, int64(len(line))*10, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 35 {
		x.Add(golden[1].rec.Entry())
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range []string{path, path + ".1", path + ".2"} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e Entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Schema != Schema {
				t.Errorf("%s: a line that is no entry: %q", p, sc.Text())
			}
			total++
		}
		f.Close()
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	if _, err := os.Stat(path + ".3"); err == nil {
		t.Error("a third rotated file is kept, beyond keep 2")
	}
	if total != 25 { // 35 lines, 10 a file, the oldest file dropped
		t.Errorf("%d lines in the files, want 25", total)
	}
}

// TestRecentFilters: the recent entries come newest first, bounded, filtered.
func TestRecentFilters(t *testing.T) {
	r := NewRecent(4)
	for i := range 6 {
		rec := golden[i%len(golden)].rec
		rec.Agent = fmt.Sprint("a", i)
		r.Add(rec.Entry())
	}
	all := r.List(Match{}, 10)
	if len(all) != 4 || all[0].Agent != "a5" || all[3].Agent != "a2" {
		t.Fatalf("recent %+v", all)
	}
	if d := r.List(Match{Decision: Denied}, 10); len(d) != 1 || d[0].Agent != "a2" {
		t.Errorf("denied %+v", d)
	}
	if d := r.List(Match{Tool: "write"}, 10); len(d) != 2 {
		t.Errorf("tool ~ write %+v", d)
	}
}

// TestEntryTime holds entryTime to time.Format's output for the layout, in
// every zone and at the edges of what four digits hold.
func TestEntryTime(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	times := []time.Time{
		time.Date(2026, 12, 4, 18, 5, 9, 123456789, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, east), // the day before, in UTC
		time.Date(0, 1, 1, 0, 0, 0, 999, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 6, 1, 12, 0, 0, 0, time.UTC),
		{},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		times = append(times, time.Unix(r.Int64N(1<<40)-1<<39, r.Int64N(1e9)).In(east))
	}
	for _, tm := range times {
		if got, want := entryTime(tm), tm.UTC().Format(timeLayout); got != want {
			t.Errorf("entryTime(%v) = %q, want %q", tm, got, want)
		}
	}
}
