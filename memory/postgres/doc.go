// Package postgres is memory's store in a PostgreSQL database shared by
// gateway replicas, with the semantics of one SQLite file across them:
// exact and similarity hits, TTLs and bounds are the shared store's; an
// identical call arriving at two replicas makes one child call (a claim row
// with a lease, on the database's clock); and an invalidation is applied to
// every live replica's hot layer before the invalidating call returns (an
// epoch, a notification, and an acknowledgement from each replica holding a
// lease; see Store). A database that is down when the gateway starts is not
// an error: memory steps aside until it answers, and the schema is migrated
// at the first use that reaches it (schema.go).
//
// Use it through memory.Options.Backend = postgres.DSN(dsn).
package postgres
