// Package audit keeps the gateway's audit trail: every refused call and every
// allowed call of a tool that may change something, with who made it, what the
// policy decided and by which rule (and the file that rule is in), how the call
// ended, how long it took and what memory did.
//
// The trail lives in a SQLite file in NEXUS_HOME, or in the PostgreSQL database the
// gateway replicas share (then `nexus audit` and the refusal counts cover every
// replica). A Store reads and writes it; a Writer batches records into a Store
// from a goroutine of its own, so that a call never waits for a disk sync and never
// fails because the store is down.
package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/nexus-mcp/nexus/internal/sqlitedb"
)

// Record is one audited call.
type Record struct {
	// ID orders the records of a store (Filter.After); 0 for one not read from a store.
	ID     int64     `json:"-"`
	Time   time.Time `json:"time"`
	Agent  string    `json:"agent"`
	Method string    `json:"method"` // tools/call, prompts/get, resources/read...
	Tool   string    `json:"tool"`   // canonical <server>.<tool> (server.* for a server's resources)
	Server string    `json:"server,omitempty"`
	// Refused: the policy said no. Rule decided, in the policy Origin, configured
	// in the file Source.
	Refused  bool          `json:"refused"`
	Rule     string        `json:"rule"`
	Origin   string        `json:"origin"`
	Source   string        `json:"source,omitempty"`
	Outcome  string        `json:"outcome"`
	Duration time.Duration `json:"duration_ns"`
	Memory   string        `json:"memory,omitempty"` // hit, semantic_hit, miss, bypass; "" when memory was not asked
	// Arguments are kept only when the config asks ("audit": {"arguments":
	// "redacted"}), already redacted. ArgumentsHash is the hex SHA-256 of the
	// redacted arguments, kept always.
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	ArgumentsHash string          `json:"arguments_sha256,omitempty"`
	// Session is the client's session (or "request ID" of a stateless request);
	// Client and ClientVersion what the client said it is.
	Session       string `json:"session,omitempty"`
	Client        string `json:"client,omitempty"`
	ClientVersion string `json:"client_version,omitempty"`
	// Revision is the revision of the policy that decided.
	Revision string `json:"policy_revision,omitempty"`
	// Child is the time the child took (zero when it was not asked).
	Child time.Duration `json:"child_ns,omitempty"`
}

// size is what a record is counted as against the store's size bound: its text
// plus a fixed overhead for the row and its indexes.
func (r *Record) size() int64 {
	return int64(128 + len(r.Agent) + len(r.Method) + len(r.Tool) + len(r.Server) + len(r.Rule) +
		len(r.Origin) + len(r.Source) + len(r.Outcome) + len(r.Memory) + len(r.Arguments) +
		len(r.ArgumentsHash) + len(r.Session) + len(r.Client) + len(r.ClientVersion) + len(r.Revision))
}

// Store is an audit trail in SQLite or PostgreSQL. It is safe for concurrent use.
type Store struct {
	db       *sql.DB
	postgres bool
	where    string // for messages: the file, or "PostgreSQL"

	mu       sync.Mutex
	migrated bool // the table exists: created at the first use that reaches the database
}

const table = "nexus_audit"

// OpenSQLite opens (creating if needed) the trail in the SQLite file path, as
// sqlitedb.Open opens every file of Nexus: WAL with synchronous=NORMAL, so a
// batch costs no fsync of its own and a crash loses at most the last batches,
// never the file.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	// The file is created private to the user, like memory.db: it says who
	// called what, and the arguments when they are kept.
	db, err := sqlitedb.Open(path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("audit: opening %s: %w", path, err)
	}
	s := &Store{db: db, where: filepath.Clean(path)}
	if err := s.ensure(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// OpenPostgres opens the trail in the PostgreSQL database of dsn (a URL or
// key=value string, as libpq takes). Its table, nexus_audit in the first schema of
// the connection's search_path, is created at the first use that reaches the
// database: a database that is down when the gateway starts only delays the trail
// (the Writer retries), it does not turn it off.
func OpenPostgres(dsn string) (*Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("audit: the PostgreSQL dsn: %w", err)
	}
	return &Store{db: stdlib.OpenDB(*cfg), postgres: true, where: "PostgreSQL " + cfg.Host + "/" + cfg.Database}, nil
}

// ensure creates the table once.
func (s *Store) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.migrated {
		return nil
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	s.migrated = true
	return nil
}

