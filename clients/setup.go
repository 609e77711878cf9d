package clients

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	nexsecrets "github.com/nexus-mcp/nexus/secrets"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Entry is the server entry that connects a client to Nexus.
type Entry struct {
	Name    string // the entry's name in the client file, usually "nexus"
	Command string // absolute path of the nexus executable
	Args    []string
	// Env is what Nexus needs, started by the client, to find the home and the
	// secrets of the Nexus that wrote the entry (NEXUS_HOME when it was set): a
	// client starts its servers with an environment of its own.
	Env map[string]string
}

// NexusEntry is the entry that runs `nexus serve` as the client's stdio server, as the
// agent called agent when agent is not empty. self should be an absolute path
// (os.Executable()): clients start servers with a minimal PATH.
func NexusEntry(self, agent string) Entry {
	args := []string{"serve"}
	if agent != "" {
		args = append(args, "--agent", agent)
	}
	return Entry{Name: "nexus", Command: self, Args: args}
}

// WithMaxNameLength has the entry's serve cap wire names at n characters, for a
// client that accepts no longer ones (Client.MaxNameLength); 0 leaves it as it is.
func (e Entry) WithMaxNameLength(n int) Entry {
	if n > 0 {
		e.Args = append(slices.Clone(e.Args), "--max-name-length", strconv.Itoa(n))
	}
	return e
}

// SetupOptions tune Setup.
type SetupOptions struct {
	// Format of the client file ("" guesses from the file's name and keys, and a
	// new JSON file gets FormatMCPServers).
	Format Format
	// DryRun computes the result and the diff and writes nothing.
	DryRun bool
	// Move names the client's entries (by their name in the client file) to take out
	// of the client file because they now run behind Nexus. Import them into the Nexus
	// config first (ReadServers), so that a failure there leaves the client as it was.
	Move []string
	// Now stamps the backup's name; zero means time.Now().
	Now time.Time
}

// Result says what Setup did or, in a dry run, would do.
type Result struct {
	// Diff is a unified diff of the file, before and after, both pretty-printed;
	// empty when nothing changes.
	Diff string
	// Backup is the copy of the file made before writing ("" in a dry run, for a new
	// file, or when nothing changed).
	Backup string
	// Moved are the entries taken out of the client file, converted for Nexus.
	Moved []Imported
	// Created is true when the file did not exist.
	Created bool
	// Replaced is true when an entry of that name was there and differed.
	Replaced bool
	// Changed is false when the file already had the entry and nothing was moved.
	Changed bool
}

// Setup adds entry to the client config file at path, keeping every other key, and
// takes the entries named in opts.Move out of it. Unless opts.DryRun, it first copies
// the file to <path>.nexus-backup-<time>, readable by the user alone since it holds
// the original values (tokens included), and then writes the new content atomically
// (into the target of a symbolic link, which stays). A file that does not parse, is
// read-only, or changes while Setup runs is refused and nothing is written.
func Setup(path string, entry Entry, opts SetupOptions) (*Result, error) {
	if entry.Name == "" || entry.Command == "" {
		return nil, errors.New("the nexus entry needs a name and a command (the path of the nexus executable)")
	}
	file, err := readClientFile(path)
	if err != nil {
		return nil, err
	}
	doc, _, err := parseDocument(path, opts.Format, file.data)
	if err != nil {
		return nil, err
	}
	before := file.data

	res := &Result{Created: !file.exists}
	names := importNames(doc)
	for _, name := range opts.Move {
		raw, ok := doc.entry(name)
		if !ok {
			return nil, fmt.Errorf("%s has no server %q to move; it has: %s", path, name, strings.Join(doc.names(), ", "))
		}
		if name == entry.Name || isNexusEntry(raw) {
			return nil, fmt.Errorf("cannot move %q behind Nexus: it is the Nexus entry itself", name)
		}
		im := Imported{Original: name, Name: names[name], Raw: raw}
		im.Server, im.Secrets, im.Notes, im.Err = convert(im.Name, raw, path)
		if im.Err != nil {
			return nil, fmt.Errorf("cannot move %q behind Nexus, so nothing was changed (leave it in the client, or fix it): %w", name, im.Err)
		}
		res.Moved = append(res.Moved, im)
		if err := doc.remove(name); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}

	old, existed := doc.entry(entry.Name)
	if err := doc.put(entry); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if existed {
		now, _ := doc.entry(entry.Name)
		res.Replaced = !jsonEqual(old, now)
	}
	after := keepLineEndings(before, doc.bytes())
	// The edited document always ends in a newline; a file without one whose entry
	// is already right is not rewritten for it.
	res.Changed = !bytes.Equal(before, after) && !bytes.Equal(append(slices.Clip(before), '\n'), after)
	if !res.Changed {
		return res, nil
	}
	res.Diff = UnifiedDiff(path, path+" (after nexus setup)", redact(before), redact(after))
	if opts.DryRun {
		return res, nil
	}
	if res.Backup, err = file.write(after, opts.Now); err != nil {
		return nil, err
	}
	return res, nil
}

