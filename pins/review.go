package pins

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Mode is how a server's tools are held to their pins (servers.X.pin).
type Mode string

// The modes.
const (
	// Strict holds a changed, new or renamed tool until it is approved.
	Strict Mode = "strict"
	// Warn lists it all the same, with the hints last approved (none for a new
	// tool), and says so in the log and on the status page.
	Warn Mode = "warn"
	// Off neither records nor checks.
	Off Mode = "off"
)

// Kind is what happened to a tool since it was approved.
type Kind string

// The kinds of change.
const (
	New     Kind = "new"
	Changed Kind = "changed"
	Renamed Kind = "renamed"
)

// Change is one tool a server offers that nobody approved.
type Change struct {
	Server, Tool string
	Kind         Kind
	// From is the approved tool a renamed one replaces.
	From string
	// Shadows are the other servers' approved tools of the same name.
	Shadows []string
	// Old is the last approved definition (nil for a new tool); New is the one
	// offered now.
	Old, New json.RawMessage
	SHA256   string
}

// Admission is what a review lets through of a server's listing.
type Admission struct {
	// Tools are the tools to list, as the server listed them (in warn mode,
	// the unapproved ones with their approved hints).
	Tools []json.RawMessage
	// Held are the tools kept back (strict); Unapproved those listed all the
	// same (warn).
	Held, Unapproved []Change
}

// review decides which of a server's listed tools may be listed, and records in
// f what it saw: a server's first listing (when no team layer pins it) is
// approved as it is, a team pin that matches is recorded with its definition,
// and the tools held replace the server's held set. It reports whether f
// changed.
func review(f *File, server string, mode Mode, team map[string]string, l listing, now time.Time) (Admission, bool) {
	if mode == Off {
		return Admission{Tools: l.raw}, false
	}
	listed, items, names := l.raw, l.items, l.names
	s, changed := f.Servers[server], false
	if s == nil {
		s, changed = f.server(server), true
		if len(team) == 0 {
			// Trust on first use: what the server offers the first time it is
			// seen is what the person installed.
			for _, it := range items {
				s.Tools[it.def.Name] = Pin{SHA256: it.def.Hash(), Definition: it.def.JSON, Approved: now}
			}
			return Admission{Tools: listed}, true
		}
	}
	var a Admission
	held := map[string]Held{}
	for _, it := range items {
		hash := it.def.Hash()
		p, known := s.Tools[it.def.Name]
		if known && p.SHA256 == hash {
			a.Tools = append(a.Tools, it.raw)
			continue
		}
		if team[it.def.Name] == hash {
			s.Tools[it.def.Name] = Pin{SHA256: hash, Definition: it.def.JSON, Approved: now}
			changed = true
			a.Tools = append(a.Tools, it.raw)
			continue
		}
		c := Change{Server: server, Tool: it.def.Name, Kind: New, New: it.def.JSON, SHA256: hash}
		if known {
			c.Kind, c.Old = Changed, p.Definition
		} else {
			c.From, c.Old = renamedFrom(s, names, it.def)
			if c.From != "" {
				c.Kind = Renamed
			}
			c.Shadows = shadows(f, server, it.def.Name)
		}
		h := Held{SHA256: hash, Definition: it.def.JSON, Seen: now, Change: c.Kind, From: c.From, Shadows: c.Shadows}
		if prev, ok := s.Held[c.Tool]; ok && prev.SHA256 == hash {
			h.Seen = prev.Seen // first seen then
		}
		held[c.Tool] = h
		if mode == Warn {
			a.Unapproved = append(a.Unapproved, c)
			a.Tools = append(a.Tools, withHints(it.raw, c.Old))
		} else {
			a.Held = append(a.Held, c)
		}
	}
	if !sameHeld(s.Held, held) {
		s.Held = held
		changed = true
	}
	return a, changed
}

// listing is one listing of a server's tools with each tool's definition:
// worked out once, before the guard's lock is taken, since it is most of the
// work of a review and servers' listings are reviewed side by side.
type listing struct {
	raw   []json.RawMessage
	items []listedItem
	names map[string]bool
}

type listedItem struct {
	raw json.RawMessage
	def Definition
}

