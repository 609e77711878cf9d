package config

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/nexus-mcp/nexus/secrets"
)

// refuseLiteralSecrets refuses a shared layer (a team file, a project's config) that
// holds a secret in clear: env values whose name looks secret, credential-looking
// header values, and any value that looks like a token. The error gives the line to
// fix and what to write instead.
func refuseLiteralSecrets(file string, data []byte) error {
	cfg, err := Parse(file, data)
	if err != nil {
		return err
	}
	for _, name := range cfg.ServerNames() {
		s := cfg.Servers[name]
		check := func(kind, key, value string, secretKey bool) error {
			if value == "" || strings.Contains(value, "${keyring:") || strings.Contains(value, "${env:") {
				return nil
			}
			if !secretKey && !secrets.LooksSecretValue(value) {
				return nil
			}
			ref := name + "/" + kind + "/" + key
			return &Error{File: fmt.Sprintf("%s line %d", file, lineOf(data, value)), Key: "servers." + name + "." + kind + "s." + key,
				Msg: fmt.Sprintf("a shared config layer holds a literal secret; write \"${keyring:%s}\" (then: nexus secrets set %s) or \"${env:%s}\" instead", ref, ref, key)}
		}
		for k, v := range s.Env {
			if err := check("env", k, v, secrets.LooksSecretKey(k)); err != nil {
				return err
			}
		}
		for k, v := range s.Headers {
			if err := check("header", k, v, secrets.LooksSecretHeader(k)); err != nil {
				return err
			}
		}
		for _, a := range s.Args {
			if secrets.LooksSecretValue(a) {
				return &Error{File: fmt.Sprintf("%s line %d", file, lineOf(data, a)), Key: "servers." + name + ".args",
					Msg: "an argument looks like a credential; pass it through env with a ${keyring:...} or ${env:...} reference"}
			}
		}
	}
	return nil
}

// lineOf is the 1-based line on which value first appears in data.
func lineOf(data []byte, value string) int {
	quoted := []byte(value)
	if i := bytes.Index(data, quoted); i >= 0 {
		return bytes.Count(data[:i], []byte("\n")) + 1
	}
	return 1
}
