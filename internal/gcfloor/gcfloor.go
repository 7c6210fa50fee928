// Package gcfloor keeps Go's collector from running while the heap is
// small: below a floor, the heap may grow to the floor before a
// collection, and above it the collector paces as GOGC=100 does.
//
// Lazarus keeps its data in SQLite or PostgreSQL, not in Go's heap: a
// server's live heap is a megabyte or two, and at GOGC=100 the runtime
// collects each time the heap reaches 4 MB, its smallest goal. A
// dashboard page of 50 dead letters makes about a megabyte of garbage,
// so the collector ran every two or three pages (bench D2: 312
// collections in 13 s), and the pages' tail latency with it. The
// runtime has GOGC (a ratio, which also scales that smallest goal) and
// GOMEMLIMIT (a ceiling) but no floor, and no well-kept library here
// gives one, so this does what such tuners do: after each collection it
// sets the GC percent that puts the next goal at the floor, and GOGC=100
// once the live heap alone would reach it. GOMEMLIMIT still bounds the
// heap: the runtime collects at the limit whatever the percent.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Floor is the floor the lazarus binary keeps (main.go; and the bench's
// servers, which stand for it). Measured on 2026-12-04 (alternated,
// three runs each): D2's p99 with 8 clients 31-34 ms at GOGC=100,
// 17-22 ms at 8 MB, 16-27 ms at 16 MB; S3's peak RSS 46.7 MB at
// GOGC=100, 52 MB at 8 MB, 60 MB at 16 MB.
const Floor = 8 << 20

const (
	// base is the percent kept at and above the floor: GOGC's default.
	base = 100
	// minHeap is the runtime's smallest goal at GOGC=100 (Go's GC guide:
	// 4 MiB, scaled by GOGC/100).
	minHeap = 4 << 20
)

var (
	mu      sync.Mutex
	running *tuner
)

type tuner struct {
	floor   uint64
	most    int // the percent whose smallest goal is the floor
	percent int // the percent set now
	stopped bool
	sample  []metrics.Sample
}

// Start keeps the collector's goal at floor bytes at least, until stop.
// A process runs one: a Start while one runs, a floor of 0, GOGC in the
// environment (getenv's: the operator's choice stands) or a percent
// other than 100 starts nothing.
func Start(floor uint64, getenv func(string) string) (stop func()) {
	mu.Lock()
	defer mu.Unlock()
	if running != nil || floor == 0 || getenv("GOGC") != "" || gogc() != base {
		return func() {}
	}
	t := &tuner{floor: floor, most: int(floor * 100 / minHeap), percent: base, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	running = t
	t.tune()
	t.arm()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if !t.stopped {
			t.stopped = true
			running = nil
			debug.SetGCPercent(base)
		}
	}
}

// gogc is the runtime's GC percent now (-1: off).
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
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

// tune sets the smallest percent, base at least, whose goal is the
// floor. The runtime's goal is the larger of its smallest (minHeap ×
// percent/100) and the live heap plus percent/100 of what the
// collection scans (the live heap, stacks and globals); a limit
// (GOMEMLIMIT) may lower it. So the percent is the one that makes the
// scanned part reach the floor, and no more than t.most, at which the
// smallest goal is the floor. Neither reads the goal itself, which a
// limit moves. Called with mu held.
func (t *tuner) tune() {
	metrics.Read(t.sample)
	live, stack, globals := t.sample[0].Value.Uint64(), t.sample[1].Value.Uint64(), t.sample[2].Value.Uint64()
	p := base
	if live < t.floor {
		byScan := (t.floor - live) * 100 / max(live+stack+globals, 1)
		p = max(base, int(min(byScan, uint64(t.most))))
	}
	if p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
}

// current is the percent the running tuner set last (base when none
// runs).
func current() int {
	mu.Lock()
	defer mu.Unlock()
	if running == nil {
		return base
	}
	return running.percent
}
