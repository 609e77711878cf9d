package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/oauth"
	"github.com/nexus-mcp/nexus/secrets"
)

// oauthHTTPTimeout bounds one metadata, registration or token request.
const oauthHTTPTimeout = 30 * time.Second

func authCommand() *cli.Command {
	return &cli.Command{
		Name:  "auth",
		Usage: "log in to remote servers that use OAuth",
		Description: "A remote server that answers 401 with OAuth metadata needs a login once:\n" +
			"  nexus auth login NAME     opens the browser (or prints the URL) and waits for the login\n" +
			"  nexus auth status         who is logged in where, and until when\n" +
			"  nexus auth logout NAME    forgets the server's tokens\n" +
			"Tokens go to the OS keychain (or the insecure file store), keyed by the authorization server.",
		Subcommands: []*cli.Command{
			{
				Name:      "login",
				Usage:     "log in to a remote server through its authorization server",
				ArgsUsage: "SERVER",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "no-browser", Usage: "print the URL to open instead of opening a browser"},
					&cli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "how long to wait for the login in the browser"},
				},
				Action: authLoginAction,
			},
			{
				Name:   "status",
				Usage:  "show the OAuth logins of the configured remote servers",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: authStatusAction,
			},
			{
				Name:      "logout",
				Usage:     "forget a server's OAuth tokens",
				ArgsUsage: "SERVER",
				Action:    func(c *cli.Context) error { return authLogout(c) },
			},
		},
	}
}

// authStatusAction is the action of `nexus auth status`.
func authStatusAction(c *cli.Context) error { return authStatus(c) }

// authLoginAction is the action of `nexus auth login`.
func authLoginAction(c *cli.Context) error { return authLogin(c) }

// remoteServer is the configured remote server the command names.
func remoteServer(c *cli.Context, cfg *config.Config, verb string) (*config.Server, error) {
	name := c.Args().First()
	if name == "" {
		return nil, usageError(fmt.Sprintf("auth %s needs one SERVER: nexus auth %s NAME", verb, verb))
	}
	s := cfg.Servers[name]
	if s == nil {
		return nil, usageError(fmt.Sprintf("no server named %q is configured (nexus list-servers shows them)", name))
	}
	if s.Transport == config.TransportStdio {
		return nil, usageError(fmt.Sprintf("%s is a stdio server; OAuth is for remote servers (a url)", name))
	}
	return s, nil
}

func authLogin(c *cli.Context) error {
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	s, err := remoteServer(c, cfg, "login")
	if err != nil {
		return err
	}
	if hasHeader(s.Headers, nil, "Authorization") {
		return usageError(fmt.Sprintf("servers.%s has an Authorization header (in %s), which is sent instead of OAuth: remove it to log in", s.Name, s.Source))
	}
	sess, err := e.oauthSession(c.Context, cfg, s)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	noBrowser := c.Bool("no-browser")
	progress := &loginProgress{w: e.stderr, live: isTerminal(os.Stderr), limit: c.Duration("timeout")}
	ua := &oauth.Loopback{Open: func(ctx context.Context, authURL string) error {
		if !noBrowser && openBrowser(ctx, authURL) == nil {
			fmt.Fprintf(e.stderr, "opened the browser to log in to %s; if it did not open, visit:\n  %s\n", s.Name, authURL)
		} else {
			fmt.Fprintf(e.stderr, "to log in to %s, open this URL in a browser on this machine:\n  %s\n", s.Name, authURL)
		}
		progress.start()
		return nil
	}}
	defer ua.Close()
	g, err := sess.Login(ctx, ua)
	progress.stop()
	if err != nil {
		return fmt.Errorf("logging in to %s: %w", s.Name, err)
	}
	fmt.Fprintf(e.stdout, "logged in to %s at %s%s; tokens stored in %s\n", s.Name, g.Issuer, scopeText(g.Scope), e.storeName())
	e.confirmRunning(c.Context) // a running gateway retries the server now
	return nil
}

// loginProgress is the line that says a login is awaited: on a terminal it
// counts the seconds in place, elsewhere it is printed once.
type loginProgress struct {
	w     io.Writer
	live  bool
	limit time.Duration
	quit  chan struct{}
	done  chan struct{}
}

