package broker

import (
	"encoding/json"
	"fmt"
	"time"
)

// Canary asks a replay job to begin with a few of its dead letters
// (SPEC section 4): Count of its frozen set, drawn at random, replayed
// first; the job waits until each copy is settled by each group whose
// dead letter it replaced (in mode every the copy goes to the other
// groups of its partition too: those are not awaited), or SettleSeconds
// passes (the unsettled count as failed); more than
// MaxFailed failed again pauses the job saying why, else the rest goes on
// at the job's rate.
type Canary struct {
	Count         int `json:"count"`
	SettleSeconds int `json:"settleSeconds"`
	MaxFailed     int `json:"maxFailed"`
}

// The states of a job's canary.
const (
	CanaryDrawn    = "drawn"    // asked for; nothing replayed yet
	CanarySettling = "settling" // copies replayed; waiting for their outcomes
	CanaryPassed   = "passed"   // at most MaxFailed failed again: the rest goes on
	CanaryFailed   = "failed"   // more than MaxFailed failed again: the job paused
)

// CanaryCopy is one dead letter the canary replayed, and what became of
// its copy.
type CanaryCopy struct {
	DeadLetterID  string `json:"deadLetterId"`  // the dead letter drawn
	Group         string `json:"consumerGroup"` // its group
	Seq           int64  `json:"seq"`           // the copy's message
	Queue         string `json:"queue"`         // where the copy went
	Partition     string `json:"partition"`
	TransactionID string `json:"transactionId"` // the copy's, dlq:<id>
	Outcome       string `json:"outcome"`       // pending, succeeded, failed (CopyOutcome.OutcomeName; unsettled at the deadline: failed)
	Error         string `json:"error,omitempty"`
}

// JobCanary is a job's canary as it goes: what was asked, its state, its
// copies. Stored with the job (jobs.canary, JSON).
type JobCanary struct {
	Canary
	State   string       `json:"state"`
	DrawnAt time.Time    `json:"drawnAt"`
	Until   time.Time    `json:"until"` // settling: the deadline
	Copies  []CanaryCopy `json:"copies"`
	Reason  string       `json:"reason,omitempty"` // failed: in words
	// Seed is the job's draw (taken of Config.Rand once, as the job
	// starts): a draw made in a transaction run twice draws the same.
	Seed uint64 `json:"seed,omitempty"`
}

// Failed counts the copies that failed again: a copy that failed in any
// group awaited (or was not settled by the deadline) counts once.
func (c *JobCanary) Failed() int {
	_, failed, _ := c.tally()
	return failed
}

// JobCanaryJSON is the canary as stored ("" none): for stores.
func JobCanaryJSON(c *JobCanary) string {
	if c == nil {
		return ""
	}
	b, _ := json.Marshal(c) // strings, times and ints: cannot fail
	return string(b)
}

// ParseJobCanary reads a canary as stored (for stores): "" is none.
func ParseJobCanary(s string) (*JobCanary, error) {
	if s == "" {
		return nil, nil
	}
	var c JobCanary
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return nil, fmt.Errorf("job canary: %w", err)
	}
	return &c, nil
}