// keepLineEndings writes the lines an edit added to a file whose lines all end in
// CRLF (as Windows editors save them) with CRLF too, so that the file does not
// end up with both.
func keepLineEndings(before, after []byte) []byte {
	crlf := bytes.Count(before, []byte("\r\n"))
	if crlf == 0 || crlf != bytes.Count(before, []byte("\n")) {
		return after
	}
	var out bytes.Buffer
	for i, c := range after {
		if c == '\n' && (i == 0 || after[i-1] != '\r') {
			out.WriteByte('\r')
		}
		out.WriteByte(c)
	}
	return out.Bytes()
}

// writeBackup copies data beside path under a name that does not exist yet. The copy
// is 0600 whatever the original's mode: it keeps the tokens that the edit moves out.
func writeBackup(path string, data []byte, now time.Time) (string, error) {
	base := path + ".nexus-backup-" + now.Format("20060102-150405")
	name := base
	for i := 2; ; i++ {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			name = fmt.Sprintf("%s-%d", base, i)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("making a backup of %s before editing it (nothing was changed): %w", path, err)
		}
		_, werr := f.Write(data)
		serr := f.Sync()
		cerr := f.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			os.Remove(name)
			return "", fmt.Errorf("making a backup of %s before editing it (nothing was changed): %w", path, err)
		}
		return name, nil
	}
}

// nexusEntry is the client entry that runs Nexus, its keys in the order clients
// write them.
type nexusEntry struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
	// Tools are the tools the client may call (GitHub Copilot CLI's; "*": all).
	Tools []string `json:"tools,omitempty"`
}

