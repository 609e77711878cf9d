// Command authclient is the MCP client the conformance suite's auth scenarios
// score: it connects to the server URL it is given, authorizing with Nexus's
// oauth package exactly as the gateway does, lists the tools and calls each.
//
// The suite runs it as `authclient URL`, with MCP_CONFORMANCE_SCENARIO naming the
// scenario and MCP_CONFORMANCE_CONTEXT holding pre-registered credentials when a
// scenario has them. The scenario's authorization server approves at once, so the
// login is driven with oauth.Follow instead of a browser. A LoginError (no token,
// a refused refresh, a step-up) leads to a login and a fresh attempt, at most
// maxLogins times.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/nexus-mcp/nexus/oauth"
	"github.com/nexus-mcp/nexus/secrets"
)

// maxLogins bounds the logins of one run: a server that keeps asking for more
// scope must not make the client loop (the scope-retry-limit scenario).
const maxLogins = 3

// metadataURL is the Client ID Metadata Document URL the suite expects a client
// to use where the server supports such documents.
const metadataURL = "https://conformance-test.local/client-metadata.json"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: authclient SERVER_URL")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	if err := run(ctx, os.Args[len(os.Args)-1]); err != nil {
		fmt.Fprintln(os.Stderr, "authclient:", err)
		os.Exit(1)
	}
}

// scenarioContext is MCP_CONFORMANCE_CONTEXT.
type scenarioContext struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

func run(ctx context.Context, serverURL string) error {
	var sc scenarioContext
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "authclient-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sess := &oauth.Session{
		Server: "conformance",
		URL:    serverURL,
		Vault:  &oauth.Vault{Store: &secrets.File{Path: filepath.Join(dir, "secrets.json")}},
		Client: oauth.ClientConfig{ClientID: sc.ClientID, ClientSecret: sc.ClientSecret, MetadataURL: metadataURL},
		HTTP:   oauth.HTTPClient(serverURL, nil, 10*time.Second), // the gateway's: guarded as it dials
	}
	ua := &oauth.Follow{Redirect: "http://127.0.0.1:3334/callback"}
	for logins := 0; ; logins++ {
		err := session(ctx, sess, serverURL)
		var le *oauth.LoginError
		if !errors.As(err, &le) {
			return err
		}
		if logins == maxLogins {
			return fmt.Errorf("gave up after %d logins: %w", logins, err)
		}
		fmt.Fprintln(os.Stderr, "authclient: logging in:", le.Hint())
		if _, err := sess.Login(ctx, ua); err != nil {
			return err
		}
	}
}

// session connects, lists the tools and calls each one.
func session(ctx context.Context, sess *oauth.Session, serverURL string) error {
	hc := &http.Client{Transport: &oauth.Transport{Session: sess}}
	opts := []client.ClientOption{}
	if v := os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION"); v != "" {
		opts = append(opts, client.WithProtocolVersion(v))
	}
	tr, err := transport.NewStreamableHTTP(serverURL, transport.WithHTTPBasicClient(hc))
	if err != nil {
		return err
	}
	c := client.NewClient(tr, opts...)
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return err
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION"),
		ClientInfo:      mcp.Implementation{Name: "nexus-authclient", Version: "1"},
	}}); err != nil {
		return err
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return err
	}
	for _, t := range tools.Tools {
		if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: t.Name, Arguments: map[string]any{}}}); err != nil {
			return err
		}
	}
	return nil
}
