// Package gcfloor keeps Go's collector from running while the heap is
// small: below a floor, the heap may grow to the floor before a
// collection, and above it the collector paces as GOGC=100 does.
//
// Lazarus keeps its data in SQLite or PostgreSQL, not in Go's heap: a
// server's live heap is a megabyte or two, and at GOGC=100 the runtime
// collects each time the heap reaches 4 MB (its smallest goal). A
// dashboard page of 50 dead letters makes about a megabyte of garbage,
// so the collector ran every two or three pages (bench D2: 312
// collections in 13 s), and the pages' tail latency with it. The
// runtime has GOGC (a ratio) and GOMEMLIMIT (a ceiling) but no floor,
// and no well-kept library here gives one, so this does what such tuners
// do: after each collection it sets the GC percent that puts the next
// goal at the floor, or leaves GOGC=100's when that is higher.
// GOMEMLIMIT still bounds the heap: the runtime collects at the limit
// whatever the percent.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Base is the GC percent kept above the floor (GOGC's default).
const Base = 100

// Floor is the floor the lazarus binary keeps (main.go; and the bench's
// servers, which stand for it). Measured on 2026-12-04 (alternated,
// three runs each): D2's p99 with 8 clients 31-34 ms at GOGC=100,
// 17-22 ms at 8 MB, 16-27 ms at 16 MB; S3's peak RSS 46.7 MB at
// GOGC=100, 52 MB at 8 MB, 60 MB at 16 MB.
const Floor = 8 << 20

// MaxPercent bounds the percent set, whatever the heap's figures read
// (a floor of 8 MB asks for about 200 %).
const MaxPercent = 5000

var (
	mu      sync.Mutex
	running *tuner
)

type tuner struct {
	floor   uint64
	percent int // the percent set now
	stopped bool
	sample  []metrics.Sample
}

// Start keeps the collector's goal at floor bytes at least, until stop;
// a process runs one: a Start while one runs, a floor of 0, or GOGC set
// by getenv (the operator's choice stands) starts nothing.
func Start(floor uint64, getenv func(string) string) (stop func()) {
	mu.Lock()
	defer mu.Unlock()
	if running != nil || floor == 0 || getenv("GOGC") != "" {
		return func() {}
	}
	t := &tuner{floor: floor, percent: Base, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}}
	running = t
	t.tune()
	t.arm()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if !t.stopped {
			t.stopped = true
			running = nil
			debug.SetGCPercent(Base)
		}
	}
}

// Percent is the GC percent the running tuner set last (Base when none
// runs).
func Percent() int {
	mu.Lock()
	defer mu.Unlock()
	if running == nil {
		return Base
	}
	return running.percent
}

// arm has the next collection call tune: a cleanup of an object nothing
// refers to runs after the collection that finds it unreachable. The
// object is 64 bytes, past the tiny allocator (whose blocks hold several
// objects and are freed together).
func (t *tuner) arm() {
	runtime.AddCleanup(new([64]byte), func(t *tuner) {
		mu.Lock()
		defer mu.Unlock()
		if t.stopped {
			return
		}
		t.tune()
		t.arm()
	}, t)
}

// tune sets the percent that puts the next goal at the floor (within
// MaxPercent), or Base when the goal at Base would be past it. The
// runtime's goal is the live heap plus percent/100 of what it scans
// (the live heap, stacks and globals), so the goal at the percent set
// now says what a point of percent is worth. Called with mu held.
func (t *tuner) tune() {
	metrics.Read(t.sample)
	live, goal := t.sample[0].Value.Uint64(), t.sample[1].Value.Uint64()
	p := Base
	if goal > live && live < t.floor {
		perPoint := float64(goal-live) / float64(t.percent)
		if want := float64(t.floor-live) / perPoint; want > Base {
			p = int(min(want, MaxPercent))
		}
	}
	if p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
}
