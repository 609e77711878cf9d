// Package guard tells a paraphrase from a near-miss where similarity cannot:
// every embedder scores "deploy to staging" / "deploy to production" as high
// as two paraphrases, so no threshold separates them.
//
// Before any similarity hit, memory asks Check, which requires the two texts to agree on
// every number and token with digits (42, Q3, v1.2 = 1.2, PROJ-123,
// 2024-07-01, "ten" = 10), identifier (snake_case, camelCase, dotted and
// hyphenated names, paths), quoted string, ALL-CAPS code and capitalised
// name, on negation (not, no, never, without, n't, un-/non-/dis- prefixes)
// and on polarity and selector words by class: on/off, enable/disable,
// open/closed, allow/deny, add/remove, before/after, increase/decrease,
// max/min, include/exclude, asc/desc, oldest/newest, public/private,
// read/write, pass/fail, large/small, environments, months, weekdays,
// today/yesterday/tomorrow, time units; and, compared only when both
// texts use them, login/logout, backup/restore, encode/decode,
// import/export, join/leave, high/low, morning/afternoon, platforms.
//
// It also reads relations (relation.go): direction markers (to,
// from, by, above, below, before, after, since, until, with, for, than)
// must point at the same words ("from paris to london" is not "from
// london to paris"; "by alice" is not "for alice"), quantifiers must
// agree (all/any/some/none/only/both/exactly; "all" may be left out).
//
// And it reads roles (roles.go), by a shallow parse rather than a
// word list: the words both texts share must keep their side of every
// verb the texts have in common, whichever verb it is: in a relative
// clause ("services that call X" is not "services X calls"), a question
// that moves its subject ("who does alice supervise"), a passive
// ("people interviewed by alice" is "people alice interviewed", not
// "people who interviewed alice"); their clause around when, if, while
// and during ("memory leaks when scaling" is not "scaling when memory
// leaks"); their head around "of", "'s" and "in" ("users of the group" is
// "group users", not "user groups"); and their scope (in = inside =
// within, outside, across = between, near = close to). Voice changes and
// reorderings that keep the roles pass ("queues the notifier consumes" /
// "which queues does the notifier consume"; "when the build breaks,
// notify slack").
//
// What it cannot catch: a swap of ordinary words ("auth module" vs
// "billing module", "engineers" vs "designers"), which only the threshold
// (or a verifier) separates; polarity written with words it does not list;
// roles its shallow parse does not see (a verb it cannot tell from a noun
// on one side, "alice trains bob" / "bob trains alice" without an article
// or a relative pronoun); and it is
// conservative: a paraphrase that drops or changes a listed word ("top
// 10" vs "10", "bugs reported by customers" vs "customer reported bugs")
// is a miss. It compares top-level free text only, and the stored text is
// shown to whoever is served the match ("matched").
package guard

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/nexus-mcp/nexus/memory/words"
)

// Check reports whether two free texts may be served for each other by
// similarity: they must agree on every number, identifier, quoted string,
// code, proper name and polarity word. Embedders score "deploy to staging"
// and "deploy to production" as alike as two paraphrases, so no threshold
// separates them; Check does, before any similarity hit. When it refuses,
// reason says which feature differs.
//
// What must agree (see the package documentation for what it cannot catch):
//   - numbers and tokens with digits ("42", "Q3", "v1.2" = "1.2", "PROJ-123",
//     "2024-07-01"), number words up to twenty ("ten" = "10");
//   - identifiers: snake_case, camelCase, dotted or hyphenated names,
//     paths ("src/auth/login.go"), quoted strings, ALL-CAPS codes and
//     capitalised names inside a sentence (the last two compared without
//     case against the other text's words);
//   - negation (not, no, never, without, none, n't ...);
//   - polarity and selector words in classes: on/off, enable/disable,
//     open/closed, allow/deny, add/remove, before/after,
//     increase/decrease, max/min, include/exclude, up/down, asc/desc,
//     first/last, public/private, read/write, success/failure, environment
//     names (staging, production, dev, test, qa, local), months, weekdays,
//     relative days and time units.
func Check(a, b string) (ok bool, reason string) {
	fa, fb := guardFeatures(a), guardFeatures(b)
	if d := symDiff(fa.exact, fb.exact); d != "" {
		return false, "identifier or number differs: " + d
	}
	for _, f := range fa.loose {
		if !fb.words[f] && !slices.Contains(fb.loose, f) {
			return false, "name differs: " + f
		}
	}
	for _, f := range fb.loose {
		if !fa.words[f] && !slices.Contains(fa.loose, f) {
			return false, "name differs: " + f
		}
	}
	if d := polarDiff(fa.polar, fb.polar); d != "" {
		return false, "polarity differs: " + d
	}
	if w := prefixNegation(fa.single, fb.single); w != "" {
		return false, "polarity differs: " + w
	}
	return relationGuard(a, b)
}