// Where says where the trail is, for messages.
func (s *Store) Where() string { return s.where }

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) migrate(ctx context.Context) error {
	id := "id INTEGER PRIMARY KEY AUTOINCREMENT"
	if s.postgres {
		id = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
	}
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS ` + table + ` (` + id + `,
			at BIGINT NOT NULL,
			agent TEXT NOT NULL, method TEXT NOT NULL, tool TEXT NOT NULL, server TEXT NOT NULL,
			refused INTEGER NOT NULL, rule TEXT NOT NULL, origin TEXT NOT NULL, source TEXT NOT NULL,
			outcome TEXT NOT NULL, duration_us BIGINT NOT NULL, memory TEXT NOT NULL,
			arguments TEXT, size BIGINT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS ` + table + `_at ON ` + table + ` (at)`,
		`CREATE INDEX IF NOT EXISTS ` + table + `_agent ON ` + table + ` (agent, at)`,
		`CREATE INDEX IF NOT EXISTS ` + table + `_tool ON ` + table + ` (tool, at)`,
	}
	for _, q := range stmts {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("audit: creating the table in %s: %w", s.where, err)
		}
	}
	// Columns added since the first schema: a trail written by an earlier
	// version gains them, its old rows read as empty.
	for _, col := range addedColumns {
		q := `ALTER TABLE ` + table + ` ADD COLUMN ` + col
		if s.postgres {
			q = `ALTER TABLE ` + table + ` ADD COLUMN IF NOT EXISTS ` + col
		}
		if _, err := s.db.ExecContext(ctx, q); err != nil && !strings.Contains(err.Error(), "duplicate column") {
			return fmt.Errorf("audit: adding a column to %s: %w", s.where, err)
		}
	}
	return nil
}

// addedColumns are the columns of records since the first schema.
var addedColumns = []string{
	`arguments_sha256 TEXT NOT NULL DEFAULT ''`,
	`session TEXT NOT NULL DEFAULT ''`,
	`client TEXT NOT NULL DEFAULT ''`,
	`client_version TEXT NOT NULL DEFAULT ''`,
	`policy_revision TEXT NOT NULL DEFAULT ''`,
	`child_us BIGINT NOT NULL DEFAULT 0`,
}

// rebind turns ? placeholders into PostgreSQL's $1, $2...
func (s *Store) rebind(q string) string {
	if !s.postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// insertRows is how many records one INSERT carries: a statement per record
// would cost most of a batch's time in the driver, not in the database.
const insertRows = 64

const insertColumns = "(at, agent, method, tool, server, refused, rule, origin, source, outcome, duration_us, memory, arguments, size, " +
	"arguments_sha256, session, client, client_version, policy_revision, child_us)"

// Write appends records in one transaction: one commit per batch, a few
// multi-row INSERTs.
func (s *Store) Write(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := s.ensure(ctx); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("audit: writing to %s: %w", s.where, err)
	}
	defer tx.Rollback()
	args := make([]any, 0, 20*min(len(recs), insertRows))
	for chunk := range slices.Chunk(recs, insertRows) {
		var q strings.Builder
		q.WriteString("INSERT INTO " + table + " " + insertColumns + " VALUES ")
		args = args[:0]
		for i := range chunk {
			r := &chunk[i]
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			var arguments sql.NullString
			if len(r.Arguments) > 0 {
				arguments = sql.NullString{String: string(r.Arguments), Valid: true}
			}
			refused := 0
			if r.Refused {
				refused = 1
			}
			args = append(args, r.Time.UnixMicro(), r.Agent, r.Method, r.Tool, r.Server, refused, r.Rule, r.Origin, r.Source,
				r.Outcome, r.Duration.Microseconds(), r.Memory, arguments, r.size(),
				r.ArgumentsHash, r.Session, r.Client, r.ClientVersion, r.Revision, r.Child.Microseconds())
		}
		if _, err := tx.ExecContext(ctx, s.rebind(q.String()), args...); err != nil {
			return fmt.Errorf("audit: writing to %s: %w", s.where, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("audit: writing to %s: %w", s.where, err)
	}
	return nil
}

// Prune deletes records older than maxAge, then the oldest records until the rest
// count no more than maxBytes (see Record.size). A zero bound is no bound.
func (s *Store) Prune(ctx context.Context, now time.Time, maxAge time.Duration, maxBytes int64) (int64, error) {
	if err := s.ensure(ctx); err != nil {
		return 0, err
	}
	var deleted int64
	if maxAge > 0 {
		res, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM `+table+` WHERE at < ?`), now.Add(-maxAge).UnixMicro())
		if err != nil {
			return 0, fmt.Errorf("audit: pruning %s: %w", s.where, err)
		}
		n, _ := res.RowsAffected()
		deleted += n
	}
	if maxBytes > 0 {
		var total int64
		if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(size), 0) FROM `+table).Scan(&total); err != nil {
			return deleted, fmt.Errorf("audit: pruning %s: %w", s.where, err)
		}
		if total > maxBytes {
			// Keep the newest records that fit in 90% of the bound, so the next
			// records do not trigger another prune at once.
			res, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM `+table+` WHERE id <= (
				SELECT id FROM (SELECT id, SUM(size) OVER (ORDER BY id DESC) AS kept FROM `+table+`) newest
				WHERE kept > ? ORDER BY id DESC LIMIT 1)`), maxBytes/10*9)
			if err != nil {
				return deleted, fmt.Errorf("audit: pruning %s: %w", s.where, err)
			}
			n, _ := res.RowsAffected()
			deleted += n
		}
	}
	return deleted, nil
}

