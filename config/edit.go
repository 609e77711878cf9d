package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nexus-mcp/nexus/internal/jsonedit"
	"io/fs"
	"os"
	"path/filepath"
)

// Document is one config file being edited. Its changes touch only the members
// they name: the user's key order, spacing and every key this version does not
// know stay as written.
type Document struct{ doc *jsonedit.Doc }

// Edit applies change to the file at path and writes it back atomically (a temporary
// file in the same directory, then a rename), so a crash never leaves half a config.
// The result is validated as a layer on its own before anything is written: an edit
// that would make the file invalid changes nothing.
func Edit(path string, change func(Document) error) error {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil
	case err != nil:
		return fmt.Errorf("reading %s: %w", path, err)
	default:
		// The strict reader first: its errors say where and what to fix.
		if _, err := decodeDocument(path, data); err != nil {
			return err
		}
	}
	doc, err := jsonedit.Parse(data)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if err := change(Document{doc}); err != nil {
		return err
	}
	out := doc.Bytes()
	if _, err := Parse(path, out); err != nil {
		return fmt.Errorf("the change would make the config invalid, so nothing was written: %w", err)
	}
	return WriteFileAtomic(path, out, 0o600)
}

// WriteFileAtomic writes data to path through a temporary file and a rename.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Get returns the value at path ("policy", "agents", "coder"), if set.
func (d Document) Get(path ...string) (json.RawMessage, bool) { return d.doc.Get(path...) }

// Set encodes v at path, creating the objects along it; an existing key keeps its
// place in the file.
func (d Document) Set(v any, path ...string) error { return d.doc.Set(v, path...) }

// Delete removes the key at path and reports whether it was there; an object left
// empty by it goes too.
func (d Document) Delete(path ...string) bool { return d.doc.Delete(true, path...) }

// SetServer puts entry under servers.name, replacing a previous entry of that name in
// either "servers" or "mcpServers".
func (d Document) SetServer(name string, entry *Server) error {
	if err := d.Set(entry, "servers", name); err != nil {
		return err
	}
	d.doc.Delete(true, "mcpServers", name)
	return nil
}

// RemoveServer deletes servers.name (or mcpServers.name) and reports whether it
// existed. A section left empty is removed.
func (d Document) RemoveServer(name string) bool {
	a := d.doc.Delete(true, "servers", name)
	b := d.doc.Delete(true, "mcpServers", name)
	return a || b
}
