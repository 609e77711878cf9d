// Package toolsearch ranks tools for a task written in words, offline.
//
// A client that is sent a hundred tools on every turn pays for all of them and
// chooses worse; one that can ask "which tools send a slack message?" needs only
// the few that answer. The ranking is BM25 over the fields of each tool (its
// name split into words, its title, its description, its parameters' names and
// descriptions), with the words of task and tool put in one canonical form by
// memory's stemmer and synonym table, and the query widened by a small table of
// words that often name the same action ("make" for "create", "remove" for
// "delete"). An embedder, when one is configured, is blended in: it knows
// paraphrases no table lists.
//
// The package knows nothing of policy: the caller indexes only what the agent may
// call, so that a tool it may not call is never found.
package toolsearch
