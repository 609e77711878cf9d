package policy_test

import (
	"fmt"

	"github.com/nexus-mcp/nexus/policy"
)

func Example() {
	cfg, _ := policy.Allow(policy.Config{}, "coder", "code-kg.kg_regenerate")
	p, err := policy.Compile(cfg)
	if err != nil {
		panic(err)
	}
	regen := policy.Tool{Name: "code-kg.kg_regenerate"}
	fmt.Println(p.Decide("coder", regen).Message())
	fmt.Println(p.Decide("", regen).Message())
	// Output:
	// agent "coder" may call "code-kg.kg_regenerate": allowed by policy.agents.coder (allow "code-kg.kg_regenerate")
	// agent "anonymous" may not call "code-kg.kg_regenerate": denied by built-in default (no allow rule matches; default allows @readonly only). To grant it: nexus policy allow --agent anonymous code-kg.kg_regenerate
}
