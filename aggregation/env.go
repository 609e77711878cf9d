package aggregation

import (
	"fmt"
	"os"
	"strings"
)

// ExpandEnv resolves ${env:NAME} references in a config value, so that CI and
// containers can inject values without writing them into a file. An unset variable
// is an error rather than an empty string: a child started with a blank token fails
// in confusing ways.
func ExpandEnv(value string) (string, error) {
	var b strings.Builder
	rest := value
	for {
		i := strings.Index(rest, "${env:")
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unclosed reference in %q: write ${env:NAME}", value)
		}
		name := rest[i+len("${env:") : i+j]
		v, ok := os.LookupEnv(name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set (referenced as ${env:%s})", name, name)
		}
		b.WriteString(rest[:i])
		b.WriteString(v)
		rest = rest[i+j+1:]
	}
}
