package memory

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/nexus-mcp/nexus/internal/pgtest"
)

// TestPostgresHotLayerWithoutNotifications: notifications are only a
// hint. With a replica's listener stopped, so that it never hears of the
// other replica's write, its hot layer still does not serve the
// invalidated entry: every hot hit checks the generation.
func TestPostgresHotLayerWithoutNotifications(t *testing.T) {
	dsn := pgtest.Schema(t)
	a, b := openTest(t, Options{DSN: dsn}), openTest(t, Options{DSN: dsn})
	pa := a.st.(*pgStore)
	// When a's listener registers, it empties a's hot layer (invalidations
	// committed before it registered were not waited for): only an entry
	// put after that stays. The lease is set right after registering.
	waitFor(t, "a's hot-layer lease", func() bool { return pa.leaseUntil.Load() > 0 })
	c := &child{}
	do(t, a, "", readTool, `{}`, c)
	wantStatus(t, "hot hit on a", do(t, a, "", readTool, `{}`, c), StatusHit)
	pa.stopListen()
	<-pa.listenDone
	pa.sync(context.Background(), a.hot) // take what the listener saw so far
	if _, _, ok := a.hot.get(cacheKey(readTool.Name, "", fingerprint([]byte(`{}`)))); !ok {
		t.Fatal("the entry is not in a's hot layer")
	}
	do(t, b, "", writeTool, `{}`, c)
	res, err := a.Call(context.Background(), "", readTool, json.RawMessage(`{}`), answer(string(errorResult("down"))))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "a after b's write, unnotified", res, StatusMiss)
}

// TestPostgresHungReplica: a replica that stops applying invalidations
// (its listener hangs) must not serve an invalidated entry from its hot
// layer after the invalidating call returned on another replica: that
// call waits until the hung replica's lease is over, and the hung replica
// stops trusting its hot layer before then.
func TestPostgresHungReplica(t *testing.T) {
	dsn := pgtest.Schema(t)
	a, b := openTest(t, Options{DSN: dsn}), openTest(t, Options{DSN: dsn})
	pa := a.st.(*pgStore)
	waitFor(t, "a's hot-layer lease", func() bool { return pa.leaseUntil.Load() > 0 })
	c := &child{}
	do(t, a, "", readTool, `{}`, c)
	wantStatus(t, "hot hit on a", do(t, a, "", readTool, `{}`, c), StatusHit)

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
	do(t, b, "", writeTool, `{}`, c)
	<-hung // a received the invalidation but never applied it
	res, err := a.Call(context.Background(), "", readTool, json.RawMessage(`{}`), answer(string(errorResult("down"))))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "hung a after b's write", res, StatusMiss)
}

// TestPostgresClaimAfterAnotherStored: a replica whose lookup missed
// just before another replica stored the answer (and released its claim)
// is served that answer instead of calling the child again.
func TestPostgresClaimAfterAnotherStored(t *testing.T) {
	dsn := pgtest.Schema(t)
	a, b := openTest(t, Options{DSN: dsn}), openTest(t, Options{DSN: dsn})
	c := &child{}
	do(t, a, "", readTool, `{}`, c)
	r := b.rules.Load()
	bc := &call{t: readTool, r: r, ttl: r.ttl(readTool), key: cacheKey(readTool.Name, "", fingerprint([]byte(`{}`)))}
	// b's lookup happened before a stored: it saw no entry (-1).
	res, done, _, release, err := b.claimFlight(context.Background(), bc, &flight{done: make(chan struct{})}, 0, -1)
	if err != nil || !done {
		t.Fatalf("claim after another replica stored: done %v, err %v; want its answer", done, err)
	}
	release()
	if text(res) != "answer 1 to {}" {
		t.Fatalf("served %q", text(res))
	}
	if n := c.calls.Load(); n != 1 {
		t.Fatalf("child called %d times, want 1", n)
	}
}

// TestPostgresLeaseRenewed: the listener renews the replica's lease while
// it waits for notifications.
func TestPostgresLeaseRenewed(t *testing.T) {
	m := openTest(t, Options{DSN: pgtest.Schema(t)})
	ps := m.st.(*pgStore)
	waitFor(t, "the first lease", func() bool { return ps.leaseUntil.Load() > 0 })
	first := ps.leaseUntil.Load()
	waitFor(t, "a renewal", func() bool { return ps.leaseUntil.Load() > first })
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
	m := openTest(t, Options{DSN: dsn})
	c := &child{}
	do(t, m, "", readTool, `{}`, c)
	wantStatus(t, "before the outage", do(t, m, "", readTool, `{}`, c), StatusHit)
	proxy.Stop()
	// Until its lease lapses (pgLeaseLocal), the replica may still serve
	// its hot layer: no other replica can have answered an invalidation
	// without it. Then it steps aside.
	waitFor(t, "memory to step aside", func() bool {
		st := status(t, do(t, m, "", readTool, `{}`, c))
		if st != StatusHit && st != StatusBypass {
			t.Fatalf("during the outage: %q", st)
		}
		return st == StatusBypass
	})
	for i := range 3 {
		res := do(t, m, "", readTool, `{}`, c)
		wantStatus(t, "during the outage", res, StatusBypass)
		if !strings.HasPrefix(text(res), "answer ") {
			t.Fatalf("call %d during the outage: %q", i, text(res))
		}
	}
	do(t, m, "", writeTool, `{}`, c) // its invalidation is retried later
	proxy.Start()
	waitFor(t, "memory to come back", func() bool {
		return status(t, do(t, m, "", readTool, `{"after":1}`, c)) == StatusHit
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
