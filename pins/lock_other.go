//go:build !unix

package pins

// lock does nothing where flock does not exist: writes are still atomic (a
// rename), and two writers at the same instant may lose one's change, which the
// next listing or approval writes again.
func lock(string) (func(), error) { return func() {}, nil }
