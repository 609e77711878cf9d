package proc

import (
	"os"
	"strconv"
	"strings"
)

// GroupAlive reports whether process group pgid has a member that is not a
// zombie; known is false where the system does not say. A member that has
// exited stays in its group until its parent reaps it, and an orphan's new
// parent (init, in a container often a shell) may take its time: waiting for
// the group to vanish would wait for that.
func GroupAlive(pgid int) (alive, known bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	want := strconv.Itoa(pgid)
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:])) // state, ppid, pgrp, ...
		if len(fields) > 2 && fields[2] == want && fields[0] != "Z" {
			return true, true
		}
	}
	return false, true
}
