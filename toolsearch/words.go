package toolsearch

import (
	"strings"
	"sync"
	"unicode"

	"github.com/nexus-mcp/nexus/memory/words"
)

// stop are words that frame a task without saying which tool does it. Verbs
// memory's cache guard calls filler ("list", "get", "search") are kept: they tell
// list_issues from get_issue.
var stop = set("a", "an", "the", "to", "of", "for", "in", "on", "at", "by", "with", "and", "or",
	"me", "my", "our", "i", "we", "you", "your", "it", "its", "is", "are", "be", "this", "that",
	"these", "those", "please", "can", "could", "would", "should", "will", "want", "need", "some",
	"what", "which", "how", "do", "does", "there", "into", "as", "so", "if", "then", "than", "tool",
	"s", "t", "e", "g", "etc", "one", "via", "us", "them", "they")

func set(ws ...string) map[string]bool {
	m := make(map[string]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}

// Words returns the canonical words of text: identifiers split at '.', '_', '-'
// and camelCase humps ("getFileContents" -> get file contents), then lower-cased,
// stemmed and mapped through memory's synonyms, without stop words.
func Words(text string) []string {
	var out []string
	for _, w := range words.Canonical(splitHumps(text)) {
		if !stop[w] {
			out = append(out, w)
		}
	}
	return out
}

// splitHumps puts a space where a camelCase word turns upper-case, and between
// letters and digits: names are written as identifiers, tasks as prose.
func splitHumps(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	var prev rune
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case i > 0 && unicode.IsUpper(r) && unicode.IsLower(prev):
			b.WriteByte(' ')
		case i > 0 && unicode.IsUpper(r) && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			b.WriteByte(' ') // "HTTPServer" -> HTTP Server
		}
		b.WriteRune(r)
		prev = r
	}
	return b.String()
}

// related are groups of words that often name one action or thing in tool
// descriptions and in the tasks people write: a query word widens to the others
// of its groups at a lower weight, so "make an issue" finds create_issue without
// "make" and "create" becoming one word everywhere.
var related = sync.OnceValue(func() map[string][]string {
	return buildRelated([][]string{
		{"create", "make", "new", "add", "open", "start", "write", "post", "raise", "submit"},
		{"read", "get", "fetch", "view", "show", "retrieve", "open", "see", "display", "load", "content", "look"},
		{"list", "enumerate", "browse", "all", "show", "index", "overview"},
		{"search", "find", "query", "lookup", "look", "locate", "discover", "match"},
		{"update", "edit", "modify", "change", "set", "patch", "rename", "alter"},
		{"delete", "erase", "drop", "destroy", "purge", "clear", "discard", "trash", "archive"},
		{"send", "post", "message", "notify", "tell", "dm", "chat", "reply"},
		{"run", "execute", "exec", "launch", "trigger", "perform", "evaluate"},
		{"write", "save", "store", "put", "persist", "record", "upload"},
		{"move", "rename", "relocate", "transfer"},
		{"screenshot", "capture", "snapshot", "image", "picture", "screen"},
		{"navigate", "visit", "go", "browse", "open", "url", "page", "website", "site", "link", "web"},
		{"click", "press", "tap", "button"},
		{"type", "fill", "enter", "input", "form", "text"},
		{"close", "resolve", "finish", "complete", "done"},
		{"comment", "reply", "respond", "answer", "note", "discussion", "review"},
		{"time", "clock", "date", "hour", "now", "current", "timezone", "zone"},
		{"user", "member", "person", "people", "profile", "account", "who", "teammate"},
		{"channel", "room", "conversation", "thread"},
		{"diff", "compare", "difference", "change"},
		{"log", "history", "commit", "past"},
		{"fork", "copy", "clone", "duplicate"},
		{"merge", "combine", "integrate"},
		{"stage", "add", "index"},
		{"sleep", "wait", "delay", "pause", "long", "slow"},
		{"sum", "add", "total", "plus", "calculate", "number"},
		{"echo", "repeat", "back"},
		{"sql", "query", "db", "table", "select"},
		{"schema", "structure", "column", "describe", "field"},
		{"weather", "forecast", "temperature"},
		{"direction", "route", "travel", "distance", "drive", "way"},
		{"place", "location", "address", "geocode", "coordinate", "nearby", "restaurant"},
		{"event", "meet", "meeting", "calendar", "schedule"},
		{"page", "doc", "note", "wiki"},
		{"task", "todo", "ticket", "card", "item"},
		{"label", "tag", "category"},
		{"assign", "owner", "assignee"},
		{"star", "favorite", "like", "bookmark", "react", "reaction", "emoji"},
		{"release", "version", "tag", "deploy"},
		{"entity", "node", "object"},
		{"relation", "edge", "link", "connect", "relationship"},
		{"observation", "fact", "note", "remember"},
		{"size", "metadata", "info", "stat", "detail", "modified", "permission"},
		{"tree", "recursive", "nested", "hierarchy"},
		{"markdown", "html", "text", "content", "convert"},
		{"code", "source", "function", "symbol", "definition"},
		{"error", "crash", "bug", "exception", "failure", "problem", "incident"},
		{"dir", "path", "location"},
		{"env", "variable"},
		{"resource", "attachment", "link", "embed"},
		{"sample", "llm", "model", "generate", "completion"},
		{"progress", "long", "notification"},
		{"elicit", "ask", "prompt", "confirm", "input"},
		{"pr", "review", "merge"},
		{"repo", "project", "codebase"},
		{"team", "org", "organization", "workspace", "group"},
		{"database", "db", "notion", "table"},
		{"hover", "mouse", "over"},
		{"scroll", "down", "up"},
		{"select", "choose", "dropdown", "option", "pick"},
		{"javascript", "js", "script", "evaluate", "console"},
		{"pdf", "print", "export"},
		{"tab", "window", "browser"},
		{"key", "keyboard", "shortcut"},
		{"branch", "checkout", "switch"},
		{"status", "state", "health", "working"},
		{"issue", "ticket", "bug", "problem"},
		{"payment", "charge", "pay", "invoice", "billing", "subscription", "price", "refund"},
		{"customer", "client", "buyer"},
		{"pod", "container", "deployment", "k8s", "cluster"},
	})
})

// buildRelated maps each canonical word to the other canonical words of its
// groups. It runs once, when a query first needs it (not as every process
// starts: stemming the groups costs start-up time); the table is never
// written again.
func buildRelated(groups [][]string) map[string][]string {
	m := map[string][]string{}
	for _, g := range groups {
		var canon []string
		for _, w := range g {
			if ws := words.Canonical(w); len(ws) == 1 {
				canon = append(canon, ws[0])
			}
		}
		for _, a := range canon {
			for _, b := range canon {
				if a != b && !contains(m[a], b) {
					m[a] = append(m[a], b)
				}
			}
		}
	}
	return m
}

func contains(list []string, w string) bool {
	for _, x := range list {
		if x == w {
			return true
		}
	}
	return false
}