func (p *loginProgress) start() {
	line := func(elapsed time.Duration) string {
		return fmt.Sprintf("waiting for the login (%s of %s; Ctrl-C stops)...", elapsed.Round(time.Second), p.limit)
	}
	if !p.live {
		fmt.Fprintln(p.w, line(0))
		return
	}
	p.quit, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		begin := time.Now()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			fmt.Fprint(p.w, "\r\033[K"+line(time.Since(begin)))
			select {
			case <-p.quit:
				fmt.Fprint(p.w, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
}

// stop ends a live line; it does nothing when none was started.
func (p *loginProgress) stop() {
	if p.quit != nil {
		close(p.quit)
		<-p.done
	}
}

func scopeText(scope string) string {
	if scope == "" {
		return ""
	}
	return " (scope " + scope + ")"
}

// authRow is one line of `nexus auth status`.
type authRow struct {
	Server  string    `json:"server"`
	State   string    `json:"state"` // "logged in", "expired", "not logged in"
	Issuer  string    `json:"issuer,omitempty"`
	Scope   string    `json:"scope,omitempty"`
	Expiry  time.Time `json:"expiry,omitzero"`
	Refresh bool      `json:"refreshable"` // a refresh token is stored
	Error   string    `json:"error,omitempty"`
}

func authStatus(c *cli.Context) error {
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	var rows []authRow
	var vault *oauth.Vault
	var storeErr error // no secret store: every login is unknown, which is reported, not fatal
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		s := cfg.Servers[name]
		if s.Transport == config.TransportStdio {
			continue
		}
		if vault == nil && storeErr == nil {
			vault, storeErr = e.oauthVault(c.Context, cfg)
		}
		if storeErr != nil {
			rows = append(rows, authRow{Server: name, State: "unknown", Error: "the secret store cannot be opened: " + firstLine(storeErr.Error())})
			continue
		}
		rows = append(rows, loginRow(c.Context, vault, name))
	}
	if c.Bool("json") {
		if rows == nil {
			rows = []authRow{}
		}
		return printJSON(e.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, "no remote servers configured (nexus add NAME --url URL adds one)")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSTATE\tISSUER\tSCOPE\tEXPIRES")
	for _, r := range rows {
		exp := ""
		if !r.Expiry.IsZero() {
			exp = r.Expiry.Local().Format(time.DateTime)
			if r.Refresh {
				exp += " (refreshable)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Server, r.State, r.Issuer, r.Scope, exp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if storeErr != nil {
		fmt.Fprintf(e.stdout, "logins are unknown: %v\n", storeErr)
		return nil
	}
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(e.stdout, "%s: %s\n", r.Server, r.Error)
		}
	}
	return nil
}

// loginRow reads what is stored for server, without the network.
func loginRow(ctx context.Context, v *oauth.Vault, server string) authRow {
	r := authRow{Server: server, State: "not logged in"}
	iss, err := v.CurrentIssuer(ctx, server)
	if errors.Is(err, secrets.ErrNotFound) {
		return r
	}
	if err != nil {
		r.State, r.Error = "unknown", err.Error()
		return r
	}
	r.Issuer = iss
	g, err := v.Grant(ctx, server, iss)
	if err != nil {
		if !errors.Is(err, secrets.ErrNotFound) {
			r.State, r.Error = "unknown", err.Error()
		}
		return r
	}
	r.State, r.Scope, r.Expiry, r.Refresh = "logged in", g.Scope, g.Expiry, g.RefreshToken != ""
	if !g.Expiry.IsZero() && time.Now().After(g.Expiry) {
		r.State = "expired"
		if r.Refresh {
			r.State = "expired (refreshed at the next use)"
		}
	}
	if g.Wanted != "" {
		r.Error = "needs login: asks for scope " + g.Wanted + ": run nexus auth login " + server
	}
	return r
}

func authLogout(c *cli.Context) error {
	e, cfg, err := loadEnv(c, slog.LevelWarn)
	if err != nil {
		return err
	}
	s, err := remoteServer(c, cfg, "logout")
	if err != nil {
		return err
	}
	v, err := e.oauthVault(c.Context, cfg)
	if err != nil {
		return err
	}
	iss, err := v.CurrentIssuer(c.Context, s.Name)
	if errors.Is(err, secrets.ErrNotFound) {
		fmt.Fprintf(e.stdout, "%s is not logged in\n", s.Name)
		return nil
	}
	if err != nil {
		return err
	}
	if err := v.DeleteGrant(c.Context, s.Name, iss); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "logged out of %s (the tokens from %s are removed from %s)\n", s.Name, iss, e.storeName())
	return nil
}

// openBrowser opens url with the platform's opener, when there is one.
func openBrowser(ctx context.Context, url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.CommandContext(ctx, "open", url)
	case "windows":
		cmd = exec.CommandContext(ctx, "rundll32", "url.dll,FileProtocolHandler", url)
	default:
		if _, err := exec.LookPath("xdg-open"); err != nil {
			return err
		}
		cmd = exec.CommandContext(ctx, "xdg-open", url)
	}
	return cmd.Start()
}

