//go:build !unix

package sqlite

import "errors"

const walHeaderWords = 12

// shmView is not available here: the hot layer asks SQLite on every call.
type shmView struct{}

func openShm(string) (*shmView, error) {
	return nil, errors.New("wal-index mapping is not supported on this platform")
}

func (*shmView) header() (h [walHeaderWords]uint32) { return h }

func (*shmView) close() {}
