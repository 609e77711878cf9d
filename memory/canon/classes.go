package canon

// Word classes the rules read. They are read-only tables: what a word is
// does not change while the process runs.

func set(ws ...string) map[string]bool {
	m := make(map[string]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}

var (
	articles   = set("a", "an", "the")
	doForms    = set("do", "does", "did")
	beForms    = set("is", "are", "was", "were", "be", "been", "being", "am")
	haveForms  = set("have", "has", "had", "having")
	modals     = set("can", "could", "should", "would", "will", "may", "might", "must", "shall")
	pronouns   = set("i", "we", "you", "he", "she", "they", "it", "me", "us", "them", "one")
	possessive = set("my", "our", "your", "their", "his", "her", "its")
	demonstr   = set("this", "that", "these", "those")
	whWords    = set("what", "which", "who", "whom", "whose", "when", "where", "why", "how")
	relatives  = set("that", "which", "who", "whom")
	// prepositions of scope, direction and relation: each is significant.
	prepositions = set("in", "on", "at", "to", "from", "for", "by", "with", "without", "of", "into", "onto",
		"over", "under", "above", "below", "before", "after", "since", "until", "till", "during", "between",
		"across", "near", "outside", "inside", "within", "through", "about", "against", "per", "via", "than",
		"except", "among", "along", "around", "beyond", "behind", "toward", "towards", "off", "up", "down",
		"instead", "because", "like", "unlike", "upon", "past", "beside", "besides", "throughout")
	conjunctions = set("and", "or", "but", "when", "if", "while", "whenever", "because", "unless", "so",
		"then", "where", "whereas", "although", "though", "nor", "once")
	negations  = set("not", "no", "never", "none", "without", "except", "nothing", "nobody", "neither", "nor")
	quantities = set("all", "any", "some", "none", "only", "both", "exactly", "each", "every", "most", "least",
		"more", "less", "fewer", "many", "much", "few", "several", "at", "top", "bottom", "first", "last",
		"second", "third", "half", "single", "multiple", "either", "other", "another", "same", "different",
		"just", "also", "even", "again", "still", "already", "ever", "latest", "oldest", "next", "previous")
	// imperatives frame a request at its start: "show me", "list all".
	imperatives = set("show", "list", "find", "get", "give", "display", "fetch", "search", "look", "tell",
		"locate", "retrieve", "lookup", "pull", "bring", "explain", "describe")
	// verbs that are imperatives before any word; the others ("list",
	// "search", "display") may be nouns ("search ranking") and are read as
	// imperatives only before "me", "for", "all" or an article. "get" is
	// one of the others: "get requests to the API" are HTTP requests.
	verbsOnly = set("show", "find", "give", "tell", "locate", "retrieve", "fetch", "explain", "describe")
	// irregular participles read as passives after a form of "be".
	irregularParticiples = set("read", "built", "sent", "made", "held", "kept", "run", "found", "thrown",
		"caught", "bought", "brought", "taught", "thought", "led", "fed", "set", "put", "cut", "hit", "shut",
		"split", "spread", "bound", "told", "sold", "known", "shown", "seen", "done", "begun", "won",
		"drawn", "grown", "flown", "paid", "said", "laid", "left", "lost", "meant", "spent", "understood",
		"felt", "dealt", "hung", "written", "taken", "given", "chosen", "broken", "hidden", "driven",
		"forgotten", "stolen", "eaten", "fallen", "frozen", "spoken", "woken", "overridden", "rewritten",
		"forbidden", "gotten", "proven", "shaken", "swollen", "torn", "worn", "born", "sworn", "withdrawn")
	// timeWords name a time; "this", "next" and "last" may come before.
	timeWords = set("today", "tomorrow", "yesterday", "tonight", "week", "month", "year", "quarter", "weekend",
		"morning", "afternoon", "evening", "night", "monday", "tuesday", "wednesday", "thursday", "friday",
		"saturday", "sunday")
	// phrases read as one word before anything else; the value is the
	// word it stands for.
	phrases = map[string]string{
		"other than": "except", "apart from": "except", "excluding": "except", "besides": "except",
		"with no": "without", "lacking": "without", "close to": "near", "next to": "near",
		"how come": "why", "outside of": "outside", "inside of": "inside", "in order to": "to",
		"inside": "in", "within": "in", "whenever": "when", "whom": "who", "across": "between",
		"related to": "about", "relating to": "about", "every": "all",
	}
)

// function reports a word that is not content: it frames, relates or
// quantifies the content words around it.
func function(w string) bool {
	return articles[w] || doForms[w] || beForms[w] || haveForms[w] || modals[w] || pronouns[w] ||
		possessive[w] || demonstr[w] || whWords[w] || prepositions[w] || conjunctions[w] ||
		negations[w] || quantities[w]
}

// participle reports a word that reads as a past participle.
func participle(raw string) bool {
	if irregularParticiples[raw] {
		return true
	}
	return len(raw) > 4 && raw[len(raw)-2:] == "ed"
}

// plural reports a plain word ending in a plural "s".
func plural(raw string) bool {
	n := len(raw)
	return n > 3 && raw[n-1] == 's' && raw[n-2] != 's' && raw[n-2] != 'u' && raw[n-2] != 'i'
}