func newListing(listed []json.RawMessage) listing {
	l := listing{raw: listed, names: map[string]bool{}}
	for _, raw := range listed {
		def, err := Canonical(raw)
		if err != nil || l.names[def.Name] {
			continue // a tool the gateway could not list anyway, or a name twice
		}
		l.names[def.Name] = true
		l.items = append(l.items, listedItem{raw, def})
	}
	return l
}

// renamedFrom finds the approved tool the server no longer lists whose
// definition, but for its name, is def's.
func renamedFrom(s *Server, listed map[string]bool, def Definition) (string, json.RawMessage) {
	want := def.withoutName()
	for _, name := range slices.Sorted(maps.Keys(s.Tools)) {
		if listed[name] {
			continue
		}
		p := s.Tools[name]
		if (Definition{Name: name, JSON: p.Definition}).withoutName() == want {
			return name, p.Definition
		}
	}
	return "", nil
}

// shadows are the other servers' approved tools named name: a new tool that
// takes another's name may be called instead of it by a model, or by a client
// that calls bare names.
func shadows(f *File, server, name string) []string {
	var out []string
	for _, other := range slices.Sorted(maps.Keys(f.Servers)) {
		if _, ok := f.Servers[other].Tools[name]; ok && other != server {
			out = append(out, other+"."+name)
		}
	}
	return out
}

// sameHeld reports whether two held sets hold the same definitions.
func sameHeld(a, b map[string]Held) bool {
	if len(a) != len(b) {
		return false
	}
	for k, h := range a {
		if o, ok := b[k]; !ok || o.SHA256 != h.SHA256 || o.Change != h.Change || o.From != h.From || !slices.Equal(o.Shadows, h.Shadows) {
			return false
		}
	}
	return true
}

// withHints is the tool with the annotations of the approved definition old
// (none when old is nil): an unapproved tool listed in warn mode must not
// become read-only, or lose its destructive hint, by saying so.
func withHints(raw json.RawMessage, old json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return raw
	}
	delete(obj, "annotations")
	var prev map[string]json.RawMessage
	if json.Unmarshal(old, &prev) == nil && prev["annotations"] != nil {
		obj["annotations"] = prev["annotations"]
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return b
}

// Approve accepts the held tools of server named in tools, or all of them when
// tools is empty, and returns what it accepted. A renamed tool's approval drops
// the pin of the name it replaces.
func Approve(f *File, server string, tools []string) ([]Change, error) {
	s := f.Servers[server]
	if s == nil || len(s.Held) == 0 {
		return nil, fmt.Errorf("no tool of %s is held: nothing to approve", server)
	}
	if len(tools) == 0 {
		tools = slices.Sorted(maps.Keys(s.Held))
	}
	for _, t := range tools {
		if _, ok := s.Held[t]; !ok {
			return nil, fmt.Errorf("tool %s of %s is not held; held: %s", t, server, strings.Join(slices.Sorted(maps.Keys(s.Held)), ", "))
		}
	}
	var done []Change
	for _, t := range tools {
		h := s.Held[t]
		done = append(done, h.change(server, t, s))
		if h.Change == Renamed {
			delete(s.Tools, h.From)
		}
		s.Tools[t] = Pin{SHA256: h.SHA256, Definition: h.Definition, Approved: time.Now().UTC()}
		delete(s.Held, t)
	}
	return done, nil
}

// Changes are the held tools of server, by name.
func Changes(f *File, server string) []Change {
	s := f.Servers[server]
	if s == nil {
		return nil
	}
	var out []Change
	for _, t := range slices.Sorted(maps.Keys(s.Held)) {
		out = append(out, s.Held[t].change(server, t, s))
	}
	return out
}

// change is the Change a held entry records.
func (h Held) change(server, tool string, s *Server) Change {
	c := Change{Server: server, Tool: tool, Kind: h.Change, From: h.From, Shadows: h.Shadows, New: h.Definition, SHA256: h.SHA256}
	switch h.Change {
	case Changed:
		c.Old = s.Tools[tool].Definition
	case Renamed:
		c.Old = s.Tools[h.From].Definition
	}
	return c
}
