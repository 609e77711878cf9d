package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/secrets"
)

// secretIndex lists the names (never the values) of the secrets stored with
// `nexus secrets set`: an OS keychain cannot be enumerated, and a secret no config
// refers to yet would otherwise be invisible to `nexus secrets list`.
type secretIndex struct{ path string }

func (e *env) secretIndex() secretIndex {
	return secretIndex{path: filepath.Join(e.home, "secrets", "names.json")}
}

func (x secretIndex) names() ([]string, error) {
	data, err := os.ReadFile(x.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the secret names: %w", err)
	}
	var names []string
	if err := json.Unmarshal(data, &names); err != nil {
		return nil, fmt.Errorf("reading the secret names in %s: %w", x.path, err)
	}
	return names, nil
}

// update adds or removes name.
func (x secretIndex) update(name string, present bool) error {
	names, err := x.names()
	if err != nil {
		return err
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == name })
	if present {
		names = append(names, name)
	}
	slices.Sort(names)
	data, _ := json.MarshalIndent(names, "", "  ")
	if err := os.MkdirAll(filepath.Dir(x.path), 0o700); err != nil {
		return fmt.Errorf("recording the secret name: %w", err)
	}
	return config.WriteFileAtomic(x.path, append(data, '\n'), 0o600)
}

// storedSecretNames is every secret name known to be stored: those in the file
// store (which can be listed, a keychain cannot) and those `secrets set` recorded.
func (e *env) storedSecretNames(ctx context.Context) []string {
	names, _ := e.secretIndex().names()
	file := &secrets.File{Path: filepath.Join(e.home, "secrets", "secrets.json")}
	if _, err := os.Stat(file.Path); err == nil {
		if more, err := file.Names(ctx); err == nil {
			names = append(names, more...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// secretPlace names where a secret just stored went: the keychain, or the insecure
// file store when no keychain was usable (saying "keychain" then would send the user
// looking in the wrong place).
func (e *env) secretPlace(ctx context.Context, name string) string {
	file := &secrets.File{Path: filepath.Join(e.home, "secrets", "secrets.json")}
	if _, err := os.Stat(file.Path); err == nil {
		if names, err := file.Names(ctx); err == nil && slices.Contains(names, name) {
			return "the insecure file store " + file.Path
		}
	}
	return "the keychain"
}

// fileStoreNotice warns, once, when a command has just stored secrets in the
// insecure file store: the one moment the weaker storage is worth a warning
// outside serve's log (a command that only reads a secret stays quiet). When
// --insecure-file-store chose the store, the choice is recorded in the personal
// config (keepFileStore): a later command, or serve started by a client, without
// the flag must find the secrets just stored.
func (e *env) fileStoreNotice(ctx context.Context, stored int) error {
	if stored == 0 || e.storeFile == "" {
		return nil
	}
	cfg, _ := e.load()
	kept, err := e.keepFileStore(ctx, cfg, false)
	if err != nil {
		return err
	}
	if kept {
		e.fileStoreWarning(e.stderr, false)
		return nil
	}
	fmt.Fprintf(e.stderr, "warning: no OS keychain is usable: %d secret(s) are kept in the insecure file store %s, a plain file readable only by you\n", stored, e.storeFile)
	return nil
}
