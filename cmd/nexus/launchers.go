package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/nexus-mcp/nexus/clients"
	"github.com/nexus-mcp/nexus/config"
)

// recordedPath is the PATH setup writes into a client's entry: the directories of
// the PATH setup runs with that exist, each once. A GUI client starts Nexus with
// its own PATH, often without the directories of npx, uvx or node, and the
// children Nexus starts inherit it; recording the shell's PATH makes a server that
// runs from the shell run from the client too.
func recordedPath(path string) string {
	var dirs []string
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) || containsString(dirs, d) {
			continue
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		dirs = append(dirs, d)
	}
	return strings.Join(dirs, string(os.PathListSeparator))
}

// guiPath is the PATH a client started from the desktop is likely to give an entry
// that sets none: the system directories only.
func guiPath() string {
	switch runtime.GOOS {
	case "darwin":
		return "/usr/bin:/bin:/usr/sbin:/sbin"
	case "windows":
		return os.Getenv("PATH") // Windows apps get the user's PATH
	}
	return "/usr/local/bin:/usr/bin:/bin"
}

// lookPathIn is exec.LookPath against the PATH list path instead of the
// process's own: where a client's Nexus would find command.
func lookPathIn(command, path string) (string, bool) {
	if strings.ContainsAny(command, `/\`) {
		return command, executable(command)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, command)
		if executable(p) {
			return p, true
		}
		if runtime.GOOS == "windows" {
			for _, ext := range []string{".exe", ".cmd", ".bat"} {
				if executable(p + ext) {
					return p + ext, true
				}
			}
		}
	}
	return "", false
}

func executable(p string) bool {
	st, err := os.Stat(p)
	if err != nil || st.IsDir() {
		return false
	}
	return runtime.GOOS == "windows" || st.Mode().Perm()&0o111 != 0
}

// checkClients checks every known client whose file is on this machine: is
// Nexus in it, does the command its entry runs exist (found with the PATH the
// client gives it), which agent it connects as, and whether every stdio server's
// command is found on that PATH: a doctor run from a shell finds what a GUI
// client does not.
func (e *env) checkClients(cfg *config.Config) []check {
	userHome, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	var checks []check
	for _, cl := range clients.Known(runtime.GOOS, userHome, os.Getenv) {
		cl = cl.Located(fileExists)
		if !fileExists(cl.Path) {
			continue // not on this machine
		}
		entry, found, err := clients.FindNexus(cl.Path, cl.Format)
		switch {
		case err != nil:
			checks = append(checks, check{Area: "clients", Name: cl.Display, Status: checkWarn, Detail: err.Error()})
		case !found:
			checks = append(checks, check{Area: "clients", Name: cl.Display, Status: checkOK,
				Detail: fmt.Sprintf("not connected: %s has no entry that runs nexus serve (nexus setup %s adds one)", cl.Path, cl.Name)})
		case !e.sameHome(entry):
			checks = append(checks, check{Area: "clients", Name: cl.Display, Status: checkOK,
				Detail: fmt.Sprintf("%s starts Nexus from %s with another home (%s), not checked here", cl.Display, cl.Path, entry.Env["NEXUS_HOME"])})
		default:
			checks = append(checks, e.checkClientPath(cfg, cl, entry))
		}
	}
	return checks
}

// entryAgent is the agent a client entry's `nexus serve` runs as, "" for none.
func entryAgent(args []string) string {
	for i, a := range args {
		if a == "--agent" && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--agent="); ok {
			return v
		}
	}
	return ""
}

// sameHome reports whether a client entry runs Nexus with this command's home.
func (e *env) sameHome(entry clients.Entry) bool {
	want := entry.Env["NEXUS_HOME"]
	if want == "" {
		return os.Getenv("NEXUS_HOME") == ""
	}
	a, errA := filepath.Abs(want)
	b, errB := filepath.Abs(e.home)
	return errA == nil && errB == nil && a == b
}

func (e *env) checkClientPath(cfg *config.Config, cl clients.Client, entry clients.Entry) check {
	ch := check{Area: "clients", Name: cl.Display, Status: checkOK}
	path, from := entry.Env["PATH"], "the PATH its entry sets"
	if path == "" {
		path, from = guiPath(), "its own PATH (the entry sets none; likely "+guiPath()+")"
	}
	if _, ok := lookPathIn(entry.Command, path); !ok {
		ch.Status = checkFail
		ch.Detail = fmt.Sprintf("%s starts Nexus with %s, which is not found with %s, so the client cannot start Nexus", cl.Display, entry.Command, from)
		ch.Fix = fmt.Sprintf("run `nexus setup %s` again with the nexus you use now (it writes its own absolute path into %s)", cl.Name, cl.Path)
		return ch
	}
	as := "as the default agent (no --agent: the default policy applies; nexus setup " + cl.Name + " --agent NAME gives it its own)"
	if agent := entryAgent(entry.Args); agent != "" {
		as = "as agent " + agent
	}
	var missing []string
	for _, name := range cfg.ServerNames() {
		s := cfg.Servers[name]
		if s.Disabled || s.Transport != config.TransportStdio || s.Command == "" {
			continue
		}
		if _, ok := lookPathIn(s.Command, path); !ok {
			missing = append(missing, fmt.Sprintf("%s (server %s)", s.Command, name))
		}
	}
	if len(missing) == 0 {
		ch.Detail = fmt.Sprintf("%s starts Nexus from %s %s; every server's command is found with %s", cl.Display, cl.Path, as, from)
		return ch
	}
	ch.Status = checkFail
	ch.Detail = fmt.Sprintf("not found with %s, so these servers fail when %s starts Nexus: %s", from, cl.Display, strings.Join(missing, ", "))
	ch.Fix = fmt.Sprintf("run `nexus setup %s` again from a shell where they work (it adds that PATH to the entry in %s), or give each server's command as an absolute path", cl.Name, cl.Path)
	return ch
}
