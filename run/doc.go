// Package run assembles a running gateway from config and runs its
// lifecycle, so that cmd/nexus is flags and printing and tests can drive the
// runtime in-process.
//
// Build opens what a config asks for (memory, the tool-search embedder, the
// audit trail, metrics and traces: what observes a gateway), builds the
// aggregation.Gateway and connects to its children. Serve runs one until its
// context ends: MCP over stdio or streamable HTTP, the status page and
// /metrics beside it, reloads when a config file changes or on SIGHUP, and
// an announcement in NEXUS_HOME/run that lets a CLI edit wait until every
// running gateway applied it (ReloadRunning). What the audit trail keeps is
// decided here too (observe.go): every refusal, and every allowed call of a
// tool that is not read-only.
package run