// putEntry writes the Nexus entry into the servers object. An entry of that name
// already there keeps its place and the keys the user added to it (say,
// "disabled"); the keys Nexus sets are replaced one by one.
func putEntry(srv *serverList, e Entry, format Format) error {
	next := nexusEntry{Command: e.Command, Args: append([]string{}, e.Args...), Env: e.Env}
	switch format {
	case FormatVSCode:
		next.Type = "stdio"
	case FormatCopilot:
		next.Type, next.Tools = "local", []string{"*"}
	}
	old, exists := srv.get(e.Name)
	if !exists || len(old) == 0 || old[0] != '{' {
		return srv.doc.Set(next, srv.at(e.Name)...)
	}
	// Only what differs is written, so a file that already has the entry, in any
	// layout, is left byte for byte alone.
	set := func(key string, v any) error {
		path := append(srv.at(e.Name), key)
		if have, ok := srv.doc.Get(path...); ok {
			if want, err := json.Marshal(v); err == nil && jsonEqual(have, want) {
				return nil
			}
		}
		return srv.doc.Set(v, path...)
	}
	if next.Type != "" {
		if err := set("type", next.Type); err != nil {
			return err
		}
	}
	if err := set("command", next.Command); err != nil {
		return err
	}
	var oldEntry nexusEntry
	if err := json.Unmarshal(old, &oldEntry); err != nil {
		// Merging would replace what the user wrote with what setup gives.
		return fmt.Errorf("the %q entry has a command, args or env of the wrong type (%v); fix it by hand, nothing was changed", e.Name, strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := set("args", MergeArgs(oldEntry.Args, next.Args)); err != nil {
		return err
	}
	// The env object keeps the user's variables; Nexus sets its own one by one.
	if _, ok := srv.doc.Get(append(srv.at(e.Name), "env")...); !ok || oldEntry.Env == nil {
		if len(next.Env) > 0 {
			return set("env", next.Env)
		}
		return nil
	}
	for _, k := range sortedKeys(next.Env) {
		v := next.Env[k]
		if have, ok := oldEntry.Env[k]; ok && k == "PATH" {
			v = MergePathList(have, v)
		}
		if err := set2(srv, e.Name, "env", k, v); err != nil {
			return err
		}
	}
	return nil
}

// MergePathList is the PATH an entry keeps when setup runs again: the directories
// it had, in their order (the user may have edited them), then those of next it
// lacked.
func MergePathList(have, next string) string {
	dirs := filepath.SplitList(have)
	for _, d := range filepath.SplitList(next) {
		if d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return strings.Join(dirs, string(os.PathListSeparator))
}

// set2 writes one key of an object inside the entry, leaving it alone when it
// already holds that value.
func set2(srv *serverList, entry, object, key, value string) error {
	path := append(srv.at(entry), object, key)
	if have, ok := srv.doc.Get(path...); ok {
		if want, err := json.Marshal(value); err == nil && jsonEqual(have, want) {
			return nil
		}
	}
	return srv.doc.Set(value, path...)
}

// MergeArgs is the argument list of an entry that setup rewrites: the user's own
// arguments (an --agent given by an earlier setup, a --log-level added by hand)
// stay, and each flag setup gives replaces its earlier value. An old list that does
// not run `serve` is replaced whole.
func MergeArgs(old, next []string) []string {
	if len(old) == 0 || len(next) == 0 || old[0] != next[0] {
		return next
	}
	out := slices.Clone(old)
	for i := 1; i < len(next); i++ {
		flag := next[i]
		if !strings.HasPrefix(flag, "-") {
			continue
		}
		name, _, inline := strings.Cut(flag, "=")
		value, hasValue := "", false
		if !inline && i+1 < len(next) && !strings.HasPrefix(next[i+1], "-") {
			value, hasValue = next[i+1], true
			i++
		}
		out = setFlag(out, name, flag, value, hasValue)
	}
	return out
}

// setFlag gives flag name its value in args, in place when it is there (as "--name
// value" or "--name=value"), else at the end.
func setFlag(args []string, name, flag, value string, hasValue bool) []string {
	for j := 1; j < len(args); j++ {
		a := args[j]
		if a == "--" {
			break
		}
		switch {
		case a == name && hasValue && j+1 < len(args):
			args[j+1] = value
			return args
		case a == name && !hasValue:
			return args
		case strings.HasPrefix(a, name+"="):
			if hasValue {
				args[j] = name + "=" + value
			} else {
				args[j] = flag
			}
			return args
		}
	}
	args = append(args, flag)
	if hasValue {
		args = append(args, value)
	}
	return args
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// redact hides, in a file's text shown as a diff, every string value that looks
// like a credential or sits under a key that names one, whatever the layout and
// format (JSON, TOML, YAML): a diff is printed and may be pasted into a bug
// report.
func redact(text []byte) string {
	lines := strings.Split(string(text), "\n")
	for i, l := range lines {
		if m := plainValueRE.FindStringSubmatch(l); m != nil {
			// KEY: value or KEY = 'value', a YAML or TOML value without JSON quotes.
			key, val := strings.Trim(m[2], `"'`), strings.TrimSpace(m[4])
			if strings.HasPrefix(val, "'") && strings.HasSuffix(val, "'") && len(val) >= 2 {
				val = val[1 : len(val)-1]
			}
			if isSecretValue(key, val) {
				lines[i] = m[1] + m[2] + m[3] + "[redacted]"
				continue
			}
		}
		var b strings.Builder
		last, key := 0, ""
		for _, m := range stringRE.FindAllStringIndex(l, -1) {
			lit := l[m[0]:m[1]]
			var val string
			if json.Unmarshal([]byte(lit), &val) != nil {
				continue
			}
			if rest := strings.TrimLeft(l[m[1]:], " \t"); strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "=") {
				key = val // a key; its value comes next
				continue
			}
			if before := strings.TrimRight(l[last:m[0]], " \t"); key == "" && strings.HasSuffix(before, "=") {
				fields := strings.Fields(strings.TrimSuffix(before, "="))
				if len(fields) > 0 {
					key = strings.Trim(fields[len(fields)-1], "{,")
				}
			}
			secret := isSecretValue(key, val)
			key = ""
			if secret {
				b.WriteString(l[last:m[0]])
				b.WriteString(`"[redacted]"`)
				last = m[1]
			}
		}
		if last > 0 {
			b.WriteString(l[last:])
			lines[i] = b.String()
		}
	}
	return strings.Join(lines, "\n")
}

// isSecretValue reports whether val, under key, is a credential to hide.
func isSecretValue(key, val string) bool {
	return val != "" && !nexsecrets.IsReference(val) &&
		(nexsecrets.LooksSecretValue(val) || (key != "" && (nexsecrets.LooksSecretHeader(key) || nexsecrets.LooksSecretKey(key))))
}

// plainValueRE matches a line that sets a key to a value not in double quotes
// (YAML's plain or single-quoted scalars, TOML's literal strings): indentation
// and a list dash, the key, the separator, the value.
var plainValueRE = regexp.MustCompile(`^(\s*(?:-\s+)?)("[^"]+"|'[^']+'|[A-Za-z0-9_.-]+)(\s*(?::\s+|=\s*))([^"\s\[{#&*!|>-][^#]*?|'[^']*')\s*$`)

// stringRE matches one JSON string literal.
var stringRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// UnifiedDiff is a unified diff of two texts, line by line, with three lines of
// context, headed by the two names. It is empty when the texts are equal.
func UnifiedDiff(nameA, nameB, a, b string) string {
	if a == b {
		return ""
	}
	x, y := splitLines(a), splitLines(b)
	ops := diffLines(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	const ctx = 3
	// Group the edit script into hunks.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-ctx, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		aStart, bStart, aLen, bLen := ops[start].ai, ops[start].bi, 0, 0
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, op := range ops[start:end] {
			out.WriteByte(op.kind)
			out.WriteString(op.line)
			out.WriteByte('\n')
		}
		i = end
	}
	return out.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

type diffOp struct {
	kind   byte // ' ', '-' or '+'
	line   string
	ai, bi int // positions in a and b before this op
}

// diffLines is a longest-common-subsequence line diff. Client files are small; past
// a size where the table would be large it shows the whole file replaced.
func diffLines(a, b []string) []diffOp {
	var ops []diffOp
	if len(a)*len(b) > 16<<20 {
		for i, l := range a {
			ops = append(ops, diffOp{'-', l, i, 0})
		}
		for j, l := range b {
			ops = append(ops, diffOp{'+', l, len(a), j})
		}
		return ops
	}
	lcs := make([][]int32, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i], i, j})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', a[i], i, j})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j], i, j})
			j++
		}
	}
	return ops
}
