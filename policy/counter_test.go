package policy

import (
	"sync"
	"testing"
)

func TestCounter(t *testing.T) {
	p := mustCompile(t, Config{})
	var c Counter
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Record(p.Decide("a", regen))
				c.Record(p.Decide("a", latest)) // allowed: not counted
				if i == 0 {
					_ = c.Snapshot()
				}
			}
		})
	}
	wg.Wait()
	snap := c.Snapshot()
	if n := snap["a"]["code-kg.kg_regenerate"]; n != 8000 || len(snap["a"]) != 1 {
		t.Errorf("Snapshot = %v", snap)
	}
	snap["a"]["code-kg.kg_regenerate"] = 0
	if c.Snapshot()["a"]["code-kg.kg_regenerate"] != 8000 {
		t.Error("Snapshot shares memory with the counter")
	}
}
