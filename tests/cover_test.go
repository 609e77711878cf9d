package tests

import "os"

// NEXUS_E2E_GOCOVERDIR counts the end-to-end tests in the coverage figure: when set,
// the binaries are built with -cover over the whole module, and every process
// started with a home's environment writes its counters there (read them with
// `go tool covdata`; docs/development.md shows how the figure is made). A process
// started with an environment of its own is not counted.
var e2eCoverDir = os.Getenv("NEXUS_E2E_GOCOVERDIR")

func coverBuildFlags() []string {
	if e2eCoverDir == "" {
		return nil
	}
	return []string{"-cover", "-coverpkg=github.com/nexus-mcp/nexus/..."}
}

func coverEnv() []string {
	if e2eCoverDir == "" {
		return nil
	}
	return []string{"GOCOVERDIR=" + e2eCoverDir}
}
