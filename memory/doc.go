// Package memory is Nexus's cache of read-only tool results: exact
// argument hits, and similarity hits for paraphrased free text.
//
// An agent that asks the same question twice should not make a child MCP
// server answer twice: memory stores the result of a cacheable call in its
// store (SQLite, or PostgreSQL shared by gateway replicas)
// and serves an identical later call from there, marking every result it
// touched with _meta["nexus/cache"] = {"status": "hit"|"miss"|"bypass",
// "age_ms": N} so agents and operators can see where an answer came from.
//
// # What is cached
//
// A tool is cacheable when its effective annotations say readOnlyHint and
// not destructiveHint; idempotentHint alone is not enough (repeating such a
// call changes nothing more, skipping it skips the change), and a tool
// without annotations is not cached, because nothing says it is safe.
// Config overrides this per tool with cache mode "never" or "always".
// Error results (isError), results that ask for more input or carry
// per-caller state (requestState), results whose members memory reads are
// spelled twice or in another case, and results over the size cap are
// never stored. Neither is an answer during which the child asked the
// client something (Answer.AskedClient): it may be made of that caller's
// roots, elicited answer or model output, so waiting identical calls make
// calls of their own.
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
// order, whitespace and string escapes do not matter; values do, so
// "staging" and "production" never share an answer, and neither do two
// spellings a child may read differently (a lone surrogate "\ud800" and
// U+FFFD; 1.0 and 1, which Python reads as a float and an int). Entries
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
//   - An answer is kept only for a TTL someone who knows gave
//     (Settings.Freshness: the config, `nexus cache ttl`, the catalog entry
//     the server came from; exact "server.tool", then "server.*", then
//     "*"). A tool nobody gave one keeps nothing across calls; identical
//     calls in flight at once still share one child call. Results that
//     never expire are how stale answers reach agents, so "never" must be
//     asked for per tool.
//   - TTLs apply at read time, so a shortened TTL takes effect on entries
//     already stored when config reloads.
//   - A forwarded call of a tool that is not read-only invalidates its
//     server's entries (or what config's invalidate rule names for it),
//     unless the child reported failure or the request never left
//     (Outcome): a call whose outcome is unknown counts as done. A result
//     fetched before an invalidation is not stored after it: invalidation
//     generations are checked in the storing transaction.
//   - The gateway calls MarkStale when a child crashes, restarts or its
//     tool list changes (not when the gateway shuts down), and Clear when
//     a server is removed. Stale entries are never served as fresh, but
//     stand in, like expired ones younger than Settings.StaleIfError,
//     when the child fails (StatusStale).
//
// # Sharing and failure
//
// The database is opened in WAL mode with a busy timeout, so several
// gateway and CLI processes can share it: readers never wait for writers,
// and each write is one short IMMEDIATE transaction. Identical calls in
// flight at the same moment in one process are coalesced into one child
// call. Recent entries are also held in an in-process hot layer, bounded
// by Options.HotBytes (see hot.go): a repeated call costs a map lookup
// and one PRAGMA data_version, which tells whether another connection
// committed since; only an invalidation committed elsewhere (not a store)
// empties the layer, so another process's invalidation is seen by the
// next call. The recency of hits and the hit counters are batched in
// memory and written every second, so `nexus cache stats` in another
// process lags by at most that.
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
// # Replicas on PostgreSQL
//
// With a postgres.DSN backend, the store is a PostgreSQL database shared
// by gateway replicas (memory/postgres), with the same semantics across them:
// exact and similarity hits, TTLs and bounds are the shared store's; an
// identical call arriving at two replicas makes one child call (a claim
// row with a lease, on the database's clock); and an invalidation is
// applied to every live replica's hot layer before the invalidating call
// returns (an epoch, a notification, and an acknowledgement from each
// replica holding a lease; see postgres.Store). An unreachable database makes
// memory step aside as above, and it comes back by itself.
//
// # Where things are
//
// Package memory is the logic: memory.go (Call, lookup, remember,
// invalidation), key.go the key (canonical JSON), hot.go the hot layer,
// flight.go single flight, similar*.go the similarity bucket, decision and
// in-memory index, settings.go, ttl.go and meta.go the rules, TTLs and the
// raw-JSON handling of results, thresholds.go the similarity cut-offs, and
// store.go the Store interface with the records it exchanges. Each other
// idea is a package of its own:
//
//   - memory/sqlite and memory/postgres, the stores, chosen by the caller
//     through Options.Backend (sqlite.File, postgres.DSN); both run
//     memory/memorytest's contract suite.
//   - memory/embedder, the embedders (Lexical, OpenAI, Ollama) and the chat
//     verifier.
//   - memory/canon, which decides when two texts are one question: one
//     canonical form, and the rewrites that explain the difference.
//   - memory/guard, the earlier veto list, now a check on what a configured
//     embedder or verifier would widen.
//   - memory/words, what the embedder, the guard and tool search mean by
//     one word.
//
// Size is bounded by entry count and total bytes. Totals are kept by
// triggers, so checking a bound is one row read; once over a bound, the
// least recently used entries are evicted in one batch down to 90% of it.
//
// # Similarity hits
//
// Agents rephrase: "postgres connection pool settings" and "connection pool
// settings for postgres" ask doc_kg_search the same thing. After an exact
// miss (never before: an exact hit costs no embedding), memory compares
// the call's free text with what it stored for the same bucket and may
// serve one it can explain, reporting {"status": "semantic_hit",
// "similarity": S, "matched": "<the stored text>", "age_ms": N,
// "rewrites": [...]}.
//
//   - Free text: the arguments Settings.Semantic names for the tool
//     (config memory.semantic {"doc-kg.doc_kg_search": ["query"]}; an empty
//     list or false turns it off for the tool, memory.semantic: false for
//     all), otherwise string properties of the tool's input schema named
//     query, q, question, search, text or prompt with no enum, const,
//     format or pattern (computed once per schema). A call whose free
//     text is absent, not a string, or over MaxSemanticText gets exact
//     hits only, as does a tool with no free text.
//   - Bucket: the canonical tool name, the scope (agent-scoped servers),
//     the canonical JSON of every other argument and the names of the
//     text fields present. Only calls of one bucket are compared, so a
//     different limit, project or source is never served by similarity.
//   - Vectors live in the same memory.db, in a vec0 table per vector
//     length (vec_f512 for the lexical embedder) through
//     modernc.org/sqlite/vec, cosine distance, partitioned by a hash of
//     embedder and bucket; each entry records its bucket, embedder
//     ("name/model"), text and vector length, and a search also filters on
//     them, so vectors of another embedder, model or size are never
//     compared. Triggers drop a vector with its entry (deleted, evicted,
//     invalidated, purged) and when the entry is replaced; expired
//     entries are skipped with the TTL of the moment, like exact hits.
//   - Search: vec0 scans every vector of the bucket, too slow at 100k
//     entries, so a search goes through an in-memory index (similar_index.go):
//     built from vec0 in the background when memory opens, told of this
//     process's stores, caught up with other processes' when
//     data_version moves. It ranks the bucket by the Hamming distance of
//     2-bit-per-dimension codes, re-ranks the best 256 with int8 vectors,
//     and reads the best 8 back from SQLite, which stays the truth.
//   - Free text passes Options.RedactText (or Redact) before it is
//     embedded or stored, so a registered secret reaches neither an HTTP
//     embedder nor memory.db.
//   - Decision: the 8 nearest neighbours, most similar first, are
//     examined; one whose text has the asked text's canonical form
//     (memory/canon, canon.Match) is served, "rewrites" naming what tells them apart.
//     Similarity ranks; it never decides alone. Widening, only when no
//     word that always counts differs (canon.Significant) and the guard
//     agrees: an HTTP embedder's score at or above Thresholds.Serve, or,
//     between Verify and Serve, a Verifier's yes (an OpenAI-compatible
//     chat model, asked once per call). A neighbour the caller stored
//     itself within Settings.Rewording's window is passed over: a caller
//     rewording its own question wants another answer. A miss stores its
//     vector with the answer (one embedding per miss).
//   - Verification (verify.go): a sample of hits is asked of the child
//     again after the answer. Its counts go to the store with the other
//     counters, and a refuted pair (the canonical forms of both texts,
//     with the rewrites that made it a hit) at once. Memory starts from
//     them when it opens and asks the store before a similarity hit: a
//     refuted pair is never served again, in any process or after a
//     restart, and a tool over maxFalseHitRate stays over it.
//   - Embedders (memory/embedder): the built-in Lexical (offline, deterministic:
//     Porter-stemmed words mapped through a table of code and
//     documentation abbreviations and synonyms, hashed unigrams, bigrams
//     and character trigrams, 512 dimensions), OpenAI-compatible /v1/embeddings and Ollama's
//     /api/embed. An embedder or verifier failure (error, timeout, wrong
//     count or size) never fails a call: it is logged and counted, the
//     call gets exact hits only, and similarity pauses for 30 seconds so
//     an outage costs one timeout, not one per call.
//
// # Thresholds
//
// Similarity alone cannot tell a paraphrase from a near-miss: every
// embedder scores "deploy to staging" / "deploy to production" as high as
// a paraphrase, and "why did the backup fail" / "when did the backup
// fail" higher. So the lexical embedder's score serves nothing by itself
// (its Serve threshold is kept for compatibility); Verify (0.70) bounds
// what a verifier is asked. HTTP embedders (sentence models): serve 0.92,
// verify 0.85, the earlier product's values; calibrate per model with `go
// run ./tests/semantic` (-openai-url, -ollama-url) and set
// Options.Thresholds. docs/memory.md has the figures of every pair set.
package memory