// polarDiff is symDiff for polarity values, except that a soft class
// counts only when both texts use it.
func polarDiff(a, b []string) string {
	classes := func(vs []string) map[string]bool {
		m := map[string]bool{}
		for _, v := range vs {
			m[v[:strings.IndexByte(v, ':')]] = true
		}
		return m
	}
	ca, cb := classes(a), classes(b)
	keep := func(vs []string, other map[string]bool) []string {
		var out []string
		for _, v := range vs {
			c := v[:strings.IndexByte(v, ':')]
			if !softClasses[c] || other[c] {
				out = append(out, v)
			}
		}
		return out
	}
	return symDiff(keep(a, cb), keep(b, ca))
}

// negPrefixes turn a word into its opposite: "documented" / "undocumented".
var negPrefixes = []string{"un", "non", "dis", "de", "in", "im", "ir", "il", "mis", "anti"}

// prefixNegation returns a word of one set that is a word of the other
// with a negating prefix, or "".
func prefixNegation(a, b map[string]bool) string {
	check := func(x, y map[string]bool) string {
		for w := range x {
			for _, p := range negPrefixes {
				rest, ok := strings.CutPrefix(w, p)
				if ok && len(rest) >= 4 && y[rest] && !x[rest] {
					return fmt.Sprintf("%q / %q", rest, w)
				}
			}
		}
		return ""
	}
	if w := check(a, b); w != "" {
		return w
	}
	return check(b, a)
}

type features struct {
	exact  []string        // numbers, identifiers, paths, quoted strings: must be the same set
	loose  []string        // codes and names (lower-cased): must occur in the other text
	polar  []string        // "class:value" of polarity words: must be the same set
	words  map[string]bool // every lower-cased word, its stems, and two words joined
	single map[string]bool // every lower-cased word
}

// symDiff returns a description of the first element in one sorted-unique
// set and not the other, or "".
func symDiff(a, b []string) string {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return fmt.Sprintf("%q only in the first", x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return fmt.Sprintf("%q only in the second", x)
		}
	}
	return ""
}

var numberWords = map[string]string{
	"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
	"seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
	"thirteen": "13", "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17",
	"eighteen": "18", "nineteen": "19", "twenty": "20", "dozen": "12", "hundred": "100",
	"thousand": "1000", "million": "1000000", "single": "1", "once": "1", "twice": "2",
	"double": "2", "half": "1/2", "triple": "3",
}

