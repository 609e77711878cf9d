package secrets_test

import (
	"context"
	"fmt"

	"github.com/nexus-mcp/nexus/secrets"
)

func Example() {
	ctx := context.Background()
	store := secrets.NewFake() // in the gateway: secrets.Open(ctx, opts)
	store.Set(ctx, "github/GITHUB_TOKEN", "ghp_example_token")

	// Every value resolved through the wrapped store is also redacted.
	redactor := secrets.NewRedactor()
	env, used, err := secrets.Expand(ctx, "${keyring:github/GITHUB_TOKEN}", secrets.Redacting(store, redactor), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(used)
	fmt.Println(redactor.String("child error: bad credentials " + env))
	// Output:
	// [github/GITHUB_TOKEN]
	// child error: bad credentials [redacted:github/GITHUB_TOKEN]
}

// A gateway registers what a child is given when it starts the child, and passes
// every JSON message the child sends through Redactor.JSON.
func ExampleRegisterChildValues() {
	redactor := secrets.NewRedactor()
	environ := map[string]string{"GH_TOKEN": "ghp_from_the_environment"}
	lookup := func(k string) (string, bool) { v, ok := environ[k]; return v, ok }
	secrets.RegisterChildValues(redactor, "github",
		map[string]string{"GITHUB_TOKEN": "${env:GH_TOKEN}"},
		map[string]string{"Authorization": "Bearer literal-token-123"}, lookup)

	// The child echoes both, one of them with JSON escapes.
	msg := `{"content":[{"type":"text","text":"\u0067hp_from_the_environment, literal-token\u002d123"}]}`
	fmt.Println(string(redactor.JSON([]byte(msg))))
	// Output:
	// {"content":[{"type":"text","text":"[redacted:github/env/GITHUB_TOKEN], [redacted:github/header/Authorization]"}]}
}
