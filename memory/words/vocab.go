package words

import "sync"

// The vocabulary the lexical embedder and the guard share: which words
// name the same thing in code and documentation queries, and which carry
// no meaning of their own. Every lookup goes through Canon, so "repo",
// "repos", "repository" and "repositories" are one word to both.

// phrases are multi-word spellings of one word, matched on lower-cased
// words before anything else.
var phrases = map[string]string{
	"pull request": "pr", "pull requests": "pr", "merge request": "pr", "merge requests": "pr",
	"set up": "setup", "log in": "login", "sign in": "login", "log on": "login",
	"log out": "logout", "sign out": "logout", "sign up": "signup",
	"single sign on": "sso", "continuous integration": "ci", "out of": "from",
	"on call": "oncall", "on-call": "oncall", "most recent": "latest", "point of contact": "contact",
	"user interface": "ui", "command line": "cli", "end to end": "e2e",
}

// synonyms maps a word, or its Porter stem, to the word that stands for
// all its spellings: abbreviations common in code and documentation
// queries, and a few plain synonyms. It is built when a word is first
// looked up, not as every process starts (stemming it takes a while).
var synonyms = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	add := func(to string, ws ...string) {
		for _, w := range append(ws, to) {
			m[w] = to
			m[Porter(w)] = to
		}
	}
	add("auth", "authn", "authentication", "authenticate", "authenticated", "authenticating")
	add("authz", "authorization", "authorisation", "authorize", "authorise", "authorized")
	add("repo", "repos", "repository", "repositories")
	add("config", "configs", "configuration", "configurations", "configure", "configured", "configuring", "cfg", "conf", "settings", "setting")
	add("db", "dbs", "database", "databases")
	add("k8s", "kubernetes", "kube")
	add("pr", "prs", "mr", "mrs")
	add("doc", "docs", "documentation", "document", "documents")
	add("env", "envs", "environment", "environments")
	add("dep", "deps", "dependency", "dependencies")
	add("func", "funcs", "function", "functions", "fn")
	add("param", "params", "parameter", "parameters", "arg", "args", "argument", "arguments")
	add("error", "err", "errs", "errors", "exception", "exceptions")
	add("msg", "msgs", "message", "messages")
	add("info", "information")
	add("perf", "performance")
	add("impl", "implementation", "implementations", "implement", "implemented", "implementing")
	add("spec", "specs", "specification", "specifications")
	add("dir", "dirs", "directory", "directories", "folder", "folders")
	add("app", "apps", "application", "applications")
	add("admin", "admins", "administrator", "administrators")
	add("svc", "service", "services")
	add("js", "javascript")
	add("ts", "typescript")
	add("py", "python")
	add("go", "golang")
	add("postgres", "postgresql", "pg")
	add("lib", "libs", "library", "libraries")
	add("pkg", "pkgs", "package", "packages")
	add("cmd", "command", "commands")
	add("util", "utils", "utility", "utilities")
	add("api", "apis")
	add("setup", "setups")
	add("login", "signin", "logon")
	add("logout", "signout", "logoff")
	add("call", "calls", "caller", "callers", "invoke", "invokes", "invocation", "invoked")
	add("use", "uses", "used", "using", "usage", "usages")
	add("def", "definition", "definitions", "define", "defined", "defines")
	add("latest", "newest", "recent")
	add("bug", "bugs", "defect", "defects")
	add("ticket", "tickets", "issue", "issues")
	add("slides", "slide", "deck", "decks", "presentation", "presentations")
	add("spreadsheet", "spreadsheets", "sheet", "sheets")
	add("cheap", "cheaper", "cheapest", "inexpensive", "affordable")
	add("engineer", "engineers", "developer", "developers")
	add("flaky", "flakey", "intermittent")
	add("delete", "remove", "removal")
	add("int", "integer", "integers")
	add("author", "wrote", "written")
	add("oncall", "oncalls")
	add("big", "large", "huge")
	add("small", "little", "tiny")
	return m
})

