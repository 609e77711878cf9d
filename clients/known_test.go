package clients

import "testing"

// TestKnownPathsOfEveryClient: each client's file is where its docs put it, on
// each OS.
func TestKnownPathsOfEveryClient(t *testing.T) {
	want := map[string]map[string]string{
		"linux": {
			"windsurf":    "/home/me/.codeium/windsurf/mcp_config.json",
			"gemini":      "/home/me/.gemini/settings.json",
			"zed":         "/home/me/.config/zed/settings.json",
			"goose":       "/home/me/.config/goose/config.yaml",
			"cline":       "/home/me/.cline/data/settings/cline_mcp_settings.json",
			"roo-code":    "/home/me/.config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
			"continue":    "/home/me/.continue/config.yaml",
			"opencode":    "/home/me/.config/opencode/opencode.json",
			"lm-studio":   "/home/me/.lmstudio/mcp.json",
			"copilot-cli": "/home/me/.copilot/mcp-config.json",
			"kiro":        "/home/me/.kiro/settings/mcp.json",
		},
		"darwin": {
			"windsurf":    "/Users/me/.codeium/windsurf/mcp_config.json",
			"gemini":      "/Users/me/.gemini/settings.json",
			"zed":         "/Users/me/.config/zed/settings.json",
			"goose":       "/Users/me/.config/goose/config.yaml",
			"cline":       "/Users/me/.cline/data/settings/cline_mcp_settings.json",
			"roo-code":    "/Users/me/Library/Application Support/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
			"continue":    "/Users/me/.continue/config.yaml",
			"opencode":    "/Users/me/.config/opencode/opencode.json",
			"lm-studio":   "/Users/me/.lmstudio/mcp.json",
			"copilot-cli": "/Users/me/.copilot/mcp-config.json",
			"kiro":        "/Users/me/.kiro/settings/mcp.json",
		},
		"windows": {
			"windsurf":    `C:\Users\me\.codeium\windsurf\mcp_config.json`,
			"gemini":      `C:\Users\me\.gemini\settings.json`,
			"zed":         `C:\Users\me\AppData\Roaming\Zed\settings.json`,
			"goose":       `C:\Users\me\AppData\Roaming\Block\goose\config\config.yaml`,
			"cline":       `C:\Users\me\.cline\data\settings\cline_mcp_settings.json`,
			"roo-code":    `C:\Users\me\AppData\Roaming\Code\User\globalStorage\rooveterinaryinc.roo-cline\settings\mcp_settings.json`,
			"continue":    `C:\Users\me\.continue\config.yaml`,
			"opencode":    `C:\Users\me\.config\opencode\opencode.json`,
			"lm-studio":   `C:\Users\me\.lmstudio\mcp.json`,
			"copilot-cli": `C:\Users\me\.copilot\mcp-config.json`,
			"kiro":        `C:\Users\me\.kiro\settings\mcp.json`,
		},
	}
	for _, layout := range osLayouts {
		getenv := func(k string) string { return layout.env[k] }
		for name, path := range want[layout.goos] {
			c, err := Find(name, layout.goos, layout.home, getenv)
			if err != nil || c.Path != path {
				t.Errorf("%s %s: %q %v, want %q", layout.goos, name, c.Path, err, path)
			}
		}
	}
	// XDG_CONFIG_HOME moves the Linux files that follow it; COPILOT_HOME Copilot's.
	env := map[string]string{"XDG_CONFIG_HOME": "/xdg", "COPILOT_HOME": "/cop"}
	for name, path := range map[string]string{"zed": "/xdg/zed/settings.json", "goose": "/xdg/goose/config.yaml", "opencode": "/xdg/opencode/opencode.json", "copilot-cli": "/cop/mcp-config.json"} {
		if c, _ := Find(name, "linux", "/home/me", func(k string) string { return env[k] }); c.Path != path {
			t.Errorf("%s: %q, want %q", name, c.Path, path)
		}
	}
	// Cline's older place is used when only it exists.
	c, _ := Find("cline", "linux", "/home/me", nil)
	older := "/home/me/.config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"
	if got := c.Located(func(p string) bool { return p == older }).Path; got != older {
		t.Errorf("cline located at %q", got)
	}
	if got := c.Located(func(string) bool { return false }).Path; got != c.Path {
		t.Errorf("cline with no file at %q", got)
	}
}
