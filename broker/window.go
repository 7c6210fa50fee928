package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// windowBuffer is Queen's option: a partition is not delivered, to any
// group, while its newest message was pushed less than windowBuffer
// seconds ago; once it has been quiet that long its messages are
// delivered as usual (Queen's pop_unified: a debounce of the partition,
// not a delay of each message). It is kept with Queen's other options
// (Options.Kept), enforced.
const windowBufferOption = "windowBuffer"

// Window is the queue's windowBuffer as a duration: 0 when it is not
// set. Every pop asks, so the kept options (compact JSON, numbers and
// booleans only, keys sorted) are searched for the key rather than
// decoded; only a value that is not a plain run of digits is decoded.
func (o Options) Window() time.Duration {
	if o.Kept == "" {
		return 0
	}
	k := string(o.Kept)
	const key = `"` + windowBufferOption + `":`
	i := strings.Index(k, key)
	if i < 0 {
		return 0
	}
	v := k[i+len(key):]
	n := 0
	for n < len(v) && '0' <= v[n] && v[n] <= '9' {
		n++
	}
	s, err := strconv.ParseInt(v[:n], 10, 32)
	if n == 0 || n == len(v) || (v[n] != ',' && v[n] != '}') || err != nil {
		// Not as configure writes it: decoded.
		var w int32
		if json.Unmarshal(o.Kept.Values()[windowBufferOption], &w) != nil {
			return 0
		}
		s = int64(w)
	}
	if s <= 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// WindowRead says which consumers a read of WindowTx looks at: those of
// the group in the queue, at Now, under a windowBuffer of Window (more
// than 0); Limit is ReadyConsumersWindow's.
type WindowRead struct {
	QueueID int64
	GroupID int64
	Now     time.Time
	Window  time.Duration
	Limit   int
}

// WindowTx is what a pop of a queue with a windowBuffer needs. A queue
// without one is popped through ReadyConsumers and NextWake, whose
// statements know nothing of it: it costs them nothing.
type WindowTx interface {
	// ReadyConsumersWindow is ReadyConsumers (its order, locks, cleared
	// marks and busy) that also skips, leaving it marked ready, a
	// consumer whose partition's newest message was pushed less than
	// r.Window before r.Now. It reads that message by the index of
	// messages by partition and seq (its row, for created_at), for each
	// consumer with a message past its cursor.
	ReadyConsumersWindow(ctx context.Context, r WindowRead) (cs []Consumer, busy bool, err error)
	// NextWakeWindow is NextWake under the window: the earliest time
	// after r.Now at which a consumer of the group with messages past
	// its cursor becomes ready, the end of its partition's window (its
	// newest message's push + r.Window) counted with its retry delay and
	// its head's delayedProcessing. A consumer under a live lease wakes
	// when the lease runs out, as in NextWake (should a push during the
	// lease have started its window again, that wake finds nothing, and
	// the next call names the window's end). It reads the queue, the
	// group's ready consumers and the newest messages of those not
	// leased; it writes and locks nothing.
	NextWakeWindow(ctx context.Context, r WindowRead) (t time.Time, ok bool, err error)
	// LastPush returns when the newest message of the partition was
	// pushed (its created_at, by the index of messages by partition and
	// seq); ok is false when the partition has none. It writes and locks
	// nothing.
	LastPush(ctx context.Context, partitionID int64) (t time.Time, ok bool, err error)
}

// readyConsumers is the store's ReadyConsumers, under the queue's
// windowBuffer when it has one.
func readyConsumers(ctx context.Context, tx consumerWindowTx, q Queue, gid int64, now time.Time) ([]Consumer, bool, error) {
	if w := q.Options.Window(); w > 0 {
		return tx.ReadyConsumersWindow(ctx, WindowRead{QueueID: q.ID, GroupID: gid, Now: now, Window: w, Limit: 1})
	}
	return tx.ReadyConsumers(ctx, q.ID, gid, now, 1)
}

// nextWake is the store's NextWake, under the queue's windowBuffer when
// it has one.
func nextWake(ctx context.Context, tx consumerWindowTx, q Queue, gid int64, now time.Time) (time.Time, error) {
	var wake time.Time
	var err error
	if w := q.Options.Window(); w > 0 {
		wake, _, err = tx.NextWakeWindow(ctx, WindowRead{QueueID: q.ID, GroupID: gid, Now: now, Window: w})
	} else {
		wake, _, err = tx.NextWake(ctx, q.ID, gid, now)
	}
	return wake, err
}

// windowEnd is when the partition's window ends under the queue's
// windowBuffer: its newest message's push + the window; zero when the
// queue has none or the partition no message.
func windowEnd(ctx context.Context, tx WindowTx, q Queue, partitionID int64) (time.Time, error) {
	w := q.Options.Window()
	if w <= 0 {
		return time.Time{}, nil
	}
	last, ok, err := tx.LastPush(ctx, partitionID)
	if err != nil {
		return time.Time{}, fmt.Errorf("last push: %w", err)
	}
	if !ok {
		return time.Time{}, nil
	}
	return last.Add(w), nil
}