// filler are words that frame a request without changing what it asks
// for; the embedder drops them (the guard reads them separately).
var filler = map[string]bool{
	"a": true, "an": true, "the": true, "in": true, "of": true, "for": true, "to": true,
	"me": true, "my": true, "our": true, "all": true, "any": true, "some": true, "please": true,
	"show": true, "find": true, "list": true, "get": true, "give": true, "fetch": true, "search": true,
	"look": true, "up": true, "display": true, "return": true, "what": true, "which": true,
	"is": true, "are": true, "there": true, "that": true, "those": true, "these": true,
	"with": true, "from": true, "about": true, "and": true, "or": true, "do": true, "does": true,
	"we": true, "i": true, "can": true, "you": true, "how": true, "where": true, "on": true, "at": true,
	"by": true, "it": true, "its": true, "be": true, "this": true, "related": true, "regarding": true,
	"s": true, "who": true, "whom": true, "whose": true, "when": true, "why": true, "did": true,
	"was": true, "were": true, "been": true, "being": true, "has": true, "have": true, "had": true,
	"into": true, "onto": true, "via": true, "as": true, "here": true, "us": true, "your": true,
	"their": true, "them": true, "they": true, "want": true, "need": true, "know": true,
	"tell": true, "help": true, "could": true, "would": true, "should": true, "will": true,
	"guide": true, "tutorial": true, "explain": true, "explanation": true, "explained": true,
	"overview": true, "instructions": true, "instruction": true, "howto": true, "work": true, "works": true,
	"handle": true, "handles": true, "handling": true, "having": true,
}

// Token is one word of a text: as written (lower-cased; a phrase's words
// joined by spaces) and canonical.
type Token struct{ Raw, Canon string }

// Tokens returns the lower-cased words of text with phrases joined,
// Porter-stemmed, and mapped through synonyms.
func Tokens(text string) []Token {
	ws := Split(text)
	out := make([]Token, 0, len(ws))
	for i := 0; i < len(ws); i++ {
		if i+2 < len(ws) {
			if p, ok := phrases[ws[i]+" "+ws[i+1]+" "+ws[i+2]]; ok {
				out = append(out, Token{ws[i] + " " + ws[i+1] + " " + ws[i+2], p})
				i += 2
				continue
			}
		}
		if i+1 < len(ws) {
			if p, ok := phrases[ws[i]+" "+ws[i+1]]; ok {
				out = append(out, Token{ws[i] + " " + ws[i+1], p})
				i++
				continue
			}
		}
		out = append(out, Token{ws[i], Canon(ws[i])})
	}
	return out
}

// unstemmed are words whose ending is not an inflection: "https" is not
// the plural of "http".
var unstemmed = map[string]bool{
	"https": true, "ssl": true, "tls": true, "aws": true, "gcs": true, "dns": true, "os": true, "ios": true,
	"macos": true, "news": true, "status": true, "analysis": true, "alias": true, "canvas": true, "redis": true,
	"jenkins": true, "express": true, "sass": true, "less": true, "css": true, "sms": true, "vs": true, "windows": true,
}

// Lemma maps one lower-case word to the word the table maps it (or its
// Porter stem) to, else to its Inflection: unlike Canon, words the table
// does not name are only stripped of inflection, so derivations stay
// apart ("generic" is not "general"). memory/canon compares words by it.
func Lemma(w string) string {
	if s, ok := synonyms()[w]; ok {
		return s
	}
	if unstemmed[w] {
		return w
	}
	if s, ok := synonyms()[Porter(w)]; ok {
		return s
	}
	return Inflection(w)
}

// Canon maps one lower-case word to its canonical form.
func Canon(w string) string {
	if s, ok := synonyms()[w]; ok {
		return s
	}
	if unstemmed[w] {
		return w
	}
	st := Porter(w)
	if s, ok := synonyms()[st]; ok {
		return s
	}
	return st
}
