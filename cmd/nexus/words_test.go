package main

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 entries"}, {1, "1 entry"}, {2, "2 entries"}} {
		if got := count(tc.n, "entry", "entries"); got != tc.want {
			t.Errorf("count(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
