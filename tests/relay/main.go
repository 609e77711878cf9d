// Command relay is the thinnest possible stdio MCP relay: it starts the command it is
// given and copies bytes both ways without parsing them, one goroutine a direction.
// The gateway benchmark runs it beside Nexus as the physical floor of one extra
// process hop. (It copies the client's bytes too, rather than handing the child its
// own stdin: a hop that reads nothing of what it forwards is no gateway's floor.)
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: relay COMMAND [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() {
		_, _ = io.Copy(in, os.Stdin)
		in.Close() // the client's end is the child's end
	}()
	_, _ = io.Copy(os.Stdout, out)
	_ = cmd.Wait()
}
