package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// pgMigrations is the PostgreSQL schema history, versioned like the
// SQLite one (memory/sqlite) but on its own: the two databases
// never exchange files. Version i+1 is reached by running pgMigrations[i]
// in the migrating transaction. Append new migrations; never edit a
// released one.
//
// The tables, named nexus_memory_* (beside the audit trail's nexus_audit),
// live in the connection's current schema (search_path), so several
// deployments, or tests, can share one database.
var pgMigrations = [...][]string{
	{
		`CREATE TABLE nexus_memory_entries (
			id           bigserial PRIMARY KEY,
			key          bytea  NOT NULL UNIQUE, -- sha256(tool, scope, fingerprint)
			tool         text   NOT NULL,        -- canonical name "server.tool"
			server       text   NOT NULL,
			scope        text   NOT NULL,        -- "" (shared) or "agent:NAME"
			fingerprint  text   NOT NULL,        -- hex sha256 of args
			args         text   NOT NULL,        -- canonical args JSON
			result       bytea  NOT NULL,        -- CallToolResult JSON, redacted
			size         bigint NOT NULL,        -- length(result)
			duration_ms  bigint NOT NULL,        -- how long the child took
			created_at   bigint NOT NULL,        -- unix ms
			expires_at   bigint,                 -- unix ms, NULL = never
			last_used_at bigint NOT NULL,        -- unix ms
			hits         bigint NOT NULL DEFAULT 0,
			-- similarity: NULL bucket = no vector
			bucket       bytea,                  -- sha256 of tool, scope, other args
			embedder     text,                   -- "name/model"
			free_text    text,                   -- the text that was embedded
			vec_dims     integer,                -- length of vec in float32s
			part         bigint,                 -- hash of embedder and bucket
			vec          bytea,                  -- float32 little endian, unit length
			-- the transaction that wrote the row, so replicas can read the
			-- vectors committed since their last look (see vectorsSince)
			xid          bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint)
		)`,
		`CREATE INDEX nexus_memory_entries_lru ON nexus_memory_entries (last_used_at, id)`,
		`CREATE INDEX nexus_memory_entries_expiry ON nexus_memory_entries (expires_at) WHERE expires_at IS NOT NULL`,
		`CREATE INDEX nexus_memory_entries_server ON nexus_memory_entries (server)`,
		`CREATE INDEX nexus_memory_entries_tool ON nexus_memory_entries (tool)`,
		`CREATE INDEX nexus_memory_entries_part ON nexus_memory_entries (part) WHERE part IS NOT NULL`,
		`CREATE INDEX nexus_memory_entries_xid ON nexus_memory_entries (xid) WHERE vec IS NOT NULL`,
		// totals is kept exact by triggers, so bounds are checked without a scan.
		`CREATE TABLE nexus_memory_totals (
			id      integer PRIMARY KEY CHECK (id = 1),
			entries bigint NOT NULL,
			bytes   bigint NOT NULL
		)`,
		`INSERT INTO nexus_memory_totals (id, entries, bytes) VALUES (1, 0, 0)`,
		`CREATE FUNCTION nexus_memory_entries_totals() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF TG_OP = 'INSERT' THEN
				UPDATE nexus_memory_totals SET entries = entries + 1, bytes = bytes + NEW.size WHERE id = 1;
			ELSIF TG_OP = 'DELETE' THEN
				UPDATE nexus_memory_totals SET entries = entries - 1, bytes = bytes - OLD.size WHERE id = 1;
			ELSIF NEW.size <> OLD.size THEN
				UPDATE nexus_memory_totals SET bytes = bytes - OLD.size + NEW.size WHERE id = 1;
			END IF;
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER nexus_memory_entries_totals AFTER INSERT OR DELETE OR UPDATE OF size ON nexus_memory_entries
			FOR EACH ROW EXECUTE FUNCTION nexus_memory_entries_totals()`,
		// generations counts invalidations per "tool:NAME", "server:NAME"
		// and "*"; a result fetched before an invalidation is not stored
		// after it, and a hot entry read before one is not served after it.
		`CREATE TABLE nexus_memory_generations (
			name text PRIMARY KEY,
			gen  bigint NOT NULL
		)`,
		// flights are the child calls in progress on some replica, so an
		// identical call on another replica waits instead of calling too.
		`CREATE TABLE nexus_memory_flights (
			key      bytea PRIMARY KEY,
			owner    text   NOT NULL,
			until_ms bigint NOT NULL -- the database's clock: a dead leader's claim lapses
		)`,
		// epoch counts invalidations; replicas lists the live replicas and
		// the last invalidation each has applied to its hot layer, so an
		// invalidating replica answers only once every live one has (see
		// awaitAcks).
		`CREATE TABLE nexus_memory_epoch (
			id integer PRIMARY KEY CHECK (id = 1),
			e  bigint NOT NULL
		)`,
		`INSERT INTO nexus_memory_epoch (id, e) VALUES (1, 0)`,
		`CREATE TABLE nexus_memory_replicas (
			id          text PRIMARY KEY,
			acked       bigint NOT NULL, -- the last epoch applied to its hot layer
			alive_until bigint NOT NULL  -- the database's clock, unix ms
		)`,
		`CREATE TABLE nexus_memory_tool_stats (
			tool             text PRIMARY KEY,
			server           text   NOT NULL,
			hits             bigint NOT NULL DEFAULT 0,
			misses           bigint NOT NULL DEFAULT 0,
			bypasses         bigint NOT NULL DEFAULT 0,
			coalesced        bigint NOT NULL DEFAULT 0,
			saved_ms         bigint NOT NULL DEFAULT 0,
			semantic_hits    bigint NOT NULL DEFAULT 0,
			gray_accepted    bigint NOT NULL DEFAULT 0,
			gray_rejected    bigint NOT NULL DEFAULT 0,
			gray_unverified  bigint NOT NULL DEFAULT 0,
			guard_rejections bigint NOT NULL DEFAULT 0,
			embed_failures   bigint NOT NULL DEFAULT 0
		)`,
	},
	// Version 2: stale-if-error (see the SQLite schema's version 3).
	{
		`ALTER TABLE nexus_memory_entries ADD COLUMN stale boolean NOT NULL DEFAULT false`,
	},
	// Version 3: what verification measured, shared by the replicas (see
	// the SQLite schema's version 4).
	{
		`ALTER TABLE nexus_memory_tool_stats ADD COLUMN semantic_checks bigint NOT NULL DEFAULT 0`,
		`ALTER TABLE nexus_memory_tool_stats ADD COLUMN false_hits bigint NOT NULL DEFAULT 0`,
		`ALTER TABLE nexus_memory_tool_stats ADD COLUMN exact_checks bigint NOT NULL DEFAULT 0`,
		`ALTER TABLE nexus_memory_tool_stats ADD COLUMN stale_answers bigint NOT NULL DEFAULT 0`,
		`CREATE TABLE nexus_memory_refuted (
			tool       text   NOT NULL,
			asked      text   NOT NULL, -- canonical form of the text asked
			stored     text   NOT NULL, -- ... and of the text whose answer was served
			rewrites   text   NOT NULL, -- the rewrites that made it a hit, space-separated
			refuted_at bigint NOT NULL, -- unix ms
			PRIMARY KEY (tool, asked, stored)
		)`,
	},
}

