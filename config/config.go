// Package config reads, merges, validates and edits Nexus's JSON configuration.
//
// A configuration is a stack of layers: the files given with --config (team-shared
// layers, in order) and then the personal file $NEXUS_HOME/config.json, which is read
// last and so wins. The struct types here are the schema: every key a user may write
// is a field, and any other key is an error that names the file, the key and what to
// write instead, because a silently ignored key is a setting the user believes in and
// does not have.
package config

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/nexus-mcp/nexus/memory"
	"github.com/nexus-mcp/nexus/policy"
)

// Transports a server entry may name.
const (
	TransportStdio          = "stdio"
	TransportSSE            = "sse"
	TransportStreamableHTTP = "streamable-http"
)

// DefaultProtocolVersion is the legacy version a child is offered in its
// initialize handshake when the probe found it legacy and it named no version,
// and over the HTTP+SSE transport: most legacy servers in the wild speak it.
const DefaultProtocolVersion = "2025-11-25"

// ModernProtocolVersion is the first protocol version of the modern era: no
// initialize handshake, every request declares its version in _meta.
const ModernProtocolVersion = "2026-07-28"

// ProtocolVersions are the values servers.X.protocolVersion accepts, newest
// first. Setting one pins the child to it; leaving it unset lets Nexus probe for
// the child's era.
var ProtocolVersions = []string{ModernProtocolVersion, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// DefaultTimeout bounds one call to a child when the server entry sets none.
const DefaultTimeout = 60 * time.Second

// DefaultMaxMessageBytes bounds one incoming JSON-RPC message.
const DefaultMaxMessageBytes = 4 << 20

// DefaultMaxChildMessageBytes bounds one message from a child: generous, since a
// child may legitimately return a large file.
const DefaultMaxChildMessageBytes = 64 << 20

// Tool name styles on the wire.
const (
	ToolNamesWire   = "wire"   // <prefix>__<tool>, accepted by every known client
	ToolNamesDotted = "dotted" // <server>.<tool>, the canonical form
)

var (
	serverNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	wirePrefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
)

// ValidServerName reports whether name may name a server: it becomes the first half
// of every canonical tool name and a wire prefix, so it is kept short and plain.
func ValidServerName(name string) bool { return serverNameRE.MatchString(name) }

// Config is the effective, merged configuration.
type Config struct {
	// Servers by name.
	Servers map[string]*Server `json:"servers,omitempty"`
	// ToolNames is the wire style: "wire" (default) or "dotted".
	ToolNames string `json:"toolNames,omitempty"`
	// MaxMessageBytes bounds one incoming JSON-RPC message (default 4 MiB).
	MaxMessageBytes int64 `json:"maxMessageBytes,omitempty"`
	// MaxChildMessageBytes bounds one message from a child (default 64 MiB).
	MaxChildMessageBytes int64 `json:"maxChildMessageBytes,omitempty"`
	// Policy holds the per-agent tool rules.
	Policy policy.Config `json:"policy,omitzero"`
	// Agents holds per-agent settings: HTTP bearer token hashes, toolsets.
	Agents map[string]Agent `json:"agents,omitempty"`
	// Tools is the toolset of agents that set none (config/toolsets.go).
	Tools *Toolset `json:"tools,omitempty"`
	// Names configures wire names (config/toolsets.go).
	Names Names `json:"names,omitzero"`
	// TTL maps tool patterns ("srv.tool", "srv.*", "*") to result lifetimes.
	TTL map[string]json.RawMessage `json:"ttl,omitempty"`
	// StaleIfError maps tool patterns to how old an answer may be and still be
	// served when the child fails (not running, timed out, transport error).
	StaleIfError map[string]string `json:"staleIfError,omitempty"`
	// Cache maps tool patterns to "never" or "always".
	Cache map[string]string `json:"cache,omitempty"`
	// Invalidate maps a mutating tool to the tool patterns its success makes stale.
	Invalidate map[string][]string `json:"invalidate,omitempty"`
	// Memory configures the result cache.
	Memory Memory `json:"memory,omitzero"`
	// Secrets configures where secret values are kept.
	Secrets Secrets `json:"secrets,omitzero"`
	// Audit configures the audit trail (config/observe.go).
	Audit Audit `json:"audit,omitzero"`
	// Tracing configures OpenTelemetry traces (config/observe.go).
	Tracing Tracing `json:"tracing,omitzero"`
	// Status says who may see the status page and the metrics (config/exposure.go).
	Status Status `json:"status,omitzero"`
	// HTTP configures the streamable HTTP front (config/exposure.go).
	HTTP HTTP `json:"http,omitzero"`
	// Reload configures how a serving gateway follows its files (config/exposure.go).
	Reload Reload `json:"reload,omitzero"`
	// Limits bound what one client, agent or child can make the gateway hold
	// (config/limits.go).
	Limits Limits `json:"limits,omitzero"`
	// Children are the defaults of every stdio server's life (lifecycle.go).
	Children Children `json:"children,omitzero"`
	// childrenIdleSet says "children" set idleTimeout, "0" included.
	childrenIdleSet bool
	// ProjectLayers reads .nexus/config.json from the working directory upward (off
	// by default: a repository you clone should not silently start processes).
	ProjectLayers bool `json:"projectLayers,omitempty"`
	// Locked maps the settings a layer locked to that layer; later layers cannot
	// change them.
	Locked map[string]string `json:"locked,omitempty"`

	// Layers are the files read, first to last.
	Layers []string `json:"-"`

	memRules memory.Settings // parsed from TTL, Cache, Invalidate and Memory.Semantic
}

// Agent is what the gateway knows of one agent beyond its policy.
type Agent struct {
	// TokenSHA256 is the hex SHA-256 of the agent's HTTP bearer token: a config file
	// that may be shared never holds the token itself.
	TokenSHA256 string `json:"tokenSha256,omitempty"`
	// Tools is the agent's toolset: every tool, or search (config/toolsets.go).
	Tools *Toolset `json:"tools,omitempty"`
}

// Secrets configures the secret store.
type Secrets struct {
	// InsecureFileStore allows a plain file (0600 in a 0700 directory under
	// NEXUS_HOME) when no OS keychain is usable. Off by default: a keychain keeps
	// values encrypted at rest, a file does not.
	InsecureFileStore bool `json:"insecureFileStore,omitempty"`
}

// Memory configures the result cache.
type Memory struct {
	Enabled *bool `json:"enabled,omitempty"`
	// Backend is where remembered results live: "sqlite" (the default,
	// memory.db in NEXUS_HOME) or "postgres", shared by gateway replicas.
	Backend string `json:"backend,omitempty"`
	// DSN is the PostgreSQL connection string when Backend is "postgres"; it may
	// be (and in shared layers must be) a ${env:NAME} or ${keyring:NAME} reference.
	DSN            string `json:"dsn,omitempty"`
	MaxEntries     int    `json:"maxEntries,omitempty"`
	MaxBytes       int64  `json:"maxBytes,omitempty"`
	MaxResultBytes int    `json:"maxResultBytes,omitempty"`
	// Semantic is false (no similarity hits) or an object mapping tool patterns to
	// their free-text fields ([] or false turns similarity off for them).
	Semantic json.RawMessage `json:"semantic,omitempty"`
	// Embedder compares free text: "lexical" (default, offline), "openai" or "ollama".
	Embedder *Embedder `json:"embedder,omitempty"`
	// Thresholds override the embedder's calibrated ones.
	Thresholds *Thresholds `json:"thresholds,omitempty"`
	// Verifier is an OpenAI-compatible chat model asked about gray-zone matches.
	Verifier *Endpoint `json:"verifier,omitempty"`
	// Rewording keeps a similarity hit from the caller that stored the entry
	// (scope "session", the default, "agent" or "off") for a window (1h).
	Rewording *Rewording `json:"rewording,omitempty"`
	// Verify samples hits and asks the child too: {"rate": 0.01, "perMinute": 10}.
	Verify *Verify `json:"verify,omitempty"`
	// MaxFalseHitRate stops a tool's similarity hits while its measured
	// false-hit rate is above it.
	MaxFalseHitRate float64 `json:"maxFalseHitRate,omitempty"`
}

// Verify is memory.verify.
type Verify struct {
	Rate      float64 `json:"rate"`
	PerMinute int     `json:"perMinute"`
}

// Rewording is memory.rewording.
type Rewording struct {
	Scope  string   `json:"scope,omitempty"`
	Window Duration `json:"window,omitzero"`
}

// Endpoint is an HTTP model service. APIKey may (and in shared layers must) be a
// ${keyring:NAME} or ${env:NAME} reference.
type Endpoint struct {
	BaseURL string   `json:"baseURL"`
	Model   string   `json:"model"`
	APIKey  string   `json:"apiKey,omitempty"`
	Timeout Duration `json:"timeout,omitzero"`
}

// Embedder selects the embedding model.
type Embedder struct {
	Provider string `json:"provider"`
	Endpoint
	Dims int `json:"dims,omitempty"`
}

// Thresholds are cosine similarities: at or above Serve a match is served; between
// Verify and Serve the verifier decides.
type Thresholds struct {
	Serve  float64 `json:"serve"`
	Verify float64 `json:"verify"`
}

// Memory backends.
const (
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// On reports whether memory is enabled (the default).
func (m Memory) On() bool { return m.Enabled == nil || *m.Enabled }

// Server is one child MCP server.
type Server struct {
	Transport string            `json:"transport,omitempty"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Timeout   Duration          `json:"timeout,omitzero"`
	// Prefix is the wire prefix; nil means the server's name, "" exposes bare names.
	Prefix   *string `json:"prefix,omitempty"`
	Disabled bool    `json:"disabled,omitempty"`
	// ProtocolVersion pins the child to one protocol version: a legacy one is
	// negotiated with initialize and never probed for the modern era, the
	// modern one (ModernProtocolVersion) is spoken without initialize, with no
	// fallback. Unset, Nexus probes: server/discover, then initialize.
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Annotations override the child's own tool hints, keyed by the child's tool name:
	// a child's annotations are claims, and the operator has the last word.
	Annotations map[string]Annotations `json:"annotations,omitempty"`
	// Tools renames tools and rewrites their titles and descriptions, keyed by
	// the child's tool name (config/toolsets.go).
	Tools map[string]ToolOverride `json:"tools,omitempty"`
	// CacheScope is "server" (default: answers depend on the child's credentials only)
	// or "agent" (the child answers per caller).
	CacheScope string `json:"cacheScope,omitempty"`
	// Catalog names the catalog entry the server was installed from (nexus add
	// writes it): its suggested result lifetimes apply unless the config or
	// `nexus cache ttl` gives others.
	Catalog string `json:"catalog,omitempty"`
	// Auth is "oauth" for a remote server that is authorized with OAuth from its
	// first request; "" authorizes with OAuth only once the server answers 401.
	Auth string `json:"auth,omitempty"`
	// OAuth is the client Nexus is at the server's authorization server, when
	// it is not registered dynamically.
	OAuth *OAuthClient `json:"oauth,omitempty"`
	// Sessions is how many upstream sessions the server gets: "shared" (default:
	// one connection, or process, for every client) or "client" (one per client
	// session, opened on its first use and closed with it), for servers that keep
	// state per connection (a browser, a shell, a REPL).
	Sessions string `json:"sessions,omitempty"`
	// MaxSessions bounds the upstream sessions of a "client" server
	// (DefaultMaxUpstreamSessions when 0): past it a new client's request is refused.
	MaxSessions int `json:"maxSessions,omitempty"`
	// MaxSessionsPerAgent is one agent's share of MaxSessions (see
	// SessionShare for the default), so that one agent cannot hold every
	// upstream session.
	MaxSessionsPerAgent int `json:"maxSessionsPerAgent,omitempty"`
	// Pin is how the server's tools are held to the definitions approved for
	// them (package pins): "strict", "warn" or "off"; unset means "warn"
	// (PinMode). nexus add and nexus import write "strict".
	Pin string `json:"pin,omitempty"`
	// Pins are approved definitions a config layer ships, tool name -> the
	// SHA-256 of the tool's canonical definition (nexus tools pins SERVER
	// prints them): a team holds the same approved set.
	Pins map[string]string `json:"pins,omitempty"`
	// Start, IdleTimeout and MaxLifetime decide a stdio server's life
	// (lifecycle.go); unset, the "children" defaults apply. IdleTimeout "0"
	// keeps an idle server running; MaxLifetime "0" never recycles it.
	Start       string    `json:"start,omitempty"`
	IdleTimeout *Duration `json:"idleTimeout,omitempty"`
	MaxLifetime *Duration `json:"maxLifetime,omitempty"`

	// Name is the server's key in "servers".
	Name string `json:"-"`
	// Source is the file that defined the entry last.
	Source string `json:"-"`
}

// AuthOAuth is Server.Auth's one value.
const AuthOAuth = "oauth"

// OAuthClient is a server's "oauth" entry: how Nexus is known to the server's
// authorization server. Every field is optional; the secret is a reference into
// the secrets store, never a literal.
type OAuthClient struct {
	ClientID     string `json:"clientId,omitempty"`     // a pre-registered client
	ClientSecret string `json:"clientSecret,omitempty"` // its secret: ${keyring:NAME} or ${env:NAME}
	// TokenEndpointAuthMethod is "none", "client_secret_basic" or
	// "client_secret_post"; unset, the server's metadata decides.
	TokenEndpointAuthMethod string `json:"tokenEndpointAuthMethod,omitempty"`
	// ClientMetadataURL is an https URL serving this client's Client ID Metadata
	// Document: the client_id at servers that accept one.
	ClientMetadataURL string   `json:"clientMetadataUrl,omitempty"`
	Scopes            []string `json:"scopes,omitempty"` // asked for instead of what the server suggests
	// AllowAddresses are loopback, private or link-local addresses (an IP or a
	// CIDR prefix) the server's OAuth requests may connect to although the
	// server is not there itself: an intranet authorization server.
	AllowAddresses []string `json:"allowAddresses,omitempty"`
}

// AllowedPrefixes is AllowAddresses parsed; entries Load refused are skipped.
func (o *OAuthClient) AllowedPrefixes() []netip.Prefix {
	if o == nil {
		return nil
	}
	var out []netip.Prefix
	for _, a := range o.AllowAddresses {
		if p, err := parseAddressOrPrefix(a); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// parseAddressOrPrefix reads "10.0.0.0/8" or "10.1.2.3" (a one-address prefix).
func parseAddressOrPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Annotations overrides tool hints; a nil field keeps the child's value.
type Annotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// WirePrefix is the prefix of the server's tools on the wire.
func (s *Server) WirePrefix() string {
	if s.Prefix != nil {
		return *s.Prefix
	}
	return s.Name
}

// CallTimeout is the bound on one call to this server.
func (s *Server) CallTimeout() time.Duration {
	if s.Timeout.D > 0 {
		return s.Timeout.D
	}
	return DefaultTimeout
}

// The values of Server.Sessions.
const (
	SessionsShared = "shared"
	SessionsClient = "client"
)

// The values of Server.Pin.
const (
	PinStrict = "strict"
	PinWarn   = "warn"
	PinOff    = "off"
)

// PinMode is the server's pin mode. Unset, a server is held in warn mode: an
// entry written by hand is often a server its author is changing, whose tools
// strict mode would hold at each edit; the commands that install servers
// someone else wrote (add, import) write "strict".
func (s *Server) PinMode() string {
	if s.Pin == "" {
		return PinWarn
	}
	return s.Pin
}

// DefaultMaxUpstreamSessions bounds a "client" server's upstream sessions when its entry
// sets no maxSessions: each may be a process of its own.
const DefaultMaxUpstreamSessions = 16

// PerClient reports whether the server gets one upstream session per client session.
func (s *Server) PerClient() bool { return s.Sessions == SessionsClient }

// SessionLimit is the bound on a "client" server's upstream sessions.
func (s *Server) SessionLimit() int {
	if s.MaxSessions > 0 {
		return s.MaxSessions
	}
	return DefaultMaxUpstreamSessions
}

// SessionShare is how many of a "client" server's upstream sessions one of
// agents (the agents that have a token) may hold: MaxSessionsPerAgent, else
// SessionLimit divided among them with a share left for one more, rounded up (all of them
// when no agent has a token), at least one, never more than SessionLimit.
func (s *Server) SessionShare(agents int) int {
	limit := s.SessionLimit()
	if s.MaxSessionsPerAgent > 0 {
		return min(s.MaxSessionsPerAgent, limit)
	}
	return max((limit+agents)/(agents+1), 1) // rounded up: one agent of 3 sessions may hold 2
}

// Protocol is the legacy protocol version offered to this child in an
// initialize handshake: the pinned one, or DefaultProtocolVersion.
func (s *Server) Protocol() string {
	if s.ProtocolVersion != "" {
		return s.ProtocolVersion
	}
	return DefaultProtocolVersion
}

// Home is the directory holding the personal config, the memory database and other
// state: $NEXUS_HOME, or ~/.nexus.
func Home() (string, error) {
	if h := os.Getenv("NEXUS_HOME"); h != "" {
		return h, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the home directory (set NEXUS_HOME to choose where Nexus keeps its files): %w", err)
	}
	return filepath.Join(home, ".nexus"), nil
}

// PersonalFile is the path of the personal config file in home.
func PersonalFile(home string) string { return filepath.Join(home, "config.json") }

// EnabledServers lists the servers that are not disabled, sorted by name.
func (c *Config) EnabledServers() []*Server {
	var out []*Server
	for _, name := range c.ServerNames() {
		if s := c.Servers[name]; !s.Disabled {
			out = append(out, s)
		}
	}
	return out
}

// ServerNames lists every configured server name, sorted.
func (c *Config) ServerNames() []string {
	names := make([]string, 0, len(c.Servers))
	for n := range c.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// MessageLimit is the effective bound on one incoming message.
func (c *Config) MessageLimit() int64 {
	if c.MaxMessageBytes > 0 {
		return c.MaxMessageBytes
	}
	return DefaultMaxMessageBytes
}

// ChildMessageLimit is the bound on one message from a child.
func (c *Config) ChildMessageLimit() int64 {
	if c.MaxChildMessageBytes > 0 {
		return c.MaxChildMessageBytes
	}
	return DefaultMaxChildMessageBytes
}

// Duration is a time.Duration written in JSON as "30s", "5m", "1d" or a number of
// milliseconds.
type Duration struct{ D time.Duration }

// ParseDuration reads Go durations plus a day unit ("1d", "2d12h").
func ParseDuration(s string) (time.Duration, error) {
	var days time.Duration
	for i := 0; i < len(s); i++ {
		if s[i] == 'd' {
			var n int
			if _, err := fmt.Sscanf(s[:i], "%d", &n); err != nil || fmt.Sprint(n) != s[:i] {
				return 0, fmt.Errorf("%q is not a duration (write e.g. 30s, 5m, 12h or 1d)", s)
			}
			days = time.Duration(n) * 24 * time.Hour
			s = s[i+1:]
			if s == "" {
				return days, nil
			}
			break
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (write e.g. 30s, 5m, 12h or 1d)", s)
	}
	return days + d, nil
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err == nil {
		if ms < 0 {
			return fmt.Errorf("a duration cannot be negative")
		}
		d.D = time.Duration(ms * float64(time.Millisecond))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"30s\" or a number of milliseconds")
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("a duration cannot be negative")
	}
	d.D = v
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.D.String()) }

// IsZero lets omitzero drop an unset duration.
func (d Duration) IsZero() bool { return d.D == 0 }