// polarity maps a word to "class:value". Words of one class that mean the
// same map to the same value, so "enable" and "turn on" agree. It is built
// when the guard first reads a text, not as every process starts.
var polarity = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	add := func(class, value string, ws ...string) {
		for _, w := range ws {
			m[w] = class + ":" + value
		}
		for _, w := range ws {
			if _, ok := m[words.Porter(w)]; !ok {
				m[words.Porter(w)] = class + ":" + value
			}
		}
	}
	add("neg", "not", "not", "no", "never", "without", "none", "nor", "neither", "nothing", "cannot",
		"isnt", "arent", "wasnt", "werent", "dont", "doesnt", "didnt", "cant", "wont", "shouldnt", "hasnt", "havent", "non")
	add("switch", "on", "on", "enable", "enabled", "enabling", "activate", "activated", "start", "started", "starting")
	add("switch", "off", "off", "disable", "disabled", "disabling", "deactivate", "deactivated", "stop", "stopped", "stopping")
	add("state", "open", "open", "opened", "opening", "reopened", "unresolved", "active", "pending")
	add("state", "closed", "closed", "close", "closing", "resolved", "fixed", "done", "merged", "completed", "finished", "inactive")
	add("access", "allow", "allow", "allowed", "allowing", "permit", "permitted", "grant", "granted", "whitelist", "allowlist")
	add("access", "deny", "deny", "denied", "denying", "block", "blocked", "forbid", "forbidden", "reject", "rejected", "revoke", "revoked", "blacklist", "denylist")
	add("change", "add", "add", "added", "adding", "create", "created", "insert", "inserted")
	add("change", "remove", "remove", "removed", "removing", "delete", "deleted", "deleting", "drop", "dropped")
	add("age", "new", "new", "newly")
	add("age", "old", "old", "stale", "legacy", "deprecated")
	add("time", "before", "before", "prior", "earlier", "older", "until", "till")
	add("time", "after", "after", "later", "newer", "following", "since")
	add("trend", "up", "increase", "increased", "increasing", "raise", "grow", "grew", "growing", "more", "higher", "above", "greater", "upgrade")
	add("trend", "down", "decrease", "decreased", "decreasing", "lower", "reduce", "reduced", "shrink", "less", "fewer", "below", "downgrade")
	add("extreme", "max", "max", "maximum", "most", "highest", "top", "peak", "best")
	add("extreme", "min", "min", "minimum", "least", "lowest", "smallest", "bottom", "worst")
	add("size", "large", "large", "larger", "largest", "big", "bigger", "huge", "long", "longer")
	add("size", "small", "small", "smaller", "smallest", "tiny", "little", "short", "shorter")
	add("speed", "fast", "fast", "faster", "fastest", "quick", "quickest")
	add("speed", "slow", "slow", "slower", "slowest")
	add("include", "in", "include", "included", "including")
	add("include", "out", "exclude", "excluded", "excluding", "except")
	add("order", "asc", "asc", "ascending", "oldest", "earliest", "first")
	add("order", "desc", "desc", "descending", "newest", "latest", "last", "recent")
	add("visibility", "public", "public", "external", "exported")
	add("visibility", "private", "private", "internal", "unexported", "hidden", "secret")
	add("mode", "read", "read", "reads", "reading", "readonly")
	add("mode", "write", "write", "writes", "writing", "writable", "readwrite")
	add("outcome", "ok", "success", "successful", "succeeded", "passing", "passed", "pass", "green", "healthy", "valid", "true", "yes")
	add("outcome", "fail", "failure", "failed", "failing", "fail", "error", "errors", "red", "broken", "unhealthy", "invalid", "false", "crash", "crashed", "crashes")
	add("env", "production", "production", "prod", "prd", "live")
	add("env", "staging", "staging", "stage", "stg", "preprod", "uat")
	add("env", "dev", "dev", "development", "develop")
	add("env", "test", "test", "testing", "qa", "sandbox")
	add("env", "local", "local", "localhost")
	add("rel", "today", "today", "tonight", "now", "current", "currently")
	add("rel", "yesterday", "yesterday")
	add("rel", "tomorrow", "tomorrow")
	add("rel", "previous", "previous", "prev", "past", "former")
	add("rel", "next", "next", "upcoming", "future")
	for _, u := range []string{"second", "minute", "hour", "day", "week", "month", "quarter", "year", "sprint"} {
		add("unit", u, u, u+"s", u+"ly")
	}
	add("unit", "day", "daily")
	for _, mo := range []string{"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"} {
		add("month", mo, mo)
		if mo != "may" && mo != "june" && mo != "july" {
			add("month", mo, mo[:3])
		}
	}
	add("month", "september", "sept")
	add("approval", "yes", "approve", "approved", "approving", "accept", "accepted")
	add("session", "in", "login", "signin", "logon")
	add("session", "out", "logout", "signout", "logoff")
	add("session", "up", "signup", "register", "registration")
	add("boarding", "on", "onboarding", "onboard", "onboarded")
	add("boarding", "off", "offboarding", "offboard", "offboarded")
	add("data", "backup", "backup", "backups")
	add("data", "restore", "restore", "restored", "restoring", "recovery", "recover")
	add("codec", "encode", "encode", "encoded", "encoding", "encrypt", "encrypted", "serialize", "serialized", "marshal")
	add("codec", "decode", "decode", "decoded", "decoding", "decrypt", "decrypted", "deserialize", "deserialized", "unmarshal")
	add("transfer", "in", "import", "imported", "importing", "upload", "uploaded", "download", "downloaded", "receive", "received", "incoming", "inbound", "ingress")
	add("transfer", "out", "export", "exported", "exporting", "send", "sent", "outgoing", "outbound", "egress")
	add("member", "join", "join", "joined", "joining", "hired", "hire")
	add("member", "leave", "leave", "left", "leaving", "quit", "departed", "fired")
	add("trade", "buy", "buy", "bought", "buying", "purchase", "purchased")
	add("trade", "sell", "sell", "sold", "selling")
	add("price", "cheap", "cheap", "cheaper", "cheapest", "inexpensive", "affordable", "budget")
	add("price", "expensive", "expensive", "luxury", "premium", "pricey")
	add("level", "high", "high", "critical", "urgent", "severe", "major", "blocker")
	add("level", "low", "low", "minor", "trivial")
	add("daypart", "morning", "morning", "am")
	add("daypart", "afternoon", "afternoon", "pm")
	add("daypart", "evening", "evening", "tonight", "night")
	add("stage", "draft", "draft", "drafts", "wip", "unfinished")
	add("stage", "final", "final", "finalized", "published")
	add("sign", "signed", "signed")
	add("sign", "unsigned", "unsigned")
	add("diet", "vegan", "vegan")
	add("diet", "vegetarian", "vegetarian")
	add("platform", "android", "android")
	add("platform", "ios", "ios")
	add("platform", "web", "web", "browser")
	add("platform", "windows", "windows")
	add("platform", "macos", "macos", "mac", "osx")
	add("platform", "linux", "linux", "ubuntu", "debian")
	for _, d := range []string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"} {
		add("weekday", d, d, d[:3])
	}
	add("weekday", "weekend", "weekend", "weekends")
	return m
})

