package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nexus-mcp/nexus/config"
)

// A running `nexus serve` announces itself in $NEXUS_HOME/run/<pid>: the file holds
// how many reloads it made on request. A CLI command that edits the policy, the
// agents or the servers signals every announced gateway (SIGHUP) and waits until
// each has counted one more reload: the edit is then in force in all of them before
// the command returns. Where signals do not exist (Windows), the gateways' polling of
// the config files applies the edit within a second instead.

// confirmWait bounds how long a command waits for the running gateways.
const confirmWait = 5 * time.Second

func runFile(home string, pid int) string {
	return filepath.Join(home, "run", strconv.Itoa(pid))
}

// announce registers this gateway; the returned function removes the registration.
func (e *env) announce() (reloaded func(), remove func()) {
	path := runFile(e.home, os.Getpid())
	var n int64
	write := func() {
		if err := config.WriteFileAtomic(path, []byte(strconv.FormatInt(n, 10)), 0o600); err != nil {
			e.log.Warn("cannot announce the gateway to the CLI: policy edits apply at the next config poll", "err", err)
		}
	}
	write()
	return func() { n++; write() }, func() { _ = os.Remove(path) }
}

// applyToRunning makes every running gateway of this home reload now and waits for
// each to confirm. It reports how many confirmed.
func (e *env) applyToRunning(ctx context.Context) (int, error) {
	entries, err := os.ReadDir(filepath.Join(e.home, "run"))
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
		before, err := readCount(runFile(e.home, pid))
		if err != nil {
			continue
		}
		p, err := os.FindProcess(pid)
		if err == nil {
			err = p.Signal(syscall.SIGHUP)
		}
		if err != nil {
			if errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH) {
				_ = os.Remove(runFile(e.home, pid)) // a gateway that died without cleaning up
			}
			continue // no signals here: its config poll applies the edit
		}
		wait = append(wait, waiting{pid, before})
	}
	deadline := time.Now().Add(confirmWait)
	confirmed := 0
	for _, w := range wait {
		for {
			if n, err := readCount(runFile(e.home, w.pid)); err != nil || n > w.before {
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

func readCount(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// confirmRunning applies an edit to the running gateways and says so on stderr. An
// edit is saved whatever happens here: a gateway that does not confirm applies it at
// its next config poll, and the warning says that.
func (e *env) confirmRunning(ctx context.Context) {
	n, err := e.applyToRunning(ctx)
	if err != nil {
		e.log.Warn("not every running gateway confirmed the change", "err", err)
	}
	if n > 0 {
		fmt.Fprintf(e.stderr, "in force in %d running gateway(s)\n", n)
	}
}
