package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Document is one config file as raw top-level keys, so that an edit keeps every key
// the user wrote, including ones this version does not touch.
type Document map[string]json.RawMessage

// Edit applies change to the file at path and writes it back atomically (a temporary
// file in the same directory, then a rename), so a crash never leaves half a config.
// The result is validated as a layer on its own before anything is written: an edit
// that would make the file invalid changes nothing.
func Edit(path string, change func(Document) error) error {
	doc := Document{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("reading %s: %w", path, err)
	default:
		obj, err := decodeDocument(path, data)
		if err != nil {
			return err
		}
		doc = obj
	}
	if err := change(doc); err != nil {
		return err
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	out = append(out, '\n')
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

// Object decodes the object under key (empty if absent).
func (d Document) Object(key string) (map[string]json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if raw, ok := d[key]; ok {
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("%q must be an object", key)
		}
	}
	return obj, nil
}

// Set encodes v under key.
func (d Document) Set(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %q: %w", key, err)
	}
	d[key] = raw
	return nil
}

// SetServer puts entry under servers.name, replacing a previous entry of that name in
// either "servers" or "mcpServers".
func (d Document) SetServer(name string, entry *Server) error {
	servers, err := d.Object("servers")
	if err != nil {
		return err
	}
	raw, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("encoding server %q: %w", name, err)
	}
	servers[name] = raw
	if err := d.removeFrom("mcpServers", name); err != nil {
		return err
	}
	return d.Set("servers", servers)
}

// RemoveServer deletes servers.name (or mcpServers.name) and reports whether it existed.
func (d Document) RemoveServer(name string) (bool, error) {
	found := false
	for _, section := range []string{"servers", "mcpServers"} {
		obj, err := d.Object(section)
		if err != nil {
			return false, err
		}
		if _, ok := obj[name]; ok {
			found = true
			if err := d.removeFrom(section, name); err != nil {
				return false, err
			}
		}
	}
	return found, nil
}

func (d Document) removeFrom(section, name string) error {
	obj, err := d.Object(section)
	if err != nil {
		return err
	}
	if _, ok := obj[name]; !ok {
		return nil
	}
	delete(obj, name)
	if len(obj) == 0 {
		delete(d, section)
		return nil
	}
	return d.Set(section, obj)
}
