// Package sqlite is memory's store in one SQLite file, $NEXUS_HOME/memory.db,
// which every local process (gateways, CLI commands) shares.
//
// The file is opened like every SQLite file of Nexus (internal/sqlitedb): in
// WAL mode with a busy timeout, so readers never wait for writers and each
// write is one short IMMEDIATE transaction. A watcher (watch.go) tells the
// hot layer when another connection committed an invalidation: it reads the
// WAL-index header from a read-only mapping of the -shm file, and asks
// SQLite (PRAGMA data_version) only when that moved. Vectors for similarity
// hits live in the same file, in a vec0 table per vector length
// (modernc.org/sqlite/vec), dropped with their entry by triggers (vec.go).
// The schema is versioned by PRAGMA user_version (schema.go).
//
// Use it through memory.Options.Backend = sqlite.File(path).
package sqlite
