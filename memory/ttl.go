package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// TTL is how long a cached result may be served. Never means no expiry;
// the zero TTL means results are not kept across calls (nobody said how
// long they stay true).
type TTL struct {
	D     time.Duration
	Never bool
}

// String returns the TTL as config accepts it: "never" or a Go duration.
func (t TTL) String() string {
	switch {
	case t.Never:
		return "never"
	case t.D <= 0:
		return "none"
	}
	return shortDuration(t.D)
}

// shortDuration is d as people write it: "5m", "1h", "1h30m", "1d2h" rather
// than Go's "5m0s", "1h0m0s", "26h0m0s". ParseTTL reads it back.
func shortDuration(d time.Duration) string {
	days := d / (24 * time.Hour)
	rest := d - days*24*time.Hour
	s := ""
	if days > 0 {
		s = strconv.FormatInt(int64(days), 10) + "d"
		if rest == 0 {
			return s
		}
	}
	r := rest.String()
	if strings.HasSuffix(r, "m0s") {
		r = strings.TrimSuffix(r, "0s")
	}
	if strings.HasSuffix(r, "h0m") {
		r = strings.TrimSuffix(r, "0m")
	}
	return s + r
}

// Keeps reports whether results under t are kept across calls at all.
func (t TTL) Keeps() bool { return t.Never || t.D > 0 }

// MarshalJSON encodes the TTL as a string ParseTTL accepts (except the zero
// TTL, "none", which no config holds).
func (t TTL) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.String())
}

// UnmarshalJSON decodes a TTL with ParseTTL, so config structs can hold
// TTL values directly.
func (t *TTL) UnmarshalJSON(b []byte) error {
	v, err := ParseTTL(b)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

const ttlHint = `write a duration such as "30s", "5m", "12h" or "1d", a number of milliseconds such as 30000, or "never"`

// ParseTTL parses a ttl value from config: a duration string (Go durations
// plus a leading day unit: "30s", "5m", "12h", "1d", "1d12h", "1.5h"), a JSON
// number of milliseconds, or "never" for no expiry. Zero and negative TTLs
// are errors: to stop caching a tool, set its cache mode to "never".
func ParseTTL(raw json.RawMessage) (TTL, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return TTL{}, fmt.Errorf("memory: empty ttl: %s", ttlHint)
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return TTL{}, fmt.Errorf("memory: ttl %s: %w", raw, err)
		}
		return parseTTLString(s)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		ms, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(ms, 0) || math.IsNaN(ms) {
			return TTL{}, fmt.Errorf("memory: ttl %s is not a valid number of milliseconds: %s", raw, ttlHint)
		}
		if ms <= 0 {
			return TTL{}, fmt.Errorf("memory: ttl %s must be positive (to stop caching a tool, set its cache mode to \"never\"): %s", raw, ttlHint)
		}
		if ms > float64(math.MaxInt64/int64(time.Millisecond)) {
			return TTL{}, fmt.Errorf("memory: ttl %s milliseconds is too long: use \"never\" for no expiry", raw)
		}
		d := time.Duration(ms * float64(time.Millisecond))
		return TTL{D: d}, nil
	default:
		return TTL{}, fmt.Errorf("memory: ttl %s is neither a string nor a number: %s", raw, ttlHint)
	}
}

func parseTTLString(s string) (TTL, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "never") {
		return TTL{Never: true}, nil
	}
	if t == "" {
		return TTL{}, fmt.Errorf("memory: empty ttl: %s", ttlHint)
	}
	var d time.Duration
	rest := t
	if i := strings.IndexByte(t, 'd'); i >= 0 {
		days, err := strconv.ParseFloat(t[:i], 64)
		if err != nil || days < 0 || math.IsInf(days, 0) || strings.ContainsAny(t[:i], "eE+-") {
			return TTL{}, fmt.Errorf("memory: ttl %q: the day count before 'd' must be a plain number: %s", s, ttlHint)
		}
		if days > float64(math.MaxInt64/int64(24*time.Hour)) {
			return TTL{}, fmt.Errorf("memory: ttl %q is too long: use \"never\" for no expiry", s)
		}
		d = time.Duration(days * float64(24*time.Hour))
		rest = t[i+1:]
	}
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil {
			return TTL{}, fmt.Errorf("memory: ttl %q: %s", s, ttlHint)
		}
		if r < 0 || (rest != t && strings.HasPrefix(rest, "-")) {
			return TTL{}, fmt.Errorf("memory: ttl %q must be positive (to stop caching a tool, set its cache mode to \"never\")", s)
		}
		if d > math.MaxInt64-r {
			return TTL{}, fmt.Errorf("memory: ttl %q is too long: use \"never\" for no expiry", s)
		}
		d += r
	}
	if d <= 0 {
		return TTL{}, fmt.Errorf("memory: ttl %q must be positive (to stop caching a tool, set its cache mode to \"never\")", s)
	}
	return TTL{D: d}, nil
}
