package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nexus-mcp/nexus/secrets"
)

// refuseLiteralSecrets refuses a shared layer (a team file, a project's config) that
// holds a secret in clear: env values whose name looks secret, credential-looking
// header values, and any value that looks like a token. Each error gives the spot to
// fix and what to write instead. It reads the layer as written, not as merged: a
// shared layer may hold partial entries, and a value's line is in this file.
func refuseLiteralSecrets(file string, data []byte) error {
	top, err := decodeDocument(file, data)
	if err != nil {
		return nil // reported by the merge
	}
	var errs []error
	for _, section := range []string{"servers", "mcpServers"} {
		var entries map[string]json.RawMessage
		if json.Unmarshal(top[section], &entries) != nil {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			var s struct {
				Env     map[string]string `json:"env"`
				Headers map[string]string `json:"headers"`
				Args    []string          `json:"args"`
			}
			_ = json.Unmarshal(entries[name], &s) // shape mistakes are reported by the merge
			errs = append(errs, literalSecrets(file, data, section, name, "env", s.Env, secrets.LooksSecretKey)...)
			errs = append(errs, literalSecrets(file, data, section, name, "header", s.Headers, secrets.LooksSecretHeader)...)
			for _, a := range s.Args {
				if secrets.LooksSecretValue(a) {
					line, col := position(data, section, name, "args")
					errs = append(errs, &Error{File: file, Line: line, Col: col, Key: section + "." + name + ".args",
						Msg: "an argument looks like a credential; pass it through env with a ${keyring:...} or ${env:...} reference"})
				}
			}
		}
	}
	return errors.Join(errs...)
}

// literalSecrets checks one env or headers map of a server in a shared layer.
func literalSecrets(file string, data []byte, section, name, kind string, values map[string]string, secretKey func(string) bool) []error {
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(values)) {
		value := values[key]
		if value == "" || strings.Contains(value, "${keyring:") || strings.Contains(value, "${env:") {
			continue
		}
		if !secretKey(key) && !secrets.LooksSecretValue(value) {
			continue
		}
		ref := name + "/" + kind + "/" + key
		field := map[string]string{"env": "env", "header": "headers"}[kind]
		line, col := position(data, section, name, field, key)
		errs = append(errs, &Error{File: file, Line: line, Col: col, Key: strings.Join([]string{section, name, field, key}, "."),
			Msg: fmt.Sprintf("a shared config layer holds a literal secret; write \"${keyring:%s}\" (then: nexus secrets set %s) or \"${env:%s}\" instead", ref, ref, key)})
	}
	return errs
}
