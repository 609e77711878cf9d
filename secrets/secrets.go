// Package secrets keeps the values that child servers need (tokens, API keys, bearer
// headers) out of config files and out of everything Nexus prints.
//
// Config holds only references, ${keyring:NAME} and ${env:NAME}, which [Expand]
// resolves when a child is started or a request is sent; the resolved value is never
// written back. Values live in a [Store]: the OS keychain ([Keyring]: macOS Keychain,
// Windows Credential Manager, the Secret Service on Linux), or, only when the user opted
// in, a [File] readable by the user alone. [Open] picks between them.
//
// Every message and string that leaves the gateway (tool results, error texts,
// notifications, served lists, log lines, child stderr) passes one [Redactor], which
// replaces each known secret value, however a JSON message spells it, with
// [redacted:NAME]. Wrapping the store with [Redacting] registers every value as it is
// read, so a secret cannot be used without also being redacted; [RegisterChildValues]
// registers what a child gets from the environment or from literal secret-looking
// keys.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"
)

// Store keeps secret values by name. Names look like "<server>/<KEY>"
// (e.g. "github/GITHUB_TOKEN"): see [ValidateName].
type Store interface {
	// Get returns the value stored under name, or an error wrapping ErrNotFound.
	Get(ctx context.Context, name string) (string, error)
	// Set stores value under name, replacing any previous value. Values over
	// MaxValueBytes are refused with an error wrapping ErrValueTooLarge.
	Set(ctx context.Context, name, value string) error
	// Delete removes name; deleting an absent name is not an error, so purging a
	// removed server's secrets is idempotent.
	Delete(ctx context.Context, name string) error
}

var (
	// ErrNotFound reports a secret that is not in the store (or, from Expand, an
	// environment variable that is not set).
	ErrNotFound = errors.New("secret not found")
	// ErrUnavailable reports a keychain that cannot be used: no Secret Service, a
	// wedged bus, a locked keychain waiting for the user, a timeout. Errors wrapping it
	// say what to do.
	ErrUnavailable = errors.New("OS keychain unavailable")
	// ErrValueTooLarge reports a value over MaxValueBytes.
	ErrValueTooLarge = errors.New("secret value too large")
	// ErrInvalidName reports a name outside [A-Za-z0-9_./-]{1,128}.
	ErrInvalidName = errors.New("invalid secret name")
)

// Service is the keychain service every Nexus secret is filed under.
const Service = "nexus"

// MaxValueBytes is the largest value any store accepts. It is Windows Credential
// Manager's limit, the smallest of the platforms we support; enforcing it everywhere
// keeps a config that works on Linux working on Windows.
const MaxValueBytes = 2560

// MaxNameBytes is the longest secret name.
const MaxNameBytes = 128

// DefaultTimeout bounds each keychain call when no timeout is given.
const DefaultTimeout = 3 * time.Second