// pgSchemaVersion is the version this package writes and reads.
const pgSchemaVersion = len(pgMigrations)

// pgMigrate brings the current schema up to pgSchemaVersion. Replicas
// starting together serialise on an advisory lock, and each migration
// commits with its version, so a crash leaves the old version whole.
func pgMigrate(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+pgLockClass+`, hashtext(current_schema()))`); err != nil {
		return fmt.Errorf("lock for migration: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS nexus_memory_schema (
		id integer PRIMARY KEY CHECK (id = 1), version integer NOT NULL)`); err != nil {
		return fmt.Errorf("create version table: %w", err)
	}
	var v int
	err = tx.QueryRow(ctx, `SELECT version FROM nexus_memory_schema WHERE id = 1`).Scan(&v)
	if err == pgx.ErrNoRows {
		v = 0
	} else if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > pgSchemaVersion {
		return fmt.Errorf("schema version %d is newer than this nexus understands (%d); upgrade nexus", v, pgSchemaVersion)
	}
	if v == pgSchemaVersion {
		return tx.Commit(ctx)
	}
	for ; v < pgSchemaVersion; v++ {
		for _, stmt := range pgMigrations[v] {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("migrate schema to version %d: %.40q: %w", v+1, stmt, err)
			}
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO nexus_memory_schema (id, version) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`, pgSchemaVersion); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit migration: %w", err)
	}
	return nil
}
