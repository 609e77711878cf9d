package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// migration moves the schema from version i to i+1, where i is its index
// in migrations. Migrations run in one IMMEDIATE transaction together with
// the PRAGMA user_version update, so a crash leaves the old version whole.
// Append new migrations; never edit a released one.
type migration func(ctx context.Context, tx *sql.Tx) error

// migrations is the schema history. Version 1 keys entries by an
// INTEGER PRIMARY KEY AUTOINCREMENT id that is never reused, so a later
// vec0 table can use it as its rowid.
var migrations = [...]migration{
	execAll(
		`CREATE TABLE entries (
			id           INTEGER PRIMARY KEY AUTOINCREMENT,
			key          BLOB    NOT NULL UNIQUE, -- sha256(tool, scope, fingerprint)
			tool         TEXT    NOT NULL,        -- canonical name "server.tool"
			server       TEXT    NOT NULL,
			scope        TEXT    NOT NULL,        -- "" (shared) or "agent:NAME"
			fingerprint  TEXT    NOT NULL,        -- hex sha256 of args
			args         TEXT    NOT NULL,        -- canonical args JSON
			result       BLOB    NOT NULL,        -- CallToolResult JSON, redacted
			size         INTEGER NOT NULL,        -- len(result)
			duration_ms  INTEGER NOT NULL,        -- how long the child took
			created_at   INTEGER NOT NULL,        -- unix ms
			expires_at   INTEGER,                 -- unix ms, NULL = never
			last_used_at INTEGER NOT NULL,        -- unix ms
			hits         INTEGER NOT NULL DEFAULT 0
		)`,
		`CREATE INDEX entries_lru ON entries (last_used_at, id)`,
		`CREATE INDEX entries_expiry ON entries (expires_at) WHERE expires_at IS NOT NULL`,
		`CREATE INDEX entries_server ON entries (server)`,
		`CREATE INDEX entries_tool ON entries (tool)`,
		// totals is kept exact by triggers, so bounds are checked without a scan.
		`CREATE TABLE totals (
			id      INTEGER PRIMARY KEY CHECK (id = 1),
			entries INTEGER NOT NULL,
			bytes   INTEGER NOT NULL
		)`,
		`INSERT INTO totals (id, entries, bytes) VALUES (1, 0, 0)`,
		`CREATE TRIGGER entries_ai AFTER INSERT ON entries BEGIN
			UPDATE totals SET entries = entries + 1, bytes = bytes + NEW.size WHERE id = 1;
		END`,
		`CREATE TRIGGER entries_ad AFTER DELETE ON entries BEGIN
			UPDATE totals SET entries = entries - 1, bytes = bytes - OLD.size WHERE id = 1;
		END`,
		`CREATE TRIGGER entries_au AFTER UPDATE OF size ON entries BEGIN
			UPDATE totals SET bytes = bytes - OLD.size + NEW.size WHERE id = 1;
		END`,
		// generations counts invalidations per "tool:NAME", "server:NAME" and
		// "*"; a result fetched before an invalidation is not stored after it.
		`CREATE TABLE generations (
			name TEXT PRIMARY KEY,
			gen  INTEGER NOT NULL
		) WITHOUT ROWID`,
		// tool_stats holds the counters `nexus cache stats` reports.
		`CREATE TABLE tool_stats (
			tool      TEXT PRIMARY KEY,
			server    TEXT NOT NULL,
			hits      INTEGER NOT NULL DEFAULT 0,
			misses    INTEGER NOT NULL DEFAULT 0,
			bypasses  INTEGER NOT NULL DEFAULT 0,
			coalesced INTEGER NOT NULL DEFAULT 0,
			saved_ms  INTEGER NOT NULL DEFAULT 0
		) WITHOUT ROWID`,
	),
	// Version 2: similarity hits. An entry with free text records its
	// bucket, the embedder that made its vector, the text and the vector's
	// length; the vector itself lives in the vec0 table vec_f<dims>
	// (created on first use, see ensureVecTable), keyed by the entry id.
	execAll(
		`ALTER TABLE entries ADD COLUMN bucket BLOB`,      // sha256 of tool, scope, other args; NULL: no vector
		`ALTER TABLE entries ADD COLUMN embedder TEXT`,    // "name/model"
		`ALTER TABLE entries ADD COLUMN free_text TEXT`,   // the text that was embedded
		`ALTER TABLE entries ADD COLUMN vec_dims INTEGER`, // length of the vector in vec_f<dims>
		`ALTER TABLE tool_stats ADD COLUMN semantic_hits INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE tool_stats ADD COLUMN gray_accepted INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE tool_stats ADD COLUMN gray_rejected INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE tool_stats ADD COLUMN gray_unverified INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE tool_stats ADD COLUMN guard_rejections INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE tool_stats ADD COLUMN embed_failures INTEGER NOT NULL DEFAULT 0`,
	),
	// Version 3: stale-if-error. A server that restarted or changed its
	// tools marks its entries stale instead of deleting them: never
	// served as fresh, still there to stand in for a failing child.
	execAll(
		`ALTER TABLE entries ADD COLUMN stale INTEGER NOT NULL DEFAULT 0`,
	),
	// Version 4: what verification measured outlives the process. Per
	// tool, the answers checked against the child and how many differed;
	// and every similarity pair the child refuted (by the canonical forms
	// of its texts), with the rewrites that made it a hit, so it never
	// makes one again.
	execAll(
		`ALTER TABLE tool_stats ADD COLUMN semantic_checks INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE tool_stats ADD COLUMN false_hits INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE tool_stats ADD COLUMN exact_checks INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE tool_stats ADD COLUMN stale_answers INTEGER NOT NULL DEFAULT 0`,
		`CREATE TABLE refuted (
			tool       TEXT    NOT NULL,
			asked      TEXT    NOT NULL, -- canonical form of the text asked
			stored     TEXT    NOT NULL, -- ... and of the text whose answer was served
			rewrites   TEXT    NOT NULL, -- the rewrites that made it a hit, space-separated
			refuted_at INTEGER NOT NULL, -- unix ms
			PRIMARY KEY (tool, asked, stored)
		) WITHOUT ROWID`,
	),
}

// schemaVersion is the user_version this package writes and reads.
const schemaVersion = len(migrations)

func execAll(stmts ...string) migration {
	return func(ctx context.Context, tx *sql.Tx) error {
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("%.40q: %w", s, err)
			}
		}
		return nil
	}
}

// migrate brings the database at db up to schemaVersion. It takes the write
// lock only when there is something to do, so processes opening an
// up-to-date database do not queue behind each other.
func migrate(ctx context.Context, db *sql.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v == schemaVersion {
		return nil
	}
	if v > schemaVersion {
		return fmt.Errorf("schema version %d is newer than this nexus understands (%d); upgrade nexus or move the file aside", v, schemaVersion)
	}
	tx, err := db.BeginTx(ctx, nil) // IMMEDIATE: see openDB
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	// Another process may have migrated while we waited for the lock.
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("schema version %d is newer than this nexus understands (%d); upgrade nexus or move the file aside", v, schemaVersion)
	}
	for ; v < schemaVersion; v++ {
		if err := migrations[v](ctx, tx); err != nil {
			return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migration: %w", err)
	}
	return nil
}