// ValidateName reports whether name can be used as a secret name: 1 to 128 bytes of
// [A-Za-z0-9_./-]. The set is narrow so a name is safe as a keychain account on every
// platform, in a file, in a reference and in a [redacted:NAME] label.
func ValidateName(name string) error {
	if name == "" || len(name) > MaxNameBytes {
		return fmt.Errorf("%w %q: use 1 to %d characters from A-Z a-z 0-9 _ . / -", ErrInvalidName, name, MaxNameBytes)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("%w %q: character %q is not allowed; use only A-Z a-z 0-9 _ . / -", ErrInvalidName, name, name[i])
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c == '/' || c == '-'
}

// checkSet validates a Set call the same way in every store, so that behaviour does
// not depend on which store Open picked.
func checkSet(name, value string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if len(value) > MaxValueBytes {
		return fmt.Errorf("%w: %s is %d bytes; the limit is %d bytes (Windows Credential Manager's); store a shorter value, such as a path to a file the server reads",
			ErrValueTooLarge, name, len(value), MaxValueBytes)
	}
	return nil
}

// Options configure Open. The zero value asks for the keychain only.
type Options struct {
	// FilePath is the file used when the keychain is unavailable and InsecureFile is
	// set. Use a file in a directory of its own, such as $NEXUS_HOME/secrets/secrets.json.
	FilePath string
	// InsecureFile allows the fallback to FilePath (--insecure-file-store).
	InsecureFile bool
	// Timeout bounds each keychain call; zero means DefaultTimeout.
	Timeout time.Duration
	// Logger receives the warning about the file fallback; nil discards.
	Logger *slog.Logger
	// QuietFileStore logs the file fallback at info level instead of warn: for a
	// one-shot command, whose output already says where a secret it stores goes, a
	// WARN line on every run only buries what the command printed. A long-running
	// server leaves it false: its log is the record.
	QuietFileStore bool
}

// probeAccount is outside the name alphabet so it can never collide with a real secret.
const probeAccount = "nexus:probe"

// Open picks the store. It probes the keychain with a read (no item is written: a
// "not found" answer proves the keychain works) and returns a *Keyring when it answers
// within the timeout. Otherwise, only if opts.InsecureFile is set, it returns the
// *File at opts.FilePath and logs a warning, on every start, so the weaker storage is
// never forgotten. Otherwise it returns an error wrapping ErrUnavailable that says what
// to do.
func Open(ctx context.Context, opts Options) (Store, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	k := &Keyring{Timeout: opts.Timeout}
	_, err := k.getAs(ctx, probeAccount, "probing")
	if err == nil || errors.Is(err, ErrNotFound) {
		if opts.InsecureFile && opts.FilePath != "" {
			if _, statErr := os.Stat(opts.FilePath); statErr == nil {
				logger.Warn("the OS keychain is available, so the insecure secrets file is not used; move its values with `nexus secrets set NAME` and delete it",
					"path", opts.FilePath)
			}
		}
		return k, nil
	}
	if !errors.Is(err, ErrUnavailable) {
		return nil, err // the caller's context ended
	}
	if !opts.InsecureFile {
		return nil, fmt.Errorf("%w\nTo fix: %s; or pass --insecure-file-store (or set \"secrets\": {\"insecureFileStore\": true} in the config) to keep secrets in a file readable only by you; or inject values through the environment with ${env:NAME} in config",
			noBus(err), unlockHint(err))
	}
	if opts.FilePath == "" {
		return nil, fmt.Errorf("%w, and the insecure file store has no path: set one in config or NEXUS_HOME", err)
	}
	f := &File{Path: opts.FilePath}
	if err := f.check(); err != nil {
		return nil, err
	}
	level := slog.LevelWarn
	if opts.QuietFileStore {
		level = slog.LevelInfo
	}
	logger.Log(ctx, level, "the OS keychain is unavailable; secrets are kept in a plain file readable only by you (--insecure-file-store)",
		"path", opts.FilePath, "reason", err.Error())
	return f, nil
}

// unlockHint says how to make the keychain usable on this platform, given why it
// is not.
func unlockHint(err error) string {
	switch runtime.GOOS {
	case "darwin":
		return "unlock the login keychain (Keychain Access) and allow nexus to use it"
	case "windows":
		return "make sure Windows Credential Manager is running and usable by this user"
	}
	if isNoBus(err) {
		// The D-Bus library then tries dbus-launch, and the error names it: installing
		// dbus-x11 only starts a bus with no Secret Service on it.
		return "there is no D-Bus session bus, so no Secret Service to keep secrets (installing dbus-x11 alone does not help: a Secret Service must run on the bus); " +
			"in a desktop session, start gnome-keyring-daemon (or KeePassXC's Secret Service) and unlock its login collection; on a server or in a container, use the file store"
	}
	return "start a Secret Service on the D-Bus session bus (gnome-keyring-daemon or KeePassXC) and unlock its login collection"
}

// isNoBus reports whether err says there is no D-Bus session bus at all: no
// DBUS_SESSION_BUS_ADDRESS, and no dbus-launch to start one.
func isNoBus(err error) bool {
	return err != nil && strings.Contains(err.Error(), "dbus-launch")
}

// noBus rewrites the D-Bus library's "exec: dbus-launch: not found" as what it
// means, so that the message does not send anyone after dbus-launch.
func noBus(err error) error {
	if !isNoBus(err) {
		return err
	}
	return fmt.Errorf("%w: no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set)", ErrUnavailable)
}
