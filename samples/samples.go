// Package samples provides faithful sample MCP servers of the two knowledge
// graph servers Nexus's first users put behind the gateway: code-kg (a code
// knowledge graph with lint and security findings, audit risks, anomalies
// and a guarded regeneration) and doc-kg (a read-only document knowledge
// graph with scoped search). They follow the tool contracts of
// docs/contracts.md on a small embedded dataset, so the
// gateway can be built and tested against realistic children without the
// Nexus API behind the real ones.
package samples

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// Version is reported by both sample servers in their server info.
const Version = "0.1.0-sample"

// Names of the samples accepted by New and Serve.
const (
	CodeKGName = "code-kg"
	DocKGName  = "doc-kg"
)

// Environment variables read by the samples.
const (
	// EnvLocalRepoRoots lists the roots under which kg_compare_with_local_git
	// accepts a local_path, separated by os.PathListSeparator.
	EnvLocalRepoRoots = "NEXUS_MCP_LOCAL_REPO_ROOTS"
	// EnvCallLog names a file to which Serve appends one "<tool>\n" line per
	// tools/call, so tests in other processes can count the calls that
	// reached the child.
	EnvCallLog = "NEXUS_SAMPLE_CALL_LOG"
)

// Options configure a sample server.
type Options struct {
	// Remote is true when the server is reached over HTTP: tools that take a local_path refuse it.
	Remote bool
	// LocalRepoRoots are the roots under which kg_compare_with_local_git accepts local_path
	// (from NEXUS_MCP_LOCAL_REPO_ROOTS, os.PathListSeparator-separated, read by the caller via RootsFromEnv).
	LocalRepoRoots []string
	// CallLog, when non-nil, receives one line per tools/call that reached the server: "<tool>\n".
	// Tests use it to prove which calls reached the child.
	CallLog io.Writer
}

// RootsFromEnv parses NEXUS_MCP_LOCAL_REPO_ROOTS. Empty entries are dropped
// and the others cleaned; relative entries are dropped too, because a root
// that depends on the working directory is not an allow-list.
func RootsFromEnv() []string {
	var roots []string
	for _, r := range filepath.SplitList(os.Getenv(EnvLocalRepoRoots)) {
		r = strings.TrimSpace(r)
		if r == "" || !filepath.IsAbs(r) {
			continue
		}
		roots = append(roots, filepath.Clean(r))
	}
	return roots
}

// New returns the named sample server: "code-kg" or "doc-kg".
func New(name string, opts Options) (*server.MCPServer, error) {
	r, err := build(name, opts)
	if err != nil {
		return nil, err
	}
	return r.s, nil
}

// build is New with the registry, whose argument checks Serve's front door uses.
func build(name string, opts Options) (*registry, error) {
	switch name {
	case CodeKGName:
		return newCodeKG(opts), nil
	case DocKGName:
		return newDocKG(opts), nil
	}
	return nil, fmt.Errorf("samples: unknown sample server %q (valid names: %q, %q)", name, CodeKGName, DocKGName)
}

// Serve runs the named sample over stdio (httpAddr == "") or streamable HTTP on httpAddr (endpoint /mcp),
// until ctx is done. When the env var NEXUS_SAMPLE_CALL_LOG names a file, calls are appended to it (O_APPEND, one line each, "<tool>\n"), so tests in other processes can count them.
//
// Over stdio, stdout carries only the MCP wire; logs go to stderr. Over HTTP
// the server is Remote, so tools refuse local paths.
func Serve(ctx context.Context, name, httpAddr string, stdin io.Reader, stdout, stderr io.Writer) error {
	logger := log.New(stderr, "nexus-sample "+name+": ", log.LstdFlags)
	opts := Options{Remote: httpAddr != "", LocalRepoRoots: RootsFromEnv()}
	if path := os.Getenv(EnvCallLog); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("samples: open call log: %w", err)
		}
		defer f.Close()
		opts.CallLog = f
	}
	r, err := build(name, opts)
	if err != nil {
		return err
	}
	door := frontDoor{checks: r.checks, log: r.log}
	if httpAddr == "" {
		stdio := server.NewStdioServer(r.s)
		stdio.SetErrorLogger(logger)
		if err := door.serveStdio(ctx, stdin, stdout, stdio.Listen); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("samples: serve %s over stdio: %w", name, err)
		}
		return nil
	}
	return serveHTTP(ctx, door.handler(newHTTPHandler(r.s)), httpAddr, logger)
}

// serveHTTP serves s over streamable HTTP at /mcp until ctx is done.
func serveHTTP(ctx context.Context, h http.Handler, addr string, logger *log.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("samples: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger}
	logger.Printf("streamable HTTP on http://%s/mcp", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("samples: serve HTTP: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("samples: shut down HTTP: %w", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("samples: serve HTTP: %w", err)
	}
	return nil
}

// newHTTPHandler is the streamable HTTP handler Serve mounts at /mcp:
// stateful sessions, and an event store so notifications are not lost.
func newHTTPHandler(s *server.MCPServer) http.Handler {
	return server.NewStreamableHTTPServer(s,
		server.WithStateful(true),
		server.WithEventStore(server.NewInMemoryEventStore()),
	)
}
