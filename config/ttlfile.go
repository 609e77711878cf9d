package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/nexus-mcp/nexus/memory"
)

// The result lifetimes set with `nexus cache ttl` live in a file of their own in
// NEXUS_HOME, apart from the config files: a person editing config.json and an
// operator running the command each see where a ttl came from ("config" or
// "command" in `nexus list-tools`), and the command never rewrites the user's file.

// CommandTTLFile is the path of the lifetimes `nexus cache ttl` sets, in home.
func CommandTTLFile(home string) string { return filepath.Join(home, "ttl.json") }

// ReadCommandTTL reads the lifetimes set with `nexus cache ttl`: tool patterns to
// ttl strings as written (ParseCommandTTL checks them). A missing file is none.
func ReadCommandTTL(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	out := map[string]string{}
	if err := DecodeStrict(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w (it is written by nexus cache ttl; fix or delete it)", path, err)
	}
	return out, nil
}

// ParseCommandTTL checks and parses the lifetimes ReadCommandTTL returns.
func ParseCommandTTL(raw map[string]string) (map[string]memory.TTL, error) {
	out := make(map[string]memory.TTL, len(raw))
	for _, p := range slices.Sorted(maps.Keys(raw)) {
		b, _ := json.Marshal(raw[p])
		ttl, err := memory.ParseTTL(b)
		if err == nil {
			err = patternError(memory.Settings{TTL: map[string]memory.TTL{p: ttl}}.Validate())
		}
		if err != nil {
			return nil, fmt.Errorf("ttl %s: %w", p, err)
		}
		out[p] = ttl
	}
	return out, nil
}

// WriteCommandTTL replaces the lifetimes set with `nexus cache ttl`.
func WriteCommandTTL(path string, ttl map[string]string) error {
	data, err := json.MarshalIndent(ttl, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	return WriteFileAtomic(path, append(data, '\n'), 0o600)
}
