package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
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
	errs = append(errs, literalDSN(file, data, top["memory"])...)
	return errors.Join(errs...)
}

// literalDSN refuses memory.dsn holding a database password in clear: a
// team file is read by everyone it is shared with, and the database holds
// every replica's cached results.
func literalDSN(file string, data []byte, raw json.RawMessage) []error {
	var mem struct {
		DSN string `json:"dsn"`
	}
	if json.Unmarshal(raw, &mem) != nil || !dsnHasPassword(mem.DSN) {
		return nil
	}
	line, col := position(data, "memory", "dsn")
	return []error{&Error{File: file, Line: line, Col: col, Key: "memory.dsn",
		Msg: `a shared config layer holds a database password; write "${env:NEXUS_PG_DSN}" (or "${keyring:memory/dsn}", then: nexus secrets set memory/dsn) instead`}}
}

// dsnHasPassword reports a PostgreSQL connection string (URL or
// key=value form) with a literal password. A password given by reference
// (${env:...}, ${keyring:...}) is fine.
func dsnHasPassword(dsn string) bool {
	if dsn == "" || strings.Contains(dsn, "${keyring:") || strings.Contains(dsn, "${env:") {
		return false
	}
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if p, ok := u.User.Password(); ok && p != "" {
			return true
		}
		return u.Query().Get("password") != ""
	}
	for _, f := range strings.Fields(dsn) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.EqualFold(strings.TrimSpace(k), "password") && v != "" {
			return true
		}
	}
	return strings.Contains(strings.ToLower(dsn), "password =")
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
