//go:build unix

package run

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/config"
)

// TestServeReloadsOnSIGHUP: SIGHUP makes a serving gateway read its config
// again and count the reload in its run/ file, which is how a CLI edit
// (ReloadRunning) knows the edit is in force.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	home := t.TempDir()
	cfg, path := testConfig(t, home, child(t))
	env := testEnv(t, home, path)
	loads := make(chan struct{}, 8)
	env.Load = func() (*config.Config, error) {
		loads <- struct{}{}
		return config.Load([]string{path}, nil)
	}
	env.Watched = nil // only the signal reloads
	serveHTTP(t, ServeOptions{Env: env, Config: cfg, Gateway: Options{NoMemory: true, NoWait: true}})
	file := runFile(home, os.Getpid())
	before, err := readRunEntry(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-loads:
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP did not reload the config")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		e, err := readRunEntry(file)
		if err == nil && e.reloads > before.reloads {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reload was not counted in %s: %+v, %v", file, e, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A command in another process would now see it confirmed; this one
	// skips its own pid.
	if n, err := ReloadRunning(context.Background(), home, env.Logger); err != nil || n != 0 {
		t.Fatalf("ReloadRunning from the serving process: %d, %v", n, err)
	}
}
