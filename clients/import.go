package clients

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/nexus-mcp/nexus/config"
	nexsecrets "github.com/nexus-mcp/nexus/secrets"
)

// Imported is one server entry of a client file, converted to a Nexus server.
type Imported struct {
	// Original is the entry's name in the client file; Name is the Nexus server name
	// made from it (lower-case, '-' for other characters, at most 32, unique).
	Original string
	Name     string
	// Server holds no secret: each value detected as one is a ${keyring:NAME} reference.
	Server *config.Server
	// Secrets maps keyring names ("<server>/<KEY>") to the values to store there before
	// Server is written.
	Secrets map[string]string
	// Notes say what was left out or needs a look (ignored keys, VS Code ${input:...}
	// variables, a password left in a URL).
	Notes []string
	// Err is set when the entry cannot become a Nexus server; Server is then nil.
	Err error
	// Raw is the entry as written in the client file.
	Raw json.RawMessage
}

// Renamed reports whether Name differs from Original.
func (im *Imported) Renamed() bool { return im.Name != im.Original }

// Rename gives the server another name (say, because the Nexus config has one of that
// name already), moving its keyring references along.
func (im *Imported) Rename(name string) error {
	if !config.ValidServerName(name) {
		return fmt.Errorf("server name %q: use 1-32 lower-case letters, digits or '-', starting with a letter or digit", name)
	}
	if im.Server == nil {
		im.Name = name
		return nil
	}
	old := "${keyring:" + im.Name + "/"
	repl := "${keyring:" + name + "/"
	fix := func(s string) string { return strings.ReplaceAll(s, old, repl) }
	for k, v := range im.Server.Env {
		im.Server.Env[k] = fix(v)
	}
	for k, v := range im.Server.Headers {
		im.Server.Headers[k] = fix(v)
	}
	for i, a := range im.Server.Args {
		im.Server.Args[i] = fix(a)
	}
	secrets := map[string]string{}
	for k, v := range im.Secrets {
		secrets[name+strings.TrimPrefix(k, im.Name)] = v
	}
	im.Secrets, im.Name, im.Server.Name = secrets, name, name
	return nil
}

// ReadServers reads the server entries of a client config file (Claude Desktop's or
// Cursor's "mcpServers", VS Code's "servers" or "mcp.servers" in its settings.json,
// Zed's "context_servers", opencode's "mcp", Codex's TOML tables, Goose's and
// Continue's YAML; comments are allowed), in file order, each in the common
// shape. The entry that runs Nexus itself (`nexus serve`) is left out. A file
// whose structure is wrong is an error; an entry that cannot be converted comes
// back with Err set, so one odd entry does not block the others.
func ReadServers(file string) ([]Imported, error) { return ReadServersAs(file, "") }

// ReadServersAs is ReadServers for a file of a known format ("" guesses it from
// the file's name and keys).
func ReadServersAs(file string, format Format) ([]Imported, error) {
	f, err := readClientFile(file)
	if err != nil {
		return nil, err
	}
	if !f.exists {
		return nil, fmt.Errorf("%s does not exist; check the path (is the client installed?)", file)
	}
	doc, _, err := parseDocument(file, format, f.data)
	if err != nil {
		return nil, err
	}
	names := importNames(doc)
	var out []Imported
	for _, orig := range doc.names() {
		raw, _ := doc.entry(orig)
		if isNexusEntry(raw) {
			continue
		}
		name := names[orig]
		im := Imported{Original: orig, Name: name, Raw: raw}
		im.Server, im.Secrets, im.Notes, im.Err = convert(name, raw, file)
		if im.Err != nil {
			im.Server, im.Secrets = nil, nil
			im.Err = fmt.Errorf("%s: server %q: %w", file, orig, im.Err)
		}
		out = append(out, im)
	}
	return out, nil
}

// importNames maps each entry of a document to its Nexus name, unique in file
// order, so that ReadServers and Setup name an entry alike.
func importNames(doc document) map[string]string {
	used := map[string]bool{}
	names := map[string]string{}
	for _, orig := range doc.names() {
		if raw, _ := doc.entry(orig); isNexusEntry(raw) {
			continue
		}
		name := uniqueName(SanitizeName(orig), used)
		used[name] = true
		names[orig] = name
	}
	return names
}

var invalidNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// SanitizeName makes a valid Nexus server name from a client's server name: lower
// case, runs of other characters become '-', at most 32 characters.
func SanitizeName(name string) string {
	s := invalidNameChars.ReplaceAllString(strings.ToLower(name), "-")
	s = strings.Trim(s, "-")
	if len(s) > 32 {
		s = strings.TrimRight(s[:32], "-")
	}
	if s == "" {
		s = "server"
	}
	return s
}

func uniqueName(name string, used map[string]bool) string {
	if !used[name] {
		return name
	}
	for i := 2; ; i++ {
		suffix := "-" + strconv.Itoa(i)
		base := name
		if len(base)+len(suffix) > 32 {
			base = strings.TrimRight(base[:32-len(suffix)], "-")
		}
		if !used[base+suffix] {
			return base + suffix
		}
	}
}

// isNexusEntry reports whether raw runs Nexus itself: importing it would make Nexus
// start itself as a child.
func isNexusEntry(raw json.RawMessage) bool {
	var e struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	if json.Unmarshal(raw, &e) != nil || len(e.Args) == 0 || e.Args[0] != "serve" {
		return false
	}
	base := strings.ToLower(filepath.Base(strings.ReplaceAll(e.Command, `\`, "/")))
	return base == "nexus" || base == "nexus.exe"
}

// convert makes a Nexus server of one client entry with config's one conversion
// (decodeEntry), then moves every value that looks like a secret into the
// returned map (keyring name -> value), leaving a ${keyring:NAME} reference in its
// place, and checks the result as config would load it.
func convert(name string, raw json.RawMessage, clientFile string) (*config.Server, map[string]string, []string, error) {
	s, notes, err := decodeEntry(name, raw, clientFile)
	if err != nil {
		return nil, nil, notes, err
	}
	kp := &keeper{server: name, secrets: map[string]string{}, notes: notes}
	env, headers := s.Env, s.Headers
	s.Env, s.Headers = nil, nil
	kp.env(s, env)
	kp.headers(s, headers)
	kp.args(s)
	if nexsecrets.URLHasPassword(s.URL) {
		kp.notes = append(kp.notes, "the url holds a password, which stays in the Nexus config; move it into a header if the server allows")
	}
	secrets := kp.secrets
	if len(secrets) == 0 {
		secrets = nil
	}
	if err := checkImported(name, s); err != nil {
		return nil, nil, kp.notes, err
	}
	return s, secrets, kp.notes, nil
}

// decodeEntry resolves the client's variables in raw, inlines its env file and
// converts it to a config.Server (named name), with notes on what was left out.
// An entry that is not an object has no notes.
func decodeEntry(name string, raw json.RawMessage, clientFile string) (*config.Server, []string, error) {
	vars := varsFor(clientFile)
	raw, notes, err := resolveVars(raw, vars)
	if err != nil {
		return nil, notes, err
	}
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entry); err != nil || entry == nil {
		return nil, nil, fmt.Errorf("an entry must be an object with \"command\" or \"url\"")
	}
	note, err := inlineEnvFile(entry, clientFile, vars)
	if err != nil {
		return nil, notes, err
	}
	if note != "" {
		notes = append(notes, note)
	}
	converted, unknown, err := config.ClientEntry(entry)
	for _, k := range unknown {
		notes = append(notes, fmt.Sprintf("key %q is not used by Nexus and was left out", k))
	}
	if err != nil {
		return nil, notes, err
	}
	one, _ := json.Marshal(converted)
	s := &config.Server{}
	if err := config.DecodeStrict(one, s); err != nil {
		return nil, notes, fmt.Errorf("unexpected value (%v)", strings.TrimPrefix(err.Error(), "json: "))
	}
	s.Name = name
	return s, notes, nil
}

// keeper moves the secret-looking values of one imported server into secrets,
// under the keyring names `nexus add --env/--header` uses (secrets.EnvName,
// secrets.HeaderName), and says in notes what it could not move.
type keeper struct {
	server  string
	secrets map[string]string
	notes   []string
}

// store keeps value under ref and returns the reference that replaces it.
func (kp *keeper) store(ref, value string) string {
	kp.secrets[ref] = value
	return "${keyring:" + ref + "}"
}

// env sets s.Env from env, secrets replaced by references.
func (kp *keeper) env(s *config.Server, env map[string]string) {
	for _, k := range sortedKeys(env) {
		v := env[k]
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		switch {
		case strings.Contains(v, "${input:"):
			kp.notes = append(kp.notes, fmt.Sprintf("env %s uses a VS Code input variable; set the value with `nexus secrets set %s`", k, nexsecrets.EnvName(kp.server, k)))
			s.Env[k] = "${keyring:" + nexsecrets.EnvName(kp.server, k) + "}"
		case v != "" && !nexsecrets.IsReference(v) && (nexsecrets.LooksSecretKey(k) || nexsecrets.LooksSecretValue(v)):
			s.Env[k] = kp.store(nexsecrets.EnvName(kp.server, k), v)
		default:
			s.Env[k] = v
		}
	}
}

// headers sets s.Headers from headers, secrets replaced by references; an
// Authorization scheme stays in the config, so the keychain holds the token
// alone.
func (kp *keeper) headers(s *config.Server, headers map[string]string) {
	for _, k := range sortedKeys(headers) {
		v := headers[k]
		if s.Headers == nil {
			s.Headers = map[string]string{}
		}
		ref := nexsecrets.HeaderName(kp.server, k)
		switch {
		case strings.Contains(v, "${input:"):
			kp.notes = append(kp.notes, fmt.Sprintf("header %s uses a VS Code input variable; set the value with `nexus secrets set %s`", k, ref))
			prefix := ""
			if p, _, ok := strings.Cut(v, "${input:"); ok {
				prefix = p
			}
			s.Headers[k] = prefix + "${keyring:" + ref + "}"
		case v != "" && !nexsecrets.IsReference(v) && !schemeReference(v) && (nexsecrets.LooksSecretHeader(k) || nexsecrets.LooksSecretValue(v)):
			// Keep the scheme in the config so the keychain holds the token alone.
			if scheme, token, ok := strings.Cut(v, " "); ok && (strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "Basic") || strings.EqualFold(scheme, "token")) {
				s.Headers[k] = scheme + " " + kp.store(ref, token)
			} else {
				s.Headers[k] = kp.store(ref, v)
			}
		default:
			s.Headers[k] = v
		}
	}
}

// schemeReference reports whether an Authorization value is a scheme and a
// reference ("Bearer ${env:TOKEN}"), which already keeps the token out of the
// config: storing it would store the reference's text as the token.
func schemeReference(v string) bool {
	_, token, ok := strings.Cut(v, " ")
	return ok && nexsecrets.IsReference(strings.TrimSpace(token))
}

// args moves a password in an argument where the gateway can resolve it.
func (kp *keeper) args(s *config.Server) {
	// The gateway resolves references in env and headers only, so a password in an
	// argument cannot become one. A PostgreSQL URL's password moves to PGPASSWORD,
	// which libpq and node-postgres read; any other stays, with a note.
	for i, a := range s.Args {
		if !nexsecrets.URLHasPassword(a) {
			continue
		}
		u, err := url.Parse(a)
		var pw string
		if err == nil && u.User != nil {
			pw, _ = u.User.Password()
		}
		if pw != "" && (u.Scheme == "postgres" || u.Scheme == "postgresql") && s.Env["PGPASSWORD"] == "" {
			u.User = url.User(u.User.Username())
			s.Args[i] = u.String()
			if s.Env == nil {
				s.Env = map[string]string{}
			}
			s.Env["PGPASSWORD"] = kp.store(nexsecrets.EnvName(kp.server, "PGPASSWORD"), pw)
			kp.notes = append(kp.notes, fmt.Sprintf("the password in argument %d moved to the keychain, passed as PGPASSWORD", i+1))
			continue
		}
		kp.notes = append(kp.notes, fmt.Sprintf("argument %d holds a password, which stays in the Nexus config in plain text; pass it through an env var if the server allows", i+1))
	}
}

// checkImported checks s as config would load it, in a config of its own.
func checkImported(name string, s *config.Server) error {
	doc, err := json.Marshal(map[string]any{"servers": map[string]*config.Server{name: s}})
	if err != nil {
		return err
	}
	if _, err := config.Parse("import", doc); err != nil {
		if ce, ok := errors.AsType[*config.Error](err); ok {
			return errors.New(ce.Msg)
		}
		return err
	}
	return nil
}
