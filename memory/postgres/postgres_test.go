package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/nexus-mcp/nexus/internal/pgtest"
	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/memory/memorytest"
)

// TestPostgresHotLayerWithoutNotifications: notifications are only a
// hint. With a replica's listener stopped, so that it never hears of the
// other replica's write, its hot layer still does not serve the
// invalidated entry: every hot hit checks the generation.
func TestPostgresHotLayerWithoutNotifications(t *testing.T) {
	a, pa, b, c := hotReplicas(t)
	pa.stopListen()
	<-pa.listenDone
	h := pa.hot.Load()
	pa.Sync(context.Background(), h) // take what the listener saw so far
	if h.Len() != 1 {
		t.Fatal("the entry is not in a's hot layer")
	}
	memorytest.Do(t, b, "", memorytest.WriteTool(), `{}`, c)
	res, err := a.Call(context.Background(), "", memorytest.ReadTool(), json.RawMessage(`{}`), memorytest.Answers(string(memorytest.ErrorResult("down"))))
	if err != nil {
		t.Fatal(err)
	}
	memorytest.WantStatus(t, "a after b's write, unnotified", res, memory.StatusMiss)
}

// TestPostgresHungReplica: a replica that stops applying invalidations
// (its listener hangs) must not serve an invalidated entry from its hot
// layer after the invalidating call returned on another replica: that
// call waits until the hung replica's lease is over, and the hung replica
// stops trusting its hot layer before then.
func TestPostgresHungReplica(t *testing.T) {
	a, pa, b, c := hotReplicas(t)

	// The listener reads beforeApply only when an invalidation arrives,
	// after the write below started.
	hung, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func() {
		once.Do(func() { close(hung) })
		<-release
	}
	pa.beforeApply.Store(&hook)
	defer close(release)
	memorytest.Do(t, b, "", memorytest.WriteTool(), `{}`, c)
	<-hung // a received the invalidation but never applied it
	res, err := a.Call(context.Background(), "", memorytest.ReadTool(), json.RawMessage(`{}`), memorytest.Answers(string(memorytest.ErrorResult("down"))))
	if err != nil {
		t.Fatal(err)
	}
	memorytest.WantStatus(t, "hung a after b's write", res, memory.StatusMiss)
}

// TestPostgresLeaseRenewed: the listener renews the replica's lease while
// it waits for notifications.
func TestPostgresLeaseRenewed(t *testing.T) {
	_, ps := openTest(t, pgtest.Schema(t))
	memorytest.WaitFor(t, "the first lease", func() bool { return ps.leaseUntil.Load() > 0 })
	first := ps.leaseUntil.Load()
	memorytest.WaitFor(t, "a renewal", func() bool { return ps.leaseUntil.Load() > first })
	var alive bool
	err := ps.pool.QueryRow(context.Background(), `SELECT alive_until > `+pgNowMS+` FROM nexus_memory_replicas WHERE id = $1`, ps.owner).Scan(&alive)
	if err != nil || !alive {
		t.Fatalf("replica row alive %v, err %v", alive, err)
	}
}

// TestPostgresOutage: with the database gone, calls are forwarded and
// marked bypass, never failed (after at most the hot layer's lease); once
// it is back, memory serves again.
func TestPostgresOutage(t *testing.T) {
	proxy, dsn := pgtest.NewProxy(t, pgtest.Schema(t))
	m, _ := openTest(t, dsn)
	c := &memorytest.Child{}
	memorytest.Do(t, m, "", memorytest.ReadTool(), `{}`, c)
	memorytest.WantStatus(t, "before the outage", memorytest.Do(t, m, "", memorytest.ReadTool(), `{}`, c), memory.StatusHit)
	proxy.Stop()
	// Until its lease lapses (pgLeaseLocal), the replica may still serve
	// its hot layer: no other replica can have answered an invalidation
	// without it. Then it steps aside.
	memorytest.WaitFor(t, "memory to step aside", func() bool {
		st := memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{}`, c))
		if st != memory.StatusHit && st != memory.StatusBypass {
			t.Fatalf("during the outage: %q", st)
		}
		return st == memory.StatusBypass
	})
	for i := range 3 {
		res := memorytest.Do(t, m, "", memorytest.ReadTool(), `{}`, c)
		memorytest.WantStatus(t, "during the outage", res, memory.StatusBypass)
		if !strings.HasPrefix(memorytest.Text(res), "answer ") {
			t.Fatalf("call %d during the outage: %q", i, memorytest.Text(res))
		}
	}
	memorytest.Do(t, m, "", memorytest.WriteTool(), `{}`, c) // its invalidation is retried later
	proxy.Start()
	memorytest.WaitFor(t, "memory to come back", func() bool {
		return memorytest.Status(t, memorytest.Do(t, m, "", memorytest.ReadTool(), `{"after":1}`, c)) == memory.StatusHit
	})
	st, err := m.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Bypasses < 3 {
		t.Fatalf("%d bypasses counted, want at least 3", st.Bypasses)
	}
}

func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://nexus:s3cret@db:5432/nexus?sslmode=disable", "postgres://nexus:xxxxx@db:5432/nexus?sslmode=disable"},
		{"postgres://db/nexus?password=s3cret", "postgres://db/nexus?password=xxxxx"},
		{"host=db user=nexus password=s3cret dbname=nexus", "host=db user=nexus password=xxxxx dbname=nexus"},
		{"host=db password='s3 cret' dbname=nexus", "host=db password=xxxxx dbname=nexus"},
	} {
		if got := redactDSN(tc.in); got != tc.want {
			t.Errorf("redactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestContract runs the store contract suite against PostgreSQL, a schema
// of each test's own.
func TestContract(t *testing.T) {
	memorytest.RunStoreContract(t, func(t *testing.T) memory.Backend {
		return DSN(pgtest.Schema(t))
	}, memorytest.Features{CrossProcessFlights: true})
}

// capture is the Backend of a DSN that hands the store it opens to the
// test.
type capture struct {
	DSN
	st **Store
}

func (c capture) Open(ctx context.Context, o memory.StoreOptions) (memory.Store, error) {
	s, err := c.DSN.Open(ctx, o)
	if err == nil {
		*c.st = s.(*Store)
	}
	return s, err
}

// openTest opens a Memory on dsn, as one replica, and returns it with its
// store.
func openTest(t *testing.T, dsn string) (*memory.Memory, *Store) {
	t.Helper()
	var st *Store
	m := memorytest.OpenMemory(t, memory.Options{Backend: capture{DSN(dsn), &st}})
	return m, st
}

// hotReplicas opens two replicas, a and b, on a schema of t's own, and has a
// serve one entry of c's from its hot layer. When a's listener registers, it
// empties a's hot layer (invalidations committed before it registered were
// not waited for): only an entry put after that stays, so the entry is put
// once a has its lease, which is set right after registering.
func hotReplicas(t *testing.T) (a *memory.Memory, pa *Store, b *memory.Memory, c *memorytest.Child) {
	t.Helper()
	dsn := pgtest.Schema(t)
	a, pa = openTest(t, dsn)
	b, _ = openTest(t, dsn)
	memorytest.WaitFor(t, "a's hot-layer lease", func() bool { return pa.leaseUntil.Load() > 0 })
	c = &memorytest.Child{}
	memorytest.Do(t, a, "", memorytest.ReadTool(), `{}`, c)
	memorytest.WantStatus(t, "hot hit on a", memorytest.Do(t, a, "", memorytest.ReadTool(), `{}`, c), memory.StatusHit)
	return a, pa, b, c
}