// switchVerbs are the words after which "on" means switched on (unless
// an article follows: "what is on my calendar").
var switchVerbs = map[string]bool{"turn": true, "turned": true, "turning": true, "switch": true, "switched": true,
	"toggle": true, "toggled": true, "flip": true, "flipped": true, "set": true, "power": true, "flag": true, "feature": true, "is": true, "are": true, "was": true, "were": true, "be": true, "it": true, "them": true}

// movers are the words after which "up" and "down" mean more and less
// ("scale up"), not a particle ("set up", "look up").
var movers = map[string]bool{"scale": true, "scaled": true, "scaling": true, "go": true, "goes": true, "going": true,
	"went": true, "move": true, "moved": true, "ramp": true, "ramped": true, "trend": true, "trending": true,
	"round": true, "rounded": true, "count": true, "counting": true, "step": true, "stepped": true}

// articles are the words after which "on" is a preposition.
var articles = map[string]bool{"the": true, "a": true, "an": true, "my": true, "our": true, "your": true,
	"their": true, "his": true, "her": true, "its": true, "this": true, "that": true}

// onPhrase are the words that make "on" part of a phrase: "on call".
var onPhrase = map[string]bool{"call": true, "duty": true, "hold": true, "time": true, "track": true, "top": true,
	"board": true, "site": true, "premise": true, "premises": true, "demand": true, "behalf": true, "purpose": true}

// softClasses are polarity classes compared only when both texts use
// them: "backup" / "restore" differ, but "messages sent from X" asks what
// "messages from X" asks.
var softClasses = map[string]bool{"approval": true, "session": true, "boarding": true, "data": true, "codec": true,
	"transfer": true, "member": true, "trade": true, "price": true, "level": true, "daypart": true, "stage": true,
	"sign": true, "diet": true, "platform": true}

