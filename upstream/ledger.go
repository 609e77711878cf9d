package upstream

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nexus-mcp/nexus/internal/proc"
)

// A Ledger records the process groups of the stdio children a gateway started,
// one file each, so that a gateway that was killed (SIGKILL, a crash, a power cut
// of its terminal) leaves nothing running for long: the next gateway that opens
// the same ledger ends the groups whose gateway is gone. A child whose stdin
// closes usually exits by itself; what it started often does not (npx's node,
// uvx's python), and stays in the child's group.
type Ledger struct {
	dir string
	log *slog.Logger
}

// OpenLedger opens the ledger kept in dir (created 0700 on first use).
func OpenLedger(dir string, log *slog.Logger) *Ledger {
	return &Ledger{dir: dir, log: log}
}

// entry is one recorded group: its leader (whose pid is the group's id) and the
// gateway that started it, each with its start time where the system tells it.
type entry struct {
	Server       string `json:"server"`
	Pid          int    `json:"pid"`
	Start        string `json:"start,omitempty"`
	Gateway      int    `json:"gateway"`
	GatewayStart string `json:"gatewayStart,omitempty"`
}

// record notes the group of the child pid started for server; forget removes it
// once the group is over.
func (l *Ledger) record(server string, pid int) (forget func()) {
	if l == nil {
		return func() {}
	}
	e := entry{Server: server, Pid: pid, Gateway: os.Getpid()}
	e.Start, _ = proc.Start(pid)
	e.GatewayStart, _ = proc.Start(e.Gateway)
	file := filepath.Join(l.dir, strconv.Itoa(pid)+".json")
	b, _ := json.Marshal(e)
	err := os.MkdirAll(l.dir, 0o700)
	if err == nil {
		err = os.WriteFile(file, b, 0o600)
	}
	if err != nil {
		l.log.Warn("recording a child's process group failed: if the gateway is killed, what the child started may outlive it", "server", server, "err", err)
	}
	return func() { _ = os.Remove(file) }
}

// Reap ends the recorded groups of gateways that are gone, and forgets them. It
// reports how many groups it ended. A group is ended only when it is surely the
// one recorded: its leader runs with the recorded start time, or its leader is
// gone and the group lives on (a pid is not reused while a group holds it as its
// id).
func (l *Ledger) Reap() int {
	if l == nil {
		return 0
	}
	files, err := os.ReadDir(l.dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			l.log.Warn("reading the ledger of child processes failed", "err", err)
		}
		return 0
	}
	var ended []int
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".json") {
			continue
		}
		file := filepath.Join(l.dir, f.Name())
		b, err := os.ReadFile(file)
		var e entry
		if err != nil || json.Unmarshal(b, &e) != nil || e.Pid <= 1 {
			_ = os.Remove(file)
			continue
		}
		if alive(e.Gateway, e.GatewayStart) {
			continue // its gateway still runs and ends its children itself
		}
		if l.isLeft(e) {
			l.log.Warn("ending the processes of a child left by a gateway that is gone", "server", e.Server, "group", e.Pid, "gateway", e.Gateway)
			ended = append(ended, e.Pid)
		}
		_ = os.Remove(file)
	}
	// Together: what several killed gateways left costs one grace, not one each.
	if err := killGroups(ended); err != nil {
		l.log.Warn("ending what a gone gateway left failed", "err", err)
	}
	return len(ended)
}

// isLeft reports whether e's group still runs and is surely e's.
func (l *Ledger) isLeft(e entry) bool {
	if !groupExists(e.Pid) {
		return false
	}
	start, err := proc.Start(e.Pid)
	switch {
	case errors.Is(err, os.ErrProcessDone):
		// The leader is gone and the group lives on: its members are what the
		// child started.
	case err == nil && start == e.Start && e.Start != "":
		// The leader itself still runs.
	default:
		if leaderRuns(e.Pid) {
			return false // cannot tell this process from the one recorded
		}
	}
	return true
}

// alive reports whether process pid runs and, where the system tells start
// times, is the one that started at start.
func alive(pid int, start string) bool {
	if !leaderRuns(pid) {
		return false
	}
	now, err := proc.Start(pid)
	if err != nil || start == "" {
		return err == nil || !errors.Is(err, os.ErrProcessDone)
	}
	return now == start
}
