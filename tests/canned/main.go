// Command canned answers every request on its stdin with one canned result,
// at once, and does nothing else: the least any process at the far end of a
// stdio pipe costs its client. BenchmarkMemoryHit runs it beside Nexus's
// memory hit, which cannot cost less.
//
// With -poll it reads its stdin as `nexus serve` does: the pipe opened again
// non-blocking and waited for in Go's network poller, rather than in a
// blocking read(2). The two differ only in how the process is woken when a
// request arrives, so their difference is that wake-up's price.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"syscall"
)

func main() {
	poll := flag.Bool("poll", false, "read stdin through the network poller, as nexus serve does")
	flag.Parse()
	in := os.Stdin
	if *poll {
		f, err := os.OpenFile("/proc/self/fd/0", os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "canned: -poll:", err)
			os.Exit(1)
		}
		in = f
	}
	r := bufio.NewReaderSize(in, 1<<16)
	var out []byte
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &req) != nil || req.ID == nil {
			continue // a notification, or not JSON: nothing to answer
		}
		out = append(append(out[:0], `{"jsonrpc":"2.0","id":`...), req.ID...)
		if req.Method == "initialize" {
			out = append(out, `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"canned","version":"1"}}}`+"\n"...)
		} else {
			out = append(out, `,"result":{"content":[{"type":"text","text":"the same read"}]}}`+"\n"...)
		}
		if _, err := os.Stdout.Write(out); err != nil {
			return
		}
	}
}