// guardFeatures extracts what Guard compares.
func guardFeatures(s string) features {
	f := features{words: map[string]bool{}, single: map[string]bool{}}
	exact := map[string]bool{}
	loose := map[string]bool{}
	polar := map[string]bool{}

	// Quoted strings are compared verbatim.
	s = extractQuoted(s, exact)

	raw := strings.Fields(s)
	sentenceStart := true
	var all []string // every word, in order, for polarity
	classes := polarity()
	for _, tok := range raw {
		t := strings.TrimFunc(tok, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '/' && r != '_' && r != '~' && r != '$'
		})
		endsSentence := strings.ContainsAny(tok[max(len(tok)-1, 0):], ".!?:;")
		if t == "" {
			sentenceStart = sentenceStart || endsSentence
			continue
		}
		lower := strings.ToLower(t)
		hasDigit := strings.IndexFunc(t, unicode.IsDigit) >= 0
		switch {
		case hasDigit:
			if syn, ok := words.Synonym(lower); ok {
				loose[syn] = true // "k8s" = "kubernetes"
			} else {
				exact[normNumber(lower)] = true
			}
		case strings.ContainsAny(t, "/\\_~$"):
			exact[t] = true
		case isDotted(t):
			exact[lower] = true
		case isCamel(t), isAllCaps(t), !sentenceStart && startsUpper(t):
			// Names and codes, compared without case against the other
			// text's words ("CrashLoopBackOff" = "crashloopbackoff").
			for _, w := range words.Split(lower) {
				loose[words.Canon(w)] = true
			}
			if isCamel(t) {
				loose[strings.Join(words.Split(lower), "")] = true
			}
		}
		if strings.Contains(t, "-") && !hasDigit {
			// "auth-service": compared whole, spelt with or without
			// the hyphen ("on-call" = "on call"); its parts are words too.
			loose[strings.Join(words.Split(lower), "")] = true
		}
		if strings.HasSuffix(lower, "n't") || strings.HasSuffix(lower, "n’t") {
			polar["neg:not"] = true // "don't", "isn’t"
		}
		all = append(all, words.Split(strings.ReplaceAll(lower, "'", ""))...)
		sentenceStart = endsSentence
	}
	for i, w := range all {
		f.single[w] = true
		f.words[w] = true
		f.words[words.Singular(w)] = true
		f.words[words.Canon(w)] = true
		if i > 0 {
			f.words[all[i-1]+w] = true // "on call" = "on-call"
		}
		if n, ok := numberWords[w]; ok {
			exact[n] = true
			continue
		}
		p, ok := classes[w]
		if !ok {
			p, ok = classes[words.Singular(w)]
		}
		if !ok {
			p, ok = classes[words.Porter(w)]
		}
		prev, next := "", ""
		if i > 0 {
			prev = all[i-1]
		}
		if i+1 < len(all) {
			next = all[i+1]
		}
		switch w {
		case "on":
			// A switch in "turn on", a preposition in "bugs on the login
			// page", neither in "on call".
			ok = ok && switchVerbs[prev] && !articles[next] && !onPhrase[next]
		case "close":
			ok = ok && next != "to" // "close to the airport" is near it
		case "up", "down":
			// More and less in "scale up", a particle in "set up".
			ok, p = movers[prev], "trend:"+w
		}
		if ok {
			polar[p] = true
		}
	}
	for _, n := range words.Tokens(s) {
		f.words[n.Canon] = true // "pull request" = "PR"
	}
	f.exact = sortedKeys(exact)
	f.loose = sortedKeys(loose)
	f.polar = sortedKeys(polar)
	for _, l := range f.loose {
		f.words[l] = true
	}
	return f
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// extractQuoted records the contents of "...", “...”, `...` and '...'
// (the last only when the quotes are not apostrophes inside words) and
// returns s with them replaced by spaces.
func extractQuoted(s string, into map[string]bool) string {
	pairs := [][2]rune{{'"', '"'}, {'“', '”'}, {'`', '`'}, {'\'', '\''}, {'‘', '’'}}
	rs := []rune(s)
	for _, p := range pairs {
		for i := 0; i < len(rs); i++ {
			if rs[i] != p[0] {
				continue
			}
			if p[0] == '\'' && i > 0 && (unicode.IsLetter(rs[i-1]) || unicode.IsDigit(rs[i-1])) {
				continue
			}
			j := i + 1
			for j < len(rs) && rs[j] != p[1] {
				j++
			}
			if j >= len(rs) {
				break
			}
			if p[1] == '\'' && j+1 < len(rs) && unicode.IsLetter(rs[j+1]) {
				continue // an apostrophe, not a closing quote
			}
			into["\""+string(rs[i+1:j])+"\""] = true
			for k := i; k <= j; k++ {
				rs[k] = ' '
			}
			i = j
		}
	}
	return string(rs)
}

// normNumber makes "v1.2" and "1.2" alike and drops thousands separators.
func normNumber(s string) string {
	if len(s) > 1 && s[0] == 'v' && s[1] >= '0' && s[1] <= '9' {
		s = s[1:]
	}
	if strings.Count(s, ",") > 0 && strings.Trim(s, "0123456789,") == "" {
		s = strings.ReplaceAll(s, ",", "")
	}
	return s
}

func isDotted(t string) bool {
	i := strings.IndexByte(t, '.')
	return i > 0 && i < len(t)-1
}

func isCamel(t string) bool {
	prevLower := false
	for _, r := range t {
		if unicode.IsUpper(r) && prevLower {
			return true
		}
		prevLower = unicode.IsLower(r)
	}
	return false
}

func isAllCaps(t string) bool {
	n := 0
	for _, r := range t {
		if unicode.IsLower(r) {
			return false
		}
		if unicode.IsUpper(r) {
			n++
		}
	}
	return n >= 2
}

func startsUpper(t string) bool {
	r, _ := utf8.DecodeRuneInString(t)
	return unicode.IsUpper(r)
}
