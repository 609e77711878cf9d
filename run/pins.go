package run

import (
	"github.com/nexus-mcp/nexus/config"
	"github.com/nexus-mcp/nexus/pins"
)

// openPins opens the pin file of e.Home: a file that cannot be trusted stops the
// gateway from starting (the error names the file and line). It warns of each
// server a config layer other than the personal one brings that this machine has
// never listed: a team or project file can add a process to run, and the person
// running Nexus should hear of it before its first listing is pinned as it is.
func openPins(cfg *config.Config, e Env) (*pins.Guard, error) {
	guard, err := pins.Open(pins.Path(e.Home), e.Logger)
	if err != nil {
		return nil, err
	}
	personal := config.PersonalFile(e.Home)
	for _, s := range cfg.EnabledServers() {
		if s.Source == personal || s.Source == "" || s.PinMode() == config.PinOff || guard.Seen(s.Name) {
			continue
		}
		e.Logger.Warn("a config layer brings a server this machine has not run before: check what it runs; its first tool listing is pinned as it is",
			"server", s.Name, "layer", s.Source, "runs", s.Launch(), "stop it", `"disabled": true under servers.`+s.Name+" in your config")
	}
	return guard, nil
}
