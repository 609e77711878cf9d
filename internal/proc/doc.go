// Package proc tells processes apart across pid reuse: a pid and its start time
// name one process for the life of the machine.
package proc
