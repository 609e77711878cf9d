package aggregation

import (
	"flag"
	"runtime"
	"strconv"
)

// testParallel is how many tests marked t.Parallel run at once when -parallel
// is not given. The default, GOMAXPROCS, suits tests that keep the CPU busy;
// these mostly wait on re-exec'd children, sessions and timers (the package
// used a quarter of a core, its tests one at a time), so on 2 cores twice as
// many run at once. The tests that flood the gateway, count its goroutines or
// its memory, or set the environment are not parallel: they run first, alone.
const testParallel = 4

func setParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && runtime.GOMAXPROCS(0) < testParallel {
		flag.Set("test.parallel", strconv.Itoa(testParallel))
	}
}
