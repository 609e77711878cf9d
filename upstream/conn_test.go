package upstream

import (
	"errors"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// closing is a Transport that counts its closes.
type closing struct {
	answering
	closes int
}

func (c *closing) Close() error { c.closes++; return nil }

// TestConnEnds: a connection ends once, with the first reason given; what
// waits on it is let go; its transport is closed with it.
func TestConnEnds(t *testing.T) {
	gone := errors.New("the server exited")
	tests := []struct {
		name   string
		end    func(c *Conn)
		reason string
		err    error
	}{
		{"lost with a reason", func(c *Conn) { c.Lose(gone); c.Lose(errors.New("later")) }, "the server exited", gone},
		{"lost without one", func(c *Conn) { c.Lose(nil) }, "the connection closed", nil},
		{"closed", func(c *Conn) { c.Close() }, "the connection closed", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &closing{}
			c := NewConn()
			c.Transport = tr
			if c.Lost() || c.Err() != nil {
				t.Fatal("a new connection has ended")
			}
			waited := make(chan string)
			go func() { waited <- c.ExitReason() }()
			tc.end(c)
			<-c.Done()
			if got := <-waited; got != tc.reason || !c.Lost() || c.Err() != tc.err {
				t.Errorf("ended: %q, err %v; want %q, %v", got, c.Err(), tc.reason, tc.err)
			}
			c.Close()
			if tr.closes == 0 {
				t.Error("closing the connection left its transport open")
			}
		})
	}
	var none *Conn
	none.Lose(gone) // a connection that never was: nothing to end
	if none.StderrTail() != "" {
		t.Error("no connection has a stderr tail")
	}
}

func TestConnIDsAndEra(t *testing.T) {
	c := NewConn()
	c.Transport = &answering{}
	seen := map[string]bool{}
	for range 1000 {
		id := string(c.NextID())
		if seen[id] || id[0] != '"' {
			t.Fatalf("id %s: repeated, or not a string", id)
		}
		seen[id] = true
	}
	if c.Version() != "" {
		t.Errorf("a connection before its handshake speaks %q", c.Version())
	}
	e := Era{Version: "2026-07-28", Caps: mcp.ServerCapabilities{Logging: &struct{}{}}, Instructions: "be brief"}
	c.Adopt(e, "pinned")
	got, why := c.Era()
	if c.Version() != "2026-07-28" || got.Version != e.Version || got.Instructions != "be brief" || c.Caps.Logging == nil || why != "pinned" || !got.Modern() {
		t.Errorf("after Adopt: %q %+v %q", c.Version(), got, why)
	}
}

// TestConnUse: a connection is idle only with no request under way, and its
// last use moves with every request's start and end and every Touch.
func TestConnUse(t *testing.T) {
	c := NewConn()
	if !c.Idle() {
		t.Fatal("a new connection is not idle")
	}
	before := time.Now()
	endA, endB := c.Begin(), c.Begin()
	if c.Idle() {
		t.Fatal("idle with two requests under way")
	}
	if c.LastUsed().Before(before) {
		t.Errorf("last used %v, before the requests began (%v)", c.LastUsed(), before)
	}
	endA()
	if c.Idle() {
		t.Fatal("idle with one request still under way")
	}
	endB()
	if !c.Idle() {
		t.Fatal("not idle once both requests ended")
	}
	ended := c.LastUsed()
	time.Sleep(tick)
	c.Touch()
	if !c.LastUsed().After(ended) {
		t.Errorf("Touch left last used at %v", c.LastUsed())
	}
}

// TestConnAskedRoots: a connection knows once its server asked for roots.
func TestConnAskedRoots(t *testing.T) {
	c := NewConn()
	if c.AskedRoots() {
		t.Fatal("a new connection's server asked for roots")
	}
	c.NoteRootsAsked()
	if !c.AskedRoots() {
		t.Fatal("the server asked for roots, and the connection does not know")
	}
}
