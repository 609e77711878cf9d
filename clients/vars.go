package clients

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// clientVars are the values of the variables clients expand in their server
// entries (VS Code's and Cursor's ${userHome}, ${workspaceFolder}), as far as they
// can be known outside the client: Nexus does not expand them when it starts a
// child, so an import resolves them or refuses the entry.
type clientVars struct {
	userHome string
	// workspaceFolder is known for a workspace's own file (<folder>/.vscode/mcp.json,
	// <folder>/.cursor/mcp.json), and empty for a user-level file.
	workspaceFolder string
}

// varsFor are the variables of the client file at path.
func varsFor(path string) clientVars {
	v := clientVars{}
	v.userHome, _ = os.UserHomeDir()
	abs, err := filepath.Abs(path)
	if err != nil {
		return v
	}
	dir := filepath.Dir(abs)
	if base := filepath.Base(dir); base == ".vscode" || base == ".cursor" {
		if ws := filepath.Dir(dir); ws != v.userHome {
			v.workspaceFolder = ws
		}
	}
	return v
}

// clientVarRE matches ${NAME} and ${NAME:ARG} in a client entry.
var clientVarRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*|/)(?::[^}]*)?\}`)

// resolveVars replaces, in the JSON text of an entry, the client variables whose
// values are known. Nexus's own references (${env:...}, ${keyring:...}) and VS Code
// inputs (${input:...}, handled by convert) stay. A variable only the client can
// resolve is an error: the server would start with the literal text.
func resolveVars(raw json.RawMessage, v clientVars) (json.RawMessage, []string, error) {
	var notes []string
	var failed []string
	out := clientVarRE.ReplaceAllStringFunc(string(raw), func(m string) string {
		name := clientVarRE.FindStringSubmatch(m)[1]
		val := ""
		switch name {
		case "env", "keyring", "input":
			return m
		case "userHome":
			val = v.userHome
		case "workspaceFolder":
			val = v.workspaceFolder
		case "workspaceFolderBasename":
			if v.workspaceFolder != "" {
				val = filepath.Base(v.workspaceFolder)
			}
		case "pathSeparator", "/":
			val = string(os.PathSeparator)
		}
		if val == "" {
			failed = append(failed, m)
			return m
		}
		notes = append(notes, fmt.Sprintf("%s resolved to %s", m, val))
		q, _ := json.Marshal(val)
		return string(q[1 : len(q)-1])
	})
	if len(failed) > 0 {
		why := "only the client knows its value"
		if strings.Contains(strings.Join(failed, " "), "workspaceFolder") {
			why = "this is a user-level file, with no workspace folder"
		}
		return nil, notes, fmt.Errorf("it uses %s, which Nexus cannot resolve (%s); write the path itself in the client file and import again, or add the server with nexus add", strings.Join(dedupe(failed), ", "), why)
	}
	return json.RawMessage(out), dedupe(notes), nil
}

func dedupe(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// inlineEnvFile reads the entry's "envFile" (VS Code's, dotenv syntax) into its
// "env", whose own values win as in VS Code, and drops the key: Nexus has no
// envFile of its own, and the values then pass the same secret detection as the
// rest of env. A relative path is relative to the workspace folder, else to the
// client file's directory.
func inlineEnvFile(entry map[string]json.RawMessage, clientFile string, v clientVars) (string, error) {
	raw, ok := entry["envFile"]
	if !ok {
		return "", nil
	}
	delete(entry, "envFile")
	var file string
	if err := json.Unmarshal(raw, &file); err != nil || file == "" {
		return "", fmt.Errorf(`"envFile" must be the path of a file of KEY=VALUE lines`)
	}
	if !filepath.IsAbs(file) {
		base := v.workspaceFolder
		if base == "" {
			base = filepath.Dir(clientFile)
		}
		file = filepath.Join(base, file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("its envFile %s cannot be read (%v), so its variables would be missing", file, err)
	}
	vars, err := parseDotenv(data)
	if err != nil {
		return "", fmt.Errorf("its envFile %s: %w", file, err)
	}
	env := map[string]string{}
	if e, ok := entry["env"]; ok {
		if err := json.Unmarshal(e, &env); err != nil {
			return "", fmt.Errorf(`"env" must be an object of strings`)
		}
	}
	n := 0
	for k, val := range vars {
		if _, set := env[k]; !set {
			env[k] = val
			n++
		}
	}
	entry["env"], _ = json.Marshal(env)
	return fmt.Sprintf("envFile %s: %d variable(s) copied into env (Nexus does not read the file again: import again after changing it)", file, n), nil
}

// parseDotenv reads KEY=VALUE lines: blank lines and # comments skipped, an
// "export " prefix allowed, values optionally in single or double quotes.
func parseDotenv(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, val, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("line %d is not KEY=VALUE", n)
		}
		val = strings.TrimSpace(val)
		switch {
		case len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"':
			if u, err := strconv.Unquote(val); err == nil {
				val = u
			} else {
				val = val[1 : len(val)-1]
			}
		case len(val) >= 2 && val[0] == '\'' && val[len(val)-1] == '\'':
			val = val[1 : len(val)-1]
		}
		out[k] = val
	}
	return out, sc.Err()
}
