//go:build faults

package main

import (
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The fault campaign (package faults) steps the clock of one process.
// Go's time.Now reads the system's clock through the vDSO, not through
// libc, so libfaketime cannot move it; the broker takes its time from an
// injected broker.Clock instead, and a binary built with -tags faults
// gives it this one: the wall clock plus an offset, which the process
// reads from the file LAZARUS_FAULTS_CLOCK_FILE names (milliseconds, one
// integer) at start and on each SIGUSR1. The release binary is built
// without the tag (clock_release.go): it has neither the file nor the
// signal.

// faultOffset is the clock's offset now, in nanoseconds.
var faultOffset atomic.Int64

// faultClock is the broker's clock of a faults build.
func faultClock() broker.Clock {
	path := os.Getenv("LAZARUS_FAULTS_CLOCK_FILE")
	if path == "" {
		return nil
	}
	read := func() {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return
		}
		faultOffset.Store(ms * int64(time.Millisecond))
	}
	read()
	steps := make(chan os.Signal, 1)
	signal.Notify(steps, syscall.SIGUSR1)
	go func() {
		for range steps {
			read()
		}
	}()
	return broker.ClockFunc(func() time.Time { return time.Now().Add(time.Duration(faultOffset.Load())) })
}
