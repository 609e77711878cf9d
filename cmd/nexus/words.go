package main

import "strconv"

// count is "1 entry", "2 entries": a number with its noun in agreement.
func count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}
