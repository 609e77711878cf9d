package config

import (
	"strings"
	"testing"
	"time"
)

func TestLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         Lifecycle
	}{
		{"defaults", `{"servers": {"s": {"command": "x"}}}`, Lifecycle{Lazy: true, IdleTimeout: DefaultIdleTimeout}},
		{"server settings", `{"servers": {"s": {"command": "x", "start": "eager", "idleTimeout": "0", "maxLifetime": "1h"}}}`,
			Lifecycle{IdleTimeout: 0, MaxLifetime: time.Hour}},
		{"children defaults", `{"children": {"start": "eager", "idleTimeout": "0", "maxLifetime": "2h"}, "servers": {"s": {"command": "x"}}}`,
			Lifecycle{MaxLifetime: 2 * time.Hour}},
		{"a server overrides the defaults", `{"children": {"idleTimeout": "0"}, "servers": {"s": {"command": "x", "idleTimeout": "5m"}}}`,
			Lifecycle{Lazy: true, IdleTimeout: 5 * time.Minute}},
		{"a remote server stays connected", `{"servers": {"s": {"url": "https://example.com/mcp"}}}`, Lifecycle{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("c.json", []byte(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Lifecycle(cfg.Servers["s"]); got != tc.want {
				t.Errorf("Lifecycle = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestLifecycleMistakes(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`{"servers": {"s": {"command": "x", "start": "sometimes"}}}`, `"start" is "lazy"`},
		{`{"servers": {"s": {"command": "x", "idleTimeout": "10ms"}}}`, `"idleTimeout" is a duration of at least 1s`},
		{`{"servers": {"s": {"url": "https://example.com/mcp", "idleTimeout": "5m"}}}`, `a streamable-http server has none`},
		{`{"children": {"start": "never"}}`, `children.start`},
		{`{"children": {"maxLifetime": "1ms"}}`, `children.maxLifetime`},
	} {
		_, err := Parse("c.json", []byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one holding %q", tc.config, err, tc.want)
		}
	}
}
