//go:build !unix

package aggregation

import "io"

// pollable is in as it is: pipes are read through the poller on unix only.
func pollable(in io.Reader) io.Reader { return in }
