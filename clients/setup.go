package clients

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/config"
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

// SetupOptions tune Setup.
type SetupOptions struct {
	// Format of the client file: FormatMCPServers or FormatVSCode ("" guesses from the
	// file's keys, and a new file gets FormatMCPServers).
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
// the original values (tokens included), and then writes the new content atomically.
// A file that is not valid JSON, or whose comments or trailing commas an edit would
// lose, is refused and nothing is written.
func Setup(path string, entry Entry, opts SetupOptions) (*Result, error) {
	if entry.Name == "" || entry.Command == "" {
		return nil, errors.New("the nexus entry needs a name and a command (the path of the nexus executable)")
	}
	doc, data, exists, hasComments, err := readDocument(path)
	if err != nil {
		return nil, err
	}
	if hasComments {
		return nil, fmt.Errorf("%s has comments or trailing commas, which rewriting it would lose; remove them, or add the nexus entry by hand (see --dry-run for it)", path)
	}
	format := opts.Format
	if format == "" {
		if _, key := serversKey(doc, ""); key == "servers" {
			format = FormatVSCode
		} else {
			format = FormatMCPServers
		}
	}
	srv, err := servers(path, doc, format)
	if err != nil {
		return nil, err
	}
	before, err := doc.pretty()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !exists {
		before = nil
	}

	res := &Result{Created: !exists}
	names := importNames(srv)
	for _, name := range opts.Move {
		raw, ok := srv.get(name)
		if !ok {
			return nil, fmt.Errorf("%s has no server %q to move; it has: %s", path, name, strings.Join(srv.keys, ", "))
		}
		if name == entry.Name || isNexusEntry(raw) {
			return nil, fmt.Errorf("cannot move %q behind Nexus: it is the Nexus entry itself", name)
		}
		im := Imported{Original: name, Name: names[name], Raw: raw}
		im.Server, im.Secrets, im.Notes, im.Err = convert(im.Name, raw)
		if im.Err != nil {
			return nil, fmt.Errorf("cannot move %q behind Nexus, so nothing was changed (leave it in the client, or fix it): %w", name, im.Err)
		}
		res.Moved = append(res.Moved, im)
		srv.delete(name)
	}

	newEntry, err := encodeEntry(entry, format)
	if err != nil {
		return nil, err
	}
	if old, ok := srv.get(entry.Name); ok {
		res.Replaced = !jsonEqual(old, newEntry)
		if res.Replaced {
			// Keep keys the user added to the entry (say, "disabled") unless we set them.
			newEntry = mergeEntry(old, newEntry)
		} else {
			newEntry = old
		}
	}
	srv.set(entry.Name, newEntry)
	if err := putServers(doc, srv, format); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	after, err := doc.pretty()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	res.Changed = !bytes.Equal(before, after)
	if !res.Changed {
		return res, nil
	}
	res.Diff = UnifiedDiff(path, path+" (after nexus setup)", redact(before), redact(after))
	if opts.DryRun {
		return res, nil
	}

	perm := fs.FileMode(0o600) // a client file may hold tokens in its env
	if exists {
		if st, err := os.Stat(path); err == nil {
			perm = st.Mode().Perm()
		}
		now := opts.Now
		if now.IsZero() {
			now = time.Now()
		}
		backup, err := writeBackup(path, data, now)
		if err != nil {
			return nil, err
		}
		res.Backup = backup
	}
	if err := config.WriteFileAtomic(path, after, perm); err != nil {
		return nil, fmt.Errorf("writing %s (the original is unchanged): %w", path, err)
	}
	return res, nil
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

func encodeEntry(e Entry, format Format) (json.RawMessage, error) {
	d := &document{vals: map[string]json.RawMessage{}}
	if format == FormatVSCode {
		d.set("type", json.RawMessage(`"stdio"`))
	}
	cmd, _ := json.Marshal(e.Command)
	d.set("command", cmd)
	args, _ := json.Marshal(append([]string{}, e.Args...))
	d.set("args", args)
	if len(e.Env) > 0 {
		env, _ := json.Marshal(e.Env)
		d.set("env", env)
	}
	b, err := d.pretty()
	if err != nil {
		return nil, fmt.Errorf("encoding the nexus entry: %w", err)
	}
	return bytes.TrimSpace(b), nil
}

// mergeEntry sets the keys of next over old, keeping old's other keys.
func mergeEntry(old, next json.RawMessage) json.RawMessage {
	o, err := parseDocument(old)
	if err != nil {
		return next
	}
	n, _ := parseDocument(next)
	for _, k := range n.keys {
		o.set(k, n.vals[k])
	}
	b, err := o.pretty()
	if err != nil {
		return next
	}
	return bytes.TrimSpace(b)
}

func putServers(doc, srv *document, format Format) error {
	b, err := srv.pretty()
	if err != nil {
		return err
	}
	raw := json.RawMessage(bytes.TrimSpace(b))
	nested, key := serversKey(doc, format)
	if !nested {
		doc.set(key, raw)
		return nil
	}
	mraw, _ := doc.get("mcp")
	mcp, err := parseDocument(mraw)
	if err != nil {
		return errors.New(`"mcp" must be an object`)
	}
	mcp.set(key, raw)
	mb, err := mcp.pretty()
	if err != nil {
		return err
	}
	doc.set("mcp", bytes.TrimSpace(mb))
	return nil
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

var leafRE = regexp.MustCompile(`^(\s*)(?:("(?:[^"\\]|\\.)*"): )?("(?:[^"\\]|\\.)*")(,?)$`)

// redact hides the values of pretty-printed JSON that look like credentials (by key or
// by value), so that a diff can be shown on a screen or pasted into an issue. Each
// string leaf of pretty JSON is on a line of its own, so a line-wise pass suffices.
func redact(pretty []byte) string {
	lines := strings.Split(string(pretty), "\n")
	for i, l := range lines {
		m := leafRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var key, val string
		if m[2] != "" && json.Unmarshal([]byte(m[2]), &key) != nil {
			continue
		}
		if json.Unmarshal([]byte(m[3]), &val) != nil || val == "" || isReference(val) {
			continue
		}
		if (key != "" && SecretHeader(key)) || SecretValue(val) {
			k := ""
			if m[2] != "" {
				k = m[2] + ": "
			}
			lines[i] = m[1] + k + `"[redacted]"` + m[4]
		}
	}
	return strings.Join(lines, "\n")
}

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

// Names lists the server names in a client file, in file order, leaving out the
// entry called skip (the Nexus entry), for offering which to move behind Nexus.
func Names(path string, skip string) ([]string, error) {
	doc, _, _, _, err := readDocument(path)
	if err != nil {
		return nil, err
	}
	srv, err := servers(path, doc, "")
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(slices.Clone(srv.keys), func(s string) bool { return s == skip }), nil
}
