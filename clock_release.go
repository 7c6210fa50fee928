//go:build !faults

package main

import "github.com/lazarus-dlq/lazarus/broker"

// faultClock is nil, the broker's wall clock, in every build but the
// fault campaign's (clock_faults.go).
func faultClock() broker.Clock { return nil }
