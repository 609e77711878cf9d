package aggregation

import (
	"errors"
	"fmt"
	"time"
)

// This file shares a "client" server's upstream sessions among agents. Each
// agent may hold its share of them (servers.X.maxSessionsPerAgent, by default
// maxSessions divided among the agents that have a token, with a share left for
// one more), and a session that is idle (no request in flight)
// is ended when another needs its place: otherwise one agent that opens
// maxSessions sessions, calls once in each and walks away locks every other
// agent out until its sessions time out. An ended upstream session is opened
// afresh on its client's next request, its state lost, as after a restart.

// errMadeRoom is why an idle upstream session was ended.
var errMadeRoom = errors.New("ended while idle, to make room for another client session")

// touch marks u used now, once it is open.
func (u *clientUpstream) touch() {
	select {
	case <-u.ready:
		if u.cn != nil {
			u.cn.Touch()
		}
	default:
	}
}

// tokenAgents counts the agents that have a token.
func tokenAgents(g *Gateway) int {
	agents := map[string]bool{}
	for _, a := range *g.tokens.Load() {
		agents[a] = true
	}
	return len(agents)
}

// makeRoomLocked makes room for a new upstream session of s, within s's agent's
// share and the server's maxSessions, by ending the least recently used idle
// one: the agent's own when the agent is at its share, anyone's when the server
// is full. It refuses when every candidate is busy. c.ups.mu is held.
func (c *child) makeRoomLocked(s *session) error {
	limit, share := c.config().SessionLimit(), c.config().SessionShare(tokenAgents(s.g))
	own := 0
	for _, u := range c.ups.m {
		if u.agent == s.agent {
			own++
		}
	}
	switch {
	case own >= share:
		if c.endIdleLocked(s.agent) {
			return nil
		}
		return fmt.Errorf("agent %s already has its share of %d upstream sessions of server %s, all of them busy, one per client session (servers.%s.maxSessionsPerAgent); close client sessions or raise servers.%s.maxSessionsPerAgent",
			s.agent, share, c.name, c.name, c.name)
	case len(c.ups.m) >= limit:
		if c.endIdleLocked("") {
			return nil
		}
		return fmt.Errorf("server %s already has its maximum of %d upstream sessions, all of them busy, one per client session (servers.%s.maxSessions); close client sessions or raise servers.%s.maxSessions",
			c.name, limit, c.name, c.name)
	}
	return nil
}

// endIdleLocked ends the least recently used idle upstream session (of agent,
// when not ""), and reports whether there was one. One still opening is busy.
func (c *child) endIdleLocked(agent string) bool {
	var victim *session
	var oldest time.Time
	for vs, u := range c.ups.m {
		if agent != "" && u.agent != agent {
			continue
		}
		select {
		case <-u.ready:
		default:
			continue
		}
		if u.cn == nil || !u.cn.Idle() {
			continue
		}
		if last := u.cn.LastUsed(); victim == nil || last.Before(oldest) {
			victim, oldest = vs, last
		}
	}
	if victim == nil {
		return false
	}
	u := c.ups.m[victim]
	delete(c.ups.m, victim)
	c.log.Info("ended an idle upstream session to make room for another", "agent", u.agent)
	// Closing waits for the child; open's goroutine, woken by the end, does the rest.
	u.cn.Lose(errMadeRoom)
	go u.cn.Close()
	return true
}
