package memory

import "fmt"

// Validate reports thresholds out of range: 0 <= Verify <= Serve <= 1, with
// Serve above 0. Config calls it at load and Open again, so a value that loads
// is one memory accepts.
func (t Thresholds) Validate() error {
	if t.Serve <= 0 || t.Serve > 1 || t.Verify < 0 || t.Verify > t.Serve {
		return fmt.Errorf("memory: thresholds serve %v verify %v: want 0 <= verify <= serve <= 1", t.Serve, t.Verify)
	}
	return nil
}
