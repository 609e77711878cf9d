//go:build race

package tests

// raceEnabled builds the binaries under test with the race detector too.
const raceEnabled = true
