// Package memory is Nexus's exact-argument cache of read-only tool results.
//
// An agent that asks the same question twice should not make a child MCP
// server answer twice: memory stores the result of a cacheable call in SQLite
// and serves an identical later call from there, marking every result it
// touched with _meta["nexus/cache"] = {"status": "hit"|"miss"|"bypass",
// "age_ms": N} so agents and operators can see where an answer came from.
//
// # What is cached
//
// A tool is cacheable when its effective annotations say readOnlyHint or
// idempotentHint and not destructiveHint; a tool without annotations is not
// cached, because nothing says it is safe. Config overrides this per tool
// with cache mode "never" or "always". Error results (isError), results
// that ask for more input, and results over the size cap are never stored.
//
// Results are handled as the raw JSON the child sent, never decoded into
// mcp-go's types: memory stores those bytes as they are (after
// Options.Redact) and reads only isError, resultType, inputRequests and
// _meta, so a content type, field or _meta member it does not know is
// cached and replayed unchanged. The cache report is spliced into _meta
// on the way out; stored entries never carry one. A result that is not a
// JSON object is passed through and never stored.
//
// Two calls are the same call when they name the same canonical tool and
// their arguments have the same canonical JSON (see CanonicalJSON): key
// order, whitespace, number spelling and string escapes do not matter;
// values do, so "staging" and "production" never share an answer. Entries
// are scoped by the child's credentials, not by the agent: every agent
// behind one gateway shares answers, unless the server is configured
// agent-scoped, in which case the agent name is part of the key.
//
// # Freshness
//
// A cached answer is a snapshot, and a stale snapshot served as if it were
// current is the worst thing a cache can do to an agent, which acts on it
// without a human to notice. So memory errs towards refetching:
//
//   - Every entry expires. The TTL comes from config (exact "server.tool",
//     then "server.*", then "*") and otherwise is DefaultTTL, five minutes:
//     long enough to absorb the bursts of identical calls agents make within
//     one task (re-reading a file listing, re-fetching a ticket while
//     planning), short enough that an answer is never older than a coffee
//     break. Results that never expire are how stale answers reach agents,
//     so "never" must be asked for per tool.
//   - TTLs apply at read time, so a shortened TTL takes effect on entries
//     already stored when config reloads.
//   - A forwarded call of a tool that is not read-only invalidates its
//     server's entries (or what config's invalidate rule names for it),
//     unless the child reported failure. A result fetched before an
//     invalidation is not stored after it: invalidation generations are
//     checked in the storing transaction.
//   - The gateway calls InvalidateServer when a child restarts or its tool
//     list changes, and Clear when a server is removed.
//
// # Sharing and failure
//
// The database is opened in WAL mode with a busy timeout, so several
// gateway and CLI processes can share it: readers never wait for writers,
// and each write is one short IMMEDIATE transaction. Identical calls in
// flight at the same moment in one process are coalesced into one child
// call. Hits cost one indexed read; their recency and the hit counters are
// batched in memory and written every second, so `nexus cache stats` in
// another process lags by at most that.
//
// Memory never breaks a call. When the database cannot be read (corrupt,
// unreadable), memory steps aside for that call: the failure is logged, the
// call is forwarded, and the result says "bypass". When it cannot be written
// (locked by another process beyond Options.BusyTimeout, disk full), the
// forwarded answer is returned as a "miss" and not stored; stores then pause
// for a few seconds, so a lock held elsewhere delays one call, not every
// call. An invalidation that could not be written makes the tools it covers
// bypass memory in this process until a retry lands. A file that cannot be
// opened as a database gives a Memory that bypasses every call (see Open
// and Err).
//
// Size is bounded by entry count and total bytes. Totals are kept by
// triggers, so checking a bound is one row read; once over a bound, the
// least recently used entries are evicted in one batch down to 90% of it.
package memory