// Filter selects records for Query. Zero fields select everything.
type Filter struct {
	Agent string
	// Tool is a canonical name, or "server.*" for every tool of a server.
	Tool    string
	Since   time.Time
	Refused bool // refusals only
	Limit   int  // the newest Limit records (default 100)
	// After selects records written after the one of this ID (Record.ID): for
	// following the trail.
	After int64
}

// Query returns the records f selects, newest first.
func (s *Store) Query(ctx context.Context, f Filter) ([]Record, error) {
	var where []string
	var args []any
	if f.Agent != "" {
		where, args = append(where, "agent = ?"), append(args, f.Agent)
	}
	if server, ok := strings.CutSuffix(f.Tool, ".*"); ok {
		where, args = append(where, "server = ?"), append(args, server)
	} else if f.Tool != "" {
		where, args = append(where, "tool = ?"), append(args, f.Tool)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, f.Since.UnixMicro())
	}
	if f.Refused {
		where = append(where, "refused = 1")
	}
	if f.After > 0 {
		where, args = append(where, "id > ?"), append(args, f.After)
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	q := `SELECT id, at, agent, method, tool, server, refused, rule, origin, source, outcome, duration_us, memory, arguments,
		arguments_sha256, session, client, client_version, policy_revision, child_us FROM ` + table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT " + strconv.Itoa(f.Limit)
	rows, err := s.db.QueryContext(ctx, s.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("audit: reading %s: %w", s.where, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var at, us, childUS int64
		var refused int
		var argsText sql.NullString
		if err := rows.Scan(&r.ID, &at, &r.Agent, &r.Method, &r.Tool, &r.Server, &refused, &r.Rule, &r.Origin, &r.Source, &r.Outcome, &us, &r.Memory, &argsText,
			&r.ArgumentsHash, &r.Session, &r.Client, &r.ClientVersion, &r.Revision, &childUS); err != nil {
			return nil, fmt.Errorf("audit: reading %s: %w", s.where, err)
		}
		r.Time, r.Duration, r.Refused = time.UnixMicro(at), time.Duration(us)*time.Microsecond, refused == 1
		r.Child = time.Duration(childUS) * time.Microsecond
		if argsText.Valid {
			r.Arguments = json.RawMessage(argsText.String)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: reading %s: %w", s.where, err)
	}
	return out, nil
}

// Count is how many refusals one agent got for one tool.
type Count struct {
	Agent string `json:"agent"`
	Tool  string `json:"tool"`
	N     int64  `json:"refusals"`
}

// Refusals counts the refusals the trail holds since a time (zero: all it holds),
// per agent and tool, most frequent first.
func (s *Store) Refusals(ctx context.Context, since time.Time) ([]Count, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT agent, tool, COUNT(*) FROM `+table+`
		WHERE refused = 1 AND at >= ? GROUP BY agent, tool ORDER BY COUNT(*) DESC, agent, tool`), since.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("audit: reading %s: %w", s.where, err)
	}
	defer rows.Close()
	var out []Count
	for rows.Next() {
		var c Count
		if err := rows.Scan(&c.Agent, &c.Tool, &c.N); err != nil {
			return nil, fmt.Errorf("audit: reading %s: %w", s.where, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ErrClosed is what Add reports after Close.
var ErrClosed = errors.New("audit: the writer is closed")
