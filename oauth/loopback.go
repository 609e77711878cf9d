package oauth

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"time"
)

// callbackPath is where a loopback redirect arrives.
const callbackPath = "/callback"

// Loopback is the UserAgent of a person at this machine: it receives the
// authorization server's redirect on 127.0.0.1 (RFC 8252 §7.3) and takes the
// person to the authorization URL with Open (a browser, or a printed URL).
// Close it when done.
type Loopback struct {
	// Open shows authURL to the person; it returns at once, without waiting for
	// the login.
	Open func(ctx context.Context, authURL string) error

	ln  net.Listener
	srv *http.Server
	got chan *url.URL
}

// RedirectURI listens on prefer's port when prefer is a loopback redirect URI and
// the port is free, else on a free port.
func (l *Loopback) RedirectURI(ctx context.Context, prefer string) (string, error) {
	if l.ln != nil {
		return l.uri(), nil
	}
	var lc net.ListenConfig
	if u, err := url.Parse(prefer); err == nil && u.Scheme == "http" && u.Hostname() == "127.0.0.1" && u.Port() != "" && u.Path == callbackPath {
		if ln, err := lc.Listen(ctx, "tcp", u.Host); err == nil {
			l.ln = ln
		}
	}
	if l.ln == nil {
		ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("listening on 127.0.0.1 for the login's redirect: %w", err)
		}
		l.ln = ln
	}
	l.got = make(chan *url.URL, 1)
	l.srv = &http.Server{Handler: http.HandlerFunc(l.callback), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.srv.Serve(l.ln) }()
	return l.uri(), nil
}

func (l *Loopback) uri() string { return "http://" + l.ln.Addr().String() + callbackPath }

// Visit opens authURL and waits for the redirect, or for ctx to end.
func (l *Loopback) Visit(ctx context.Context, authURL string) (*url.URL, error) {
	if l.ln == nil {
		return nil, errors.New("the loopback redirect is not listening: call RedirectURI first")
	}
	if err := l.Open(ctx, authURL); err != nil {
		return nil, err
	}
	select {
	case u := <-l.got:
		return u, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the login in the browser: %w", context.Cause(ctx))
	}
}

// Close stops the listener.
func (l *Loopback) Close() error {
	if l.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return l.srv.Shutdown(ctx)
}

// callback receives the redirect: the first one is kept, and the page says what
// happened (never the code).
func (l *Loopback) callback(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != callbackPath {
		http.NotFound(w, r)
		return
	}
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	select {
	case l.got <- &u:
	default:
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	msg := "Nexus received the login. You can close this tab."
	if e := r.URL.Query().Get("error"); e != "" {
		msg = "The authorization server said: " + html.EscapeString(e) + ". See the terminal."
	}
	fmt.Fprintf(w, "<!doctype html><title>Nexus login</title><p>%s</p>\n", msg)
}
