// Package sqlitedb opens the SQLite files Nexus keeps in NEXUS_HOME
// (memory.db, audit.db) one way, so that they cannot drift apart in how
// private they are or how they share the file between processes.
package sqlitedb

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// FileMode is the mode Open creates database files with. What the files
// hold (cached results, who called what) can be sensitive, and SQLite gives
// the -wal and -shm files the mode of the database; its own default, 0644,
// would let every local user read them.
const FileMode = 0o600

// DirMode is the mode of the directory Open creates for a file.
const DirMode = 0o700

// Open opens the SQLite database file path, creating it (and its
// directory) private to the user first.
//
// Every connection runs in WAL mode, so several gateway and CLI processes
// share the file and readers never wait for writers, with
// synchronous=NORMAL (durable across process crashes; a power cut may lose
// the last commits, never the file), statement journals in memory, 8 MiB of
// page cache and a busy timeout of busy (at least a millisecond). Write
// transactions take the write lock up front (_txlock=immediate): a
// deferred transaction that upgrades from read to write can fail with
// SQLITE_BUSY without waiting, which would lose the write for nothing.
//
// Open does not connect: a file that is not a database fails at its first
// query.
func Open(path string, busy time.Duration) (*sql.DB, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("path %q: '?' and '#' are not supported in a database path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), DirMode); err != nil {
		return nil, fmt.Errorf("create directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return nil, fmt.Errorf("create file: %w", err)
	}
	f.Close()

	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", max(busy.Milliseconds(), 1)))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// Statement journals (every write with triggers needs one) stay in memory.
	q.Add("_pragma", "temp_store(MEMORY)")
	// 8 MiB of page cache per connection: a hit reads an index and a row.
	q.Add("_pragma", "cache_size(-8192)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return db, nil
}
