package memory

// CanonWords returns the canonical words of text, in order: lower-cased runs
// of letters and digits, multi-word phrases joined ("pull request" -> "pr"),
// Porter-stemmed and mapped through the synonym table ("repositories" ->
// "repo", "folder" -> "dir"). Filler is kept: what frames a cache query ("list",
// "get") may be what tells two tools apart.
//
// It is exported for tool search, which ranks tools by the words a task shares
// with them and must treat spellings of one word as one, exactly as the
// similarity guard does.
func CanonWords(text string) []string {
	toks := normWords(text)
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.canon
	}
	return out
}
