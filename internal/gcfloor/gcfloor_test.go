package gcfloor

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// The tests change the process's GC percent: none runs in parallel,
// and none runs under a GOGC or GOMEMLIMIT of the environment's.

func noEnv(string) string { return "" }

func TestMain(m *testing.M) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		fmt.Println("gcfloor: GOGC or GOMEMLIMIT set, the tests would measure them: not run")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var sink []byte

// collections is how many collections allocating n bytes in 8 KiB
// pieces takes.
func collections(n int) uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.NumGC
	for range n / (8 << 10) {
		sink = make([]byte, 8<<10)
	}
	runtime.ReadMemStats(&m)
	return m.NumGC - before
}

// Under a floor, a small heap's garbage is collected several times less
// often than at GOGC=100; stopped, the percent is GOGC's default again.
func TestTheFloorHoldsCollectionsBack(t *testing.T) {
	runtime.GC()
	without := collections(64 << 20)
	stop := Start(32<<20, noEnv)
	with := collections(64 << 20)
	p := current()
	stop()
	t.Logf("collections for 64 MiB of garbage: %d at GOGC=100, %d under a 32 MiB floor (percent %d)", without, with, p)
	if p <= base || gogc() != base {
		t.Fatalf("percent %d under the floor, %d after stop", p, gogc())
	}
	if with*3 > without {
		t.Fatalf("%d collections under the floor, %d without: want a third or fewer", with, without)
	}
}

// After each collection the percent follows the live heap: once the
// heap holds half the floor, the collector paces as GOGC=100.
func TestThePercentFollowsTheLiveHeap(t *testing.T) {
	runtime.GC()
	stop := Start(32<<20, noEnv)
	defer stop()
	if p := current(); p <= base {
		t.Fatalf("a small heap under the floor: percent %d", p)
	}
	held := make([][]byte, 0, 24)
	for range 24 {
		held = append(held, make([]byte, 1<<20))
	}
	// The percent is set after a collection, by the cleanup it runs:
	// collect until it is (each collection runs the last one's cleanup).
	for i := 0; current() != base; i++ {
		if i == 100 {
			t.Fatalf("24 MiB live under a 32 MiB floor: percent still %d after 100 collections", current())
		}
		runtime.GC()
	}
	if gogc() != base {
		t.Fatalf("the runtime's percent %d", gogc())
	}
	runtime.KeepAlive(held)
	held = nil
	for i := 0; current() == base; i++ {
		if i == 100 {
			t.Fatal("the heap let go: percent still the base after 100 collections")
		}
		runtime.GC()
	}
}

// GOGC set is the operator's choice: Start changes nothing; so is a
// second Start while one runs.
func TestStartLeavesGOGCAndARunningFloorAlone(t *testing.T) {
	stop := Start(32<<20, func(k string) string {
		if k == "GOGC" {
			return "200"
		}
		return ""
	})
	if current() != base || gogc() != base {
		t.Fatalf("with GOGC set: percent %d, runtime %d", current(), gogc())
	}
	stop()

	runtime.GC()
	stop = Start(32<<20, noEnv)
	p := current()
	again := Start(64<<20, noEnv)
	if current() != p {
		t.Fatalf("a second Start moved the percent %d → %d", p, current())
	}
	again()
	if current() != p || gogc() != p {
		t.Fatalf("the second Start's stop stopped the first: %d, runtime %d", current(), gogc())
	}
	stop()
	if gogc() != base {
		t.Fatalf("after stop the runtime's percent %d", gogc())
	}
}

// A memory limit that holds the goal below the floor does not drive the
// percent up (the goal it reads does not move): it stays within the
// percent whose smallest goal is the floor; and a percent set by the
// program, not 100, is left alone.
func TestALimitOrAPercentOfTheProgramsOwn(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(10 << 20))
	runtime.GC()
	stop := Start(8<<20, noEnv)
	for range 20 {
		collections(16 << 20)
		runtime.GC()
	}
	p := current()
	stop()
	if p <= base || p > 200 {
		t.Fatalf("under a 10 MiB limit, a floor of 8 MiB set percent %d, want 101-200", p)
	}

	defer debug.SetGCPercent(debug.SetGCPercent(300))
	stop = Start(8<<20, noEnv)
	defer stop()
	if current() != base || gogc() != 300 {
		t.Fatalf("at GOGC=300: the tuner's %d, the runtime's %d", current(), gogc())
	}
}
