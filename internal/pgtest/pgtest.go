// Package pgtest gives tests a PostgreSQL schema of their own, and a TCP
// proxy in front of the database that a test can cut to simulate an
// outage.
//
// Tests find the database through NEXUS_TEST_PG_DSN (a role that may
// create schemas). Without it they skip, saying what to set; with
// NEXUS_REQUIRE_POSTGRES=1 (CI) they fail instead, so a broken CI setup
// cannot pass by skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nexus-mcp/nexus/internal/skips"
)

// EnvDSN and EnvRequire are the variables tests read.
const (
	EnvDSN     = "NEXUS_TEST_PG_DSN"
	EnvRequire = "NEXUS_REQUIRE_POSTGRES"
)

// BaseDSN returns the test database's DSN, or skips (fails under
// NEXUS_REQUIRE_POSTGRES=1) when none is set.
func BaseDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s=1 but %s is not set", EnvRequire, EnvDSN)
		}
		skips.Need(t, "PostgreSQL", "set "+EnvDSN, fmt.Sprintf("PostgreSQL tests skipped: set %s (e.g. postgres://nexus:nexus@127.0.0.1:5432/nexus_test) to run them", EnvDSN))
	}
	return dsn
}

// Schema creates a schema of its own for t, dropped when t ends, and
// returns a DSN whose search_path selects it: parallel tests and
// packages never see each other's tables.
func Schema(t testing.TB) string {
	t.Helper()
	base := BaseDSN(t)
	var b [6]byte
	rand.Read(b[:])
	name := "nexus_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		failOrSkip(t, fmt.Errorf("connect to %s: %w", EnvDSN, err))
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+name); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+name+` CASCADE`); err != nil {
			t.Logf("drop schema %s: %v", name, err)
		}
	})
	return WithSearchPath(base, name)
}

func failOrSkip(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal(err)
	}
	skips.Need(t, "PostgreSQL", "a reachable "+EnvDSN, fmt.Sprintf("PostgreSQL tests skipped: %v", err))
}

// WithSearchPath returns dsn selecting schema first.
func WithSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return strings.TrimSpace(dsn) + " search_path=" + schema
}

// WithHostPort returns dsn pointing at addr ("127.0.0.1:port") instead.
func WithHostPort(t testing.TB, dsn, addr string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Host = addr
		return u.String()
	}
	return strings.TrimSpace(dsn) + " host=" + host + " port=" + port
}

// Addr returns the host:port dsn connects to.
func Addr(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse dsn: %v", err)
	}
	return net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
}

// Proxy forwards TCP connections to a database until Stop, which closes
// the listener and every connection, as a database that went away; Start
// listens again on the same address.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to the database of dsn and returns it with a
// DSN that goes through it. It is stopped when t ends.
func NewProxy(t testing.TB, dsn string) (*Proxy, string) {
	t.Helper()
	p := &Proxy{t: t, target: Addr(t, dsn), conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Stop)
	return p, WithHostPort(t, dsn, p.addr)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != ln { // stopped meanwhile
				p.mu.Unlock()
				c.Close()
				up.Close()
				return
			}
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go pipe(c, up)
			go pipe(up, c)
		}
	}()
}

func pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// Stop closes the listener and cuts every connection.
func (p *Proxy) Stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	p.wg.Wait()
}

// Start listens again on the proxy's address.
func (p *Proxy) Start() {
	p.t.Helper()
	var (
		ln  net.Listener
		err error
	)
	// The port was just released; another process could take it, but
	// on loopback within a test that does not happen in practice.
	for range 50 {
		if ln, err = net.Listen("tcp", p.addr); err == nil || !errors.Is(err, errAddrInUse) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy restart on %s: %v", p.addr, err)
	}
	p.serve(ln)
}
