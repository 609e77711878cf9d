package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/secrets"
)

// Written is what Write did.
type Written struct {
	Stored     []string // keyring names of the secrets stored
	AddedCache []string // cache patterns the hints added
}

// Write stores the installation's secrets, then writes its server under name
// into the config file at path with the entry's cache hints where the file does not
// set those keys already, all or nothing: if the config cannot be
// written, the secrets stored are deleted again. store is called only when there
// are secrets; log receives what could not be undone (nil discards).
func (inst *Installation) Write(ctx context.Context, path, name string, store func(context.Context) (secrets.Store, error), log *slog.Logger) (*Written, error) {
	w := &Written{}
	var st secrets.Store
	if len(inst.Secrets) > 0 {
		var err error
		if st, err = store(ctx); err != nil {
			return nil, fmt.Errorf("cannot store the secrets of %s, so nothing was written: %w\n(or give a secret as a reference, e.g. --value NAME='${env:VAR}', to read it from the environment)", name, err)
		}
	}
	undo := func() {
		for _, n := range w.Stored {
			if err := st.Delete(ctx, n); err != nil && log != nil {
				log.Warn("could not delete a secret", "name", n, "err", err)
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(inst.Secrets)) {
		if err := st.Set(ctx, n, inst.Secrets[n]); err != nil {
			undo()
			return nil, fmt.Errorf("storing the secret %s of %s, so nothing was written: %w", n, name, err)
		}
		w.Stored = append(w.Stored, n)
	}
	cache := map[string]string{}
	for k, v := range inst.Hints.Cache {
		if v != "auto" { // auto is what the cache does anyway
			cache[k] = v
		}
	}
	err := config.Edit(path, func(d config.Document) error {
		if err := d.SetServer(name, inst.Server); err != nil {
			return err
		}
		var err error
		w.AddedCache, err = addMissing(d, "cache", cache)
		return err
	})
	if err != nil {
		undo()
		return nil, err
	}
	return w, nil
}

// addMissing sets each key of values under section where the file does not set it
// already, and returns the keys added, sorted: a hint never overrides the user.
func addMissing(d config.Document, section string, values map[string]string) ([]string, error) {
	var added []string
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if _, set := d.Get(section, k); set {
			continue
		}
		if err := d.Set(values[k], section, k); err != nil {
			return nil, err
		}
		added = append(added, k)
	}
	return added, nil
}