// oauthVault is where this home keeps OAuth grants: the secrets store. The vault
// registers each credential with the redactor itself, so it is given the store
// without the wrapper that registers every value read: an issuer's URL is not a
// secret, and must not vanish from every message.
func (e *env) oauthVault(ctx context.Context, cfg *config.Config) (*oauth.Vault, error) {
	st, err := e.oauthStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &oauth.Vault{Store: st, Register: e.redactor.Add}, nil
}

// oauthStore is the secrets store without its redacting wrapper (see oauthVault).
func (e *env) oauthStore(ctx context.Context, cfg *config.Config) (secrets.Store, error) {
	if _, err := e.secrets(ctx, cfg); err != nil {
		return nil, err
	}
	return e.rawStore, nil
}

// lazyStore opens the secrets store at its first use: a gateway whose remote
// servers never ask for OAuth never touches the keychain for it.
type lazyStore struct {
	open func() (secrets.Store, error)
}

func (l lazyStore) Get(ctx context.Context, name string) (string, error) {
	st, err := l.open()
	if err != nil {
		return "", err
	}
	return st.Get(ctx, name)
}

func (l lazyStore) Set(ctx context.Context, name, value string) error {
	st, err := l.open()
	if err != nil {
		return err
	}
	return st.Set(ctx, name, value)
}

func (l lazyStore) Delete(ctx context.Context, name string) error {
	st, err := l.open()
	if err != nil {
		return err
	}
	return st.Delete(ctx, name)
}

// oauthSession is the OAuth session of remote server s: its client settings from
// config (the secret resolved from the store), the store opened when first needed.
func (e *env) oauthSession(ctx context.Context, cfg *config.Config, s *config.Server) (*oauth.Session, error) {
	st := lazyStore{open: func() (secrets.Store, error) { return e.oauthStore(ctx, cfg) }}
	sess := &oauth.Session{Server: s.Name, URL: s.URL, Required: s.Auth == config.AuthOAuth,
		Vault: &oauth.Vault{Store: st, Register: e.redactor.Add},
		HTTP:  oauth.HTTPClient(s.URL, s.OAuth.AllowedPrefixes(), oauthHTTPTimeout)}
	if o := s.OAuth; o != nil {
		sess.Client = oauth.ClientConfig{ClientID: o.ClientID, AuthMethod: o.TokenEndpointAuthMethod,
			MetadataURL: o.ClientMetadataURL, Scopes: o.Scopes}
		if o.ClientSecret != "" {
			secret, err := e.resolver(ctx, cfg)(o.ClientSecret)
			if err != nil {
				return nil, fmt.Errorf("servers.%s.oauth.clientSecret: %w", s.Name, err)
			}
			e.redactor.Add(s.Name+"/oauth/clientSecret", secret)
			sess.Client.ClientSecret = secret
		}
	}
	return sess, nil
}

// oauthHTTP makes the HTTP clients of remote children: each connection's
// requests carry the server's OAuth token, found and refreshed by a session of
// its own. A server given an Authorization header in config keeps that header
// alone. A session that cannot be made (a clientSecret that cannot be read) fails
// the connection's requests with the reason.
func (e *env) oauthHTTP(ctx context.Context, cfg *config.Config) func(*config.Server) *http.Client {
	return func(s *config.Server) *http.Client {
		for k := range s.Headers {
			if strings.EqualFold(k, "Authorization") {
				return nil
			}
		}
		sess, err := e.oauthSession(ctx, cfg, s)
		if err != nil {
			return &http.Client{Transport: failing{err}}
		}
		return &http.Client{Transport: &oauth.Transport{Session: sess}}
	}
}

// failing is a RoundTripper whose every request fails with err.
type failing struct{ err error }

func (f failing) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, f.err
}

// offerLogin tells the person who added a remote server that it wants an OAuth
// login, when it answers 401 with metadata that leads to an authorization server.
func (e *env) offerLogin(ctx context.Context, name, url string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := oauth.Probe(ctx, oauth.HTTPClient(url, nil, 5*time.Second), url)
	if err != nil || d == nil {
		return
	}
	fmt.Fprintf(e.stdout, "%s uses OAuth (authorization server %s): log in with\n  nexus auth login %s\n", name, d.Server.Issuer, name)
}
