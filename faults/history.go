// Package faults is Lazarus's fault campaign (issue 36): several
// `lazarus serve` processes on one PostgreSQL database, each behind a
// TCP proxy, and one on SQLite, with clients doing real work through the
// HTTP API while a nemesis kills, pauses, partitions, slows and steps the
// clocks of the processes and crashes PostgreSQL; every request, its
// answer and its times are recorded, and a checker decides from that
// history whether the broker kept its guarantees (docs/guarantees.md,
// "Fault campaign").
//
// The package holds the harness (harness.go), the workload (workload.go),
// the nemesis (nemesis.go), the history (this file) and the checker
// (check.go); the campaign is a test (campaign_test.go): a short run in
// go test, a long one in go tool task test:faults.
package faults

import (
	"sync"
	"time"
)

// Kind is what a recorded operation did.
type Kind string

// The kinds of operation the workload does.
const (
	OpPush    Kind = "push"
	OpPop     Kind = "pop"
	OpAck     Kind = "ack"
	OpReplay  Kind = "replay" // one dead letter, POST /dlq/:id/replay
	OpDelete  Kind = "delete" // one dead letter, DELETE /dlq/:id
	OpJob     Kind = "job"    // a bulk replay or delete job by ids (Comment says which), waited for
	OpHold    Kind = "hold"   // POST /holds
	OpRelease Kind = "release"
	OpGroup   Kind = "group" // an error group's state change
	OpList    Kind = "list"  // a listing of dead letters
	OpBreaker Kind = "breaker"
)

// Delivery is one message a pop handed out.
type Delivery struct {
	TransactionID string
	MessageID     string
	Partition     string
	LeaseID       string
	RetryCount    int
}

// AckItem is one acknowledgement of an ack batch and its result.
type AckItem struct {
	TransactionID string
	Partition     string
	LeaseID       string
	Status        string // completed, failed, dlq
	Success       bool   // the answer said so (false also when there was none)
}

// Op is one request of the history: what was asked, of which process,
// when it was sent and when its answer came (End), and the answer.
// Status is the HTTP status, 0 when no answer came (a connection error
// or a timeout: the outcome is unknown).
type Op struct {
	ID     int
	Client string
	Proc   string
	Kind   Kind
	Start  time.Time
	End    time.Time
	Status int
	Err    string

	Queue string
	Group string

	// A push: one item.
	TransactionID string
	Partition     string
	Seq           int    // its place in its partition's push order
	MessageID     string // as answered
	Duplicate     bool   // answered "duplicate"

	// A pop: what it handed out.
	Deliveries []Delivery

	// An ack batch.
	Acks []AckItem

	// A replay or delete of one dead letter, or a job.
	DLQID   string
	Result  string   // moved, duplicate, gone
	DLQIDs  []string // a job's ids
	Moved   int      // a job's counts
	Dup     int
	Gone    int
	Done    int
	Skipped int
	Failed  int
	Planned int
	JobID   string
	HoldID  string
	Comment string
}

// Known reports whether the operation's outcome is known: an answer came.
func (o *Op) Known() bool { return o.Status != 0 }

// OK reports whether the answer was a success (2xx).
func (o *Op) OK() bool { return o.Status >= 200 && o.Status < 300 }

// Fault is one fault the nemesis injected, from Start to End (healed).
type Fault struct {
	Kind   string // kill, pause, pgcrash, partition, cut, latency, clock
	Proc   string // "" for PostgreSQL itself
	Leader bool   // the process led when the fault began
	Start  time.Time
	End    time.Time
	Detail string
}

// History is what a run recorded: operations and faults.
type History struct {
	mu     sync.Mutex
	Ops    []*Op
	Faults []Fault
	next   int
}

// Begin records the start of an operation and returns it; the caller
// fills it in and calls Finish.
func (h *History) Begin(o *Op) *Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	o.ID = h.next
	o.Start = time.Now()
	h.Ops = append(h.Ops, o)
	return o
}

// Finish marks o answered (or given up on) now.
func (h *History) Finish(o *Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o.End = time.Now()
}

// AddFault records a fault.
func (h *History) AddFault(f Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Faults = append(h.Faults, f)
}

// Snapshot is a copy of the operations and faults recorded so far.
func (h *History) Snapshot() ([]*Op, []Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Op(nil), h.Ops...), append([]Fault(nil), h.Faults...)
}
