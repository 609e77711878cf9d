package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/internal/proc"
)

// A running `nexus serve` announces itself in $NEXUS_HOME/run/<pid>: the file holds
// how many reloads it made on request, and when its process started. A CLI command
// that edits the policy, the agents or the servers signals every announced gateway
// (SIGHUP) and waits until each has counted one more reload: the edit is then in
// force in all of them before the command returns. Where signals do not exist
// (Windows), the gateways' polling of the config files applies the edit within a
// second instead.
//
// A gateway killed with SIGKILL leaves its file behind, and its pid may be reused
// by an unrelated process, which SIGHUP would kill. So a file is signalled only
// when its process is provably the one that wrote it: the start time it recorded is
// the start time of the process with that pid now (read from /proc on Linux). A
// file whose pid has gone, or now belongs to another process, is removed. Where the
// start time cannot be read (macOS, Windows), nothing is signalled: the gateways'
// config poll applies the edit.

// confirmWait bounds how long a command waits for the running gateways.
const confirmWait = 5 * time.Second

func runFile(home string, pid int) string {
	return filepath.Join(home, "run", strconv.Itoa(pid))
}

// runEntry is what a gateway keeps in its run/<pid> file.
type runEntry struct {
	reloads int64
	// start is when the process started, as proc.Start says; "" when unknown
	// (then no command signals it).
	start string
}

func (r runEntry) encode() []byte {
	return fmt.Appendf(nil, "%d\nstart %s\n", r.reloads, r.start)
}

// readRunEntry reads a run/ file. A file without a start line (written by an older
// gateway) has start "".
func readRunEntry(path string) (runEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return runEntry{}, err
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	n, err := strconv.ParseInt(strings.TrimSpace(first), 10, 64)
	if err != nil {
		return runEntry{}, fmt.Errorf("%s: %w", path, err)
	}
	start, _ := strings.CutPrefix(strings.TrimSpace(rest), "start ")
	return runEntry{reloads: n, start: start}, nil
}

// announce registers this gateway; the returned function removes the registration.
func announce(e Env) (reloaded func(), remove func()) {
	path := runFile(e.Home, os.Getpid())
	entry := runEntry{}
	if start, err := proc.Start(os.Getpid()); err == nil {
		entry.start = start
	} else {
		e.Logger.Debug("the gateway's start time is unknown: policy edits apply at the next config poll", "err", err)
	}
	write := func() {
		if err := config.WriteFileAtomic(path, entry.encode(), 0o600); err != nil {
			e.Logger.Warn("cannot announce the gateway to the CLI: policy edits apply at the next config poll", "err", err)
		}
	}
	write()
	return func() { entry.reloads++; write() }, func() { _ = os.Remove(path) }
}

// ReloadRunning makes every running gateway of home reload now and waits for
// each to confirm. It reports how many confirmed.
func ReloadRunning(ctx context.Context, home string, log *slog.Logger) (int, error) {
	entries, err := os.ReadDir(filepath.Join(home, "run"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing the running gateways: %w", err)
	}
	type waiting struct {
		pid    int
		before int64
	}
	var wait []waiting
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		path := runFile(home, pid)
		entry, err := readRunEntry(path)
		if err != nil {
			continue
		}
		if !stillRunning(log, path, pid, entry) {
			continue
		}
		p, err := os.FindProcess(pid)
		if err == nil {
			err = p.Signal(syscall.SIGHUP)
		}
		if err != nil {
			if errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH) {
				_ = os.Remove(path) // a gateway that died without cleaning up
			}
			continue // no signals here: its config poll applies the edit
		}
		wait = append(wait, waiting{pid, entry.reloads})
	}
	deadline := time.Now().Add(confirmWait)
	confirmed := 0
	for _, w := range wait {
		for {
			if entry, err := readRunEntry(runFile(home, w.pid)); err != nil || entry.reloads > w.before {
				confirmed++ // reloaded, or gone (a gone gateway serves nothing)
				break
			}
			if time.Now().After(deadline) {
				return confirmed, fmt.Errorf("the gateway with pid %d did not confirm the change within %s; it applies it at its next config poll", w.pid, confirmWait)
			}
			select {
			case <-ctx.Done():
				return confirmed, ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	return confirmed, nil
}

// stillRunning reports whether the gateway that wrote path is provably the process
// with that pid now, and may be signalled. A file whose process has gone, or whose
// pid another process now has, is removed; when that cannot be told, the file is
// left and the gateway is not signalled.
func stillRunning(log *slog.Logger, path string, pid int, entry runEntry) bool {
	start, err := proc.Start(pid)
	switch {
	case errors.Is(err, os.ErrProcessDone):
		_ = os.Remove(path) // a gateway that died without cleaning up
		return false
	case err != nil:
		return false // cannot tell: its config poll applies the edit
	case entry.start != start:
		log.Info("removing a stale gateway announcement: its pid now belongs to another process", "pid", pid)
		_ = os.Remove(path)
		return false
	}
	return true
}
