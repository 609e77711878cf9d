package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Start is when process pid started, in clock ticks since boot (field 22
// of /proc/PID/stat): with the pid, it names one process for the life of the
// machine, so a reused pid is told from the process that had it. os.ErrProcessDone
// when there is no such process.
func Start(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat("/proc/self/stat"); serr == nil {
			return "", os.ErrProcessDone
		}
	}
	if err != nil {
		return "", fmt.Errorf("reading the start time of process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces or ')':
	// the fields after it start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	const startField = 22 - 3 // fields[0] is field 3 (the state)
	if len(fields) <= startField {
		return "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return fields[startField], nil
}
