package pins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/nexus-mcp/nexus/config"
)

// FileName is the pin file's name in NEXUS_HOME.
const FileName = "pins.json"

// Path is the pin file of a home.
func Path(home string) string { return filepath.Join(home, FileName) }

// File is the content of a pin file: per server, the tools approved and the
// tools held (offered, not approved).
type File struct {
	Version int                `json:"version"`
	Servers map[string]*Server `json:"servers"`
}

// Server is one server's pins.
type Server struct {
	// Tools are the approved definitions, by the server's own tool name: their
	// names are the approved set.
	Tools map[string]Pin `json:"tools"`
	// Held are the definitions the server offers that nobody approved yet: what
	// `nexus tools diff` shows and `nexus tools approve` accepts.
	Held map[string]Held `json:"held,omitempty"`
}

// Pin is one approved definition.
type Pin struct {
	SHA256     string          `json:"sha256"`
	Definition json.RawMessage `json:"definition"`
	// Approved is when it was approved or, for a server's first listing, seen.
	Approved time.Time `json:"approved,omitzero"`
}

// Held is one definition that waits for approval.
type Held struct {
	SHA256     string          `json:"sha256"`
	Definition json.RawMessage `json:"definition"`
	// Seen is when a gateway first saw the server offer it.
	Seen   time.Time `json:"seen,omitzero"`
	Change Kind      `json:"change"`
	// From is the approved tool a renamed one replaces.
	From string `json:"from,omitempty"`
	// Shadows are other servers' approved tools of the same name.
	Shadows []string `json:"shadows,omitempty"`
}

// FileError is a pin file that cannot be trusted: it does not parse, a hash does
// not match its definition, or others may write it. Nothing of what it pins is
// listed while it stands.
type FileError struct {
	Path      string
	Line, Col int // 0 when the problem has no place (the file's mode)
	Msg       string
}

func (e *FileError) Error() string {
	fix := "restore it from a backup, or remove it to pin every server afresh from its next listing (which trusts what the servers offer then)"
	switch {
	case e.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s; %s", e.Path, e.Line, e.Col, e.Msg, fix)
	default:
		return fmt.Sprintf("%s: %s", e.Path, e.Msg)
	}
}

// Load reads a pin file; a missing one is empty. A file that does not parse,
// whose hashes do not match their definitions, or that others may read or write
// is refused with a *FileError: pins that may have been tampered with approve
// nothing.
func Load(path string) (*File, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{Version: 1, Servers: map[string]*Server{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the pin file: %w", err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm()&^config.HomeFileMode != 0 {
		return nil, &FileError{Path: path, Msg: fmt.Sprintf("its mode %#o lets other users read or write it, so its approvals cannot be trusted; check its content (nexus tools diff), then chmod 600 %s", info.Mode().Perm(), path)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the pin file: %w", err)
	}
	return parse(path, data)
}

// parse decodes and checks a pin file's content.
func parse(path string, data []byte) (*File, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	f := &File{}
	if err := d.Decode(f); err != nil {
		var off int64
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			off = se.Offset
		case errors.As(err, &te):
			off = te.Offset
		default:
			off = d.InputOffset()
		}
		line, col := position(data, off)
		return nil, &FileError{Path: path, Line: line, Col: col, Msg: "not a pin file: " + err.Error()}
	}
	if d.More() {
		line, col := position(data, d.InputOffset())
		return nil, &FileError{Path: path, Line: line, Col: col, Msg: "text after the pin file's object"}
	}
	if f.Version != 1 {
		line, col := find(data, `"version"`)
		return nil, &FileError{Path: path, Line: line, Col: col, Msg: fmt.Sprintf("version %d is not one this Nexus knows (1)", f.Version)}
	}
	if f.Servers == nil {
		f.Servers = map[string]*Server{}
	}
	for _, server := range slices.Sorted(maps.Keys(f.Servers)) {
		s := f.Servers[server]
		if s == nil {
			s = &Server{}
			f.Servers[server] = s
		}
		if s.Tools == nil {
			s.Tools = map[string]Pin{}
		}
		for _, tool := range slices.Sorted(maps.Keys(s.Tools)) {
			p := s.Tools[tool]
			if err := check(path, data, tool, "servers."+server+".tools."+tool, p.SHA256, &p.Definition); err != nil {
				return nil, err
			}
			s.Tools[tool] = p
		}
		for _, tool := range slices.Sorted(maps.Keys(s.Held)) {
			h := s.Held[tool]
			if err := check(path, data, tool, "servers."+server+".held."+tool, h.SHA256, &h.Definition); err != nil {
				return nil, err
			}
			s.Held[tool] = h
		}
	}
	return f, nil
}

// check verifies that sha is the hash of the definition *def and that the
// definition is the tool's, and makes *def canonical. key names the entry
// in an error, which is placed at the hash's line.
func check(path string, data []byte, tool, key, sha string, def *json.RawMessage) error {
	at := func(msg string) error {
		line, col := find(data, `"`+sha+`"`)
		if sha == "" {
			line, col = find(data, `"`+tool+`"`)
		}
		return &FileError{Path: path, Line: line, Col: col, Msg: key + ": " + msg}
	}
	// The decoder checked the whole file: a definition it found is one valid
	// JSON value (none is empty), so it is only walked here, not checked again.
	if len(*def) == 0 {
		return at("its definition is not JSON")
	}
	canon, err := canonicalValid(*def)
	if err != nil {
		return at("its definition is not JSON")
	}
	d, err := definitionOf(canon)
	if err != nil || d.Name != tool {
		return at("its definition is not the definition of tool " + tool)
	}
	if d.Hash() != sha {
		return at("its sha256 is not the hash of its definition: the file was edited or is corrupt")
	}
	*def = d.JSON
	return nil
}

// position is the 1-based line and column of a byte offset.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// find is the position of the first occurrence of s, or the file's start.
func find(data []byte, s string) (line, col int) {
	i := bytes.Index(data, []byte(s))
	if i < 0 {
		return 1, 1
	}
	return position(data, int64(i))
}

// save writes the file, 0600, through a temporary file and a rename.
func (f *File) save(path string) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("writing the pin file: %w", err)
	}
	return config.WriteFileAtomic(path, append(data, '\n'), config.HomeFileMode)
}

// Update applies change to the pin file as it is on disk, under a lock that
// keeps the gateways and commands of one home from losing each other's writes.
// change reports whether it changed anything; an unchanged file is not written.
func Update(path string, change func(*File) (bool, error)) (*File, error) {
	if err := os.MkdirAll(filepath.Dir(path), config.HomeDirMode); err != nil {
		return nil, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	unlock, err := lock(path + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	f, err := Load(path)
	if err != nil {
		return nil, err
	}
	changed, err := change(f)
	if err != nil || !changed {
		return f, err
	}
	return f, f.save(path)
}

// clone is a copy of f that review may change without changing f.
func (f *File) clone() *File {
	c := &File{Version: f.Version, Servers: make(map[string]*Server, len(f.Servers))}
	for name, s := range f.Servers {
		c.Servers[name] = &Server{Tools: maps.Clone(s.Tools), Held: maps.Clone(s.Held)}
	}
	return c
}

// server is the entry of a server, made when missing.
func (f *File) server(name string) *Server {
	s := f.Servers[name]
	if s == nil {
		s = &Server{Tools: map[string]Pin{}}
		f.Servers[name] = s
	}
	return s
}
