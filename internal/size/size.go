// Package size writes byte counts for people, in one unit system everywhere: the
// CLI and the status page both say "256 MiB", so that the two can be compared at a
// glance (JSON output keeps the raw numbers).
package size

import "fmt"

// IEC writes n bytes as "512 B", "1.5 KiB", "256 MiB".
func IEC(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), -1
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	name := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d %s", int64(f), name)
	}
	return fmt.Sprintf("%.1f %s", f, name)
}
