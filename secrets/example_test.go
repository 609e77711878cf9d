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
