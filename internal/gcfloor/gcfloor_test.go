package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// The tests change the process's GC percent: none runs in parallel.

func noEnv(string) string { return "" }

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

// currentPercent is the runtime's GC percent now.
func currentPercent() int {
	p := debug.SetGCPercent(Base)
	debug.SetGCPercent(p)
	return p
}

// Under a floor, a small heap's garbage is collected several times less
// often than at GOGC=100; stopped, the percent is GOGC's default again.
func TestTheFloorHoldsCollectionsBack(t *testing.T) {
	runtime.GC()
	without := collections(64 << 20)
	stop := Start(32<<20, noEnv)
	with := collections(64 << 20)
	p := Percent()
	stop()
	t.Logf("collections for 64 MiB of garbage: %d at GOGC=100, %d under a 32 MiB floor (percent %d)", without, with, p)
	if p <= Base || currentPercent() != Base {
		t.Fatalf("percent %d under the floor, %d after stop", p, currentPercent())
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
	if p := Percent(); p <= Base {
		t.Fatalf("a small heap under the floor: percent %d", p)
	}
	held := make([][]byte, 0, 24)
	for range 24 {
		held = append(held, make([]byte, 1<<20))
	}
	// The percent is set after a collection, by the cleanup it runs:
	// collect until it is (each collection runs the last one's cleanup).
	for i := 0; Percent() != Base; i++ {
		if i == 100 {
			t.Fatalf("24 MiB live under a 32 MiB floor: percent still %d after 100 collections", Percent())
		}
		runtime.GC()
	}
	if currentPercent() != Base {
		t.Fatalf("the runtime's percent %d", currentPercent())
	}
	runtime.KeepAlive(held)
	held = nil
	for i := 0; Percent() == Base; i++ {
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
	if Percent() != Base || currentPercent() != Base {
		t.Fatalf("with GOGC set: percent %d, runtime %d", Percent(), currentPercent())
	}
	stop()

	runtime.GC()
	stop = Start(32<<20, noEnv)
	p := Percent()
	again := Start(64<<20, noEnv)
	if Percent() != p {
		t.Fatalf("a second Start moved the percent %d → %d", p, Percent())
	}
	again()
	if Percent() != p || currentPercent() != p {
		t.Fatalf("the second Start's stop stopped the first: %d, runtime %d", Percent(), currentPercent())
	}
	stop()
	if currentPercent() != Base {
		t.Fatalf("after stop the runtime's percent %d", currentPercent())
	}
}
