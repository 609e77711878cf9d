package tests

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nexus-mcp/nexus/pins"
)

// TestPinsApprovalReachesARunningGateway: a pinned server that adds a tool while
// it runs (its list_changed) gets it held by the running gateway: not listed,
// refused with the command that shows it, never sent to the server. `nexus tools
// diff` shows it from another terminal, `nexus tools approve` accepts it, and
// the running gateway lists it at once and tells its client the list changed.
func TestPinsApprovalReachesARunningGateway(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, map[string]any{"pin": "strict"}, nil)
	s := h.serveStdio()
	if _, ok := s.tools()["fx__echo"]; !ok {
		t.Fatal("the first listing is pinned as it is: fx__echo must be listed")
	}
	s.call("fx__add_tool", map[string]any{})
	eventually(t, 10*time.Second, "the gateway holds late_tool", func() bool {
		return strings.Contains(s.stderr.String(), "tools held") && strings.Contains(s.stderr.String(), "late_tool")
	})
	if _, ok := s.tools()["fx__late_tool"]; ok {
		t.Fatal("late_tool is listed before it was approved")
	}
	if _, rpcErr := s.request("tools/call", map[string]any{"name": "fx__late_tool", "arguments": map[string]any{}}); rpcErr == nil || !strings.Contains(rpcErr.Message, "nexus tools diff fx") {
		t.Fatalf("calling the held tool: %+v", rpcErr)
	}
	if h.calls()["late_tool"] > 0 {
		t.Fatal("the held tool's call reached the server")
	}

	out, stderr, code := h.nexus("tools", "diff", "fx")
	if code != 0 || !strings.Contains(out, "fx.late_tool: a new tool") || !strings.Contains(out, `+   "name": "late_tool"`) || !strings.Contains(out, "nexus tools approve fx") {
		t.Fatalf("tools diff fx: exit %d\n%s%s", code, out, stderr)
	}
	if _, stderr, code := h.nexus("tools", "approve", "fx", "nope"); code != 2 || !strings.Contains(stderr, "late_tool") {
		t.Errorf("approving a tool that is not held: exit %d, want 2 naming the held ones\n%s", code, stderr)
	}
	out, stderr, code = h.nexus("tools", "approve", "fx", "late_tool")
	if code != 0 || !strings.Contains(out, "approved fx.late_tool (new)") {
		t.Fatalf("tools approve: exit %d\n%s%s", code, out, stderr)
	}
	s.waitNote("notifications/tools/list_changed", 10*time.Second, nil)
	if _, ok := s.tools()["fx__late_tool"]; !ok {
		t.Fatal("late_tool is not listed after its approval")
	}
	if r := s.call("fx__late_tool", map[string]any{}); r.text() != "late" {
		t.Errorf("late_tool answered %q", r.text())
	}
	if info, err := os.Stat(h.dir + "/pins.json"); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("pins.json: %v %v, want mode 600", info, err)
	}
}

// TestServeRefusesACorruptPinFile: serve names the pin file and the line that
// cannot be trusted, and serves nothing.
func TestServeRefusesACorruptPinFile(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	if err := os.WriteFile(h.dir+"/pins.json", []byte("{\n  \"version\": 1,\n  \"servers\": {\"fx\": {\"tools\": }}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := h.nexus("serve")
	if code == 0 || !strings.Contains(stderr, h.dir+"/pins.json:3:") || out != "" {
		t.Fatalf("serve on a corrupt pin file: exit %d, want a refusal naming %s/pins.json:3\n%s%s", code, h.dir, out, stderr)
	}
	out, stderr, code = h.nexus("doctor")
	if code != 1 || !strings.Contains(out, "FAIL  "+h.dir+"/pins.json: "+h.dir+"/pins.json:3:") || !strings.Contains(out, "nexus serve refuses to start until it is fixed") {
		t.Errorf("doctor on a corrupt pin file: exit %d\n%s%s", code, out, stderr)
	}
}

// TestRemoveForgetsPins: a removed server's pins go with it, so a server added
// later under its name is pinned afresh (after add showed what it runs).
func TestRemoveForgetsPins(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, nil, nil)
	if out, stderr, code := h.nexus("list-tools"); code != 0 || !strings.Contains(out, "fx.echo") {
		t.Fatalf("list-tools: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, _ := h.nexus("tools", "pins", "fx"); !strings.Contains(out, `"echo": "`) {
		t.Fatalf("the first listing did not pin fx's tools:\n%s", out)
	}
	if _, stderr, code := h.nexus("remove", "fx"); code != 0 {
		t.Fatalf("remove: %s", stderr)
	}
	if data, _ := os.ReadFile(h.dir + "/pins.json"); strings.Contains(string(data), `"fx"`) {
		t.Errorf("the removed server's pins stayed:\n%s", data)
	}
}

// TestListServersShowsHeld: a tool offered otherwise than approved is held by
// the one-shot gateways too: list-servers --live names it, list-tools leaves it
// out, and tools diff shows the approved description against the offered one.
func TestListServersShowsHeld(t *testing.T) {
	t.Parallel()
	h := fixtureHome(t, map[string]any{"pin": "strict"}, nil)
	if out, stderr, code := h.nexus("list-tools"); code != 0 || !strings.Contains(out, "fx.echo") {
		t.Fatalf("list-tools: exit %d\n%s%s", code, out, stderr)
	}
	// What was approved said something else: as if the server changed since.
	if _, err := pins.Update(h.dir+"/pins.json", func(f *pins.File) (bool, error) {
		p := f.Servers["fx"].Tools["echo"]
		var def map[string]any
		if err := json.Unmarshal(p.Definition, &def); err != nil {
			return false, err
		}
		def["description"] = "The description approved long ago."
		raw, _ := json.Marshal(def)
		d, err := pins.Canonical(raw)
		if err != nil {
			return false, err
		}
		p.SHA256, p.Definition = d.Hash(), d.JSON
		f.Servers["fx"].Tools["echo"] = p
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := h.nexus("list-servers", "--live")
	if code != 0 || !strings.Contains(out, "fx holds 1 tool(s) until approved: echo (nexus tools diff fx)") {
		t.Fatalf("list-servers --live: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, _ := h.nexus("list-tools"); strings.Contains(out, "fx.echo") {
		t.Errorf("list-tools lists the held tool:\n%s", out)
	}
	out, stderr, code = h.nexus("tools", "diff", "fx")
	if code != 0 || !strings.Contains(out, "fx.echo: its definition changed") || !strings.Contains(out, `-   "description": "The description approved long ago.",`) {
		t.Fatalf("tools diff: exit %d\n%s%s", code, out, stderr)
	}
	if all, _, code := h.nexus("tools", "diff"); code != 0 || !strings.Contains(all, "fx.echo: its definition changed") {
		t.Errorf("tools diff of every server: exit %d\n%s", code, all)
	}
}
