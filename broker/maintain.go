package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Maintenance defaults and bounds.
const (
	// DefaultMaintenanceEvery is how often Run runs Maintain, by
	// default (--maintenance-every).
	DefaultMaintenanceEvery = time.Minute
	// DefaultAuditRetention is how long audit entries are kept, by
	// default (--audit-retention).
	DefaultAuditRetention = 400 * 24 * time.Hour
	// KeepForever, as Config.AuditRetention, keeps audit entries for ever.
	KeepForever time.Duration = -1
	// maintainChunk is how many rows a maintenance transaction deletes at
	// most: each chunk is a short write on the low-priority lane.
	maintainChunk = deleteChunk
)

// Maintenance tasks, as reports and /metrics name them.
const (
	TaskStats       = "stats"        // time buckets past their retention, error groups' hours past ErrorGroupHourRetention (and ignores ended)
	TaskMessages    = "messages"     // messages past completedRetentionSeconds or retentionSeconds
	TaskDeadLetters = "dead_letters" // dead letters past deadLetterRetentionSeconds
	TaskPartitions  = "partitions"   // partitions left empty (partsweep.go)
	TaskSpace       = "space"        // free pages given back to the file system
	TaskHistory     = "history"      // restore windows ended, history past HistoryRetention, traces of messages gone
	TaskAudit       = "audit"        // audit entries past the audit retention
	TaskSessions    = "sessions"     // ended sessions
	TaskLogins      = "logins"       // the login limiter's counts past LoginForget (loginlimit.go)
	// TaskNotifications: sent and failed notifications past NotifyRetention.
	TaskNotifications = "notifications"
)

// MaintenanceTasks are the tasks Maintain runs, in order.
var MaintenanceTasks = []string{TaskStats, TaskMessages, TaskDeadLetters, TaskHistory, TaskPartitions, TaskAudit, TaskSessions, TaskLogins, TaskNotifications, TaskSpace}

// AuditSwept is the action of the broker's audit entry that says how many
// audit entries the retention removed.
const AuditSwept = "audit_swept"

// BucketTable names a table of time buckets the stats task sweeps.
type BucketTable int

// The bucket tables.
const (
	BucketMinute BucketTable = iota
	BucketQuarter
	BucketHour
	BucketErrorGroupHour
)

// MaintainTx is what the maintenance sweeps need from storage besides
// SessionTx.SweepSessions and HistoryTx. Each call deletes at most limit
// rows, in one short statement, and returns how many it deleted.
type MaintainTx interface {
	// SweepBuckets deletes up to limit rows of the bucket table whose
	// bucket ends at or before before, oldest first, by the table's time
	// index (writes that table only).
	SweepBuckets(ctx context.Context, b BucketTable, before time.Time, limit int) (int64, error)
	// SweepAudit deletes the audit entries written before before among
	// the limit oldest by id (writes audit only; no index on the time: ids
	// grow with it).
	SweepAudit(ctx context.Context, before time.Time, limit int) (int64, error)
}

// TaskReport is what one maintenance task did in a run.
type TaskReport struct {
	Task    string
	Removed int64         // rows removed (history: rows removed and restore windows ended)
	Chunks  int           // transactions it ran
	Took    time.Duration // wall time of the task
	// Err is what went wrong in the task (nil: nothing). What it did
	// before, or for other queues, is in Removed and Chunks.
	Err error
}

// MaintenanceReport is what a run of Maintain did, task by task in the
// order of MaintenanceTasks.
type MaintenanceReport struct {
	Tasks []TaskReport
	Took  time.Duration
}

// Task returns the report of the named task (zero when it did not run).
func (r MaintenanceReport) Task(name string) TaskReport {
	for _, t := range r.Tasks {
		if t.Task == name {
			return t
		}
	}
	return TaskReport{}
}

// TaskTotals are a maintenance task's numbers since the broker started,
// for /metrics.
type TaskTotals struct {
	Task     string
	Removed  int64         // rows removed, all runs
	LastTook time.Duration // the last run's duration
	Runs     int64
	Errors   int64 // runs that ended in an error
}

// maintenanceTotals keeps TaskTotals across runs.
type maintenanceTotals struct {
	mu sync.Mutex
	m  map[string]TaskTotals
}

func (mt *maintenanceTotals) add(r TaskReport) {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if mt.m == nil {
		mt.m = map[string]TaskTotals{}
	}
	t := mt.m[r.Task]
	t.Task = r.Task
	t.Removed += r.Removed
	t.LastTook = r.Took
	t.Runs++
	if r.Err != nil {
		t.Errors++
	}
	mt.m[r.Task] = t
}

// MaintenanceTotals returns every task's totals since the broker started,
// in the order of MaintenanceTasks (a task not run yet: zeros).
func (b *Broker) MaintenanceTotals() []TaskTotals {
	b.maintenance.mu.Lock()
	defer b.maintenance.mu.Unlock()
	out := make([]TaskTotals, 0, len(MaintenanceTasks))
	for _, name := range MaintenanceTasks {
		t := b.maintenance.m[name]
		t.Task = name
		out = append(out, t)
	}
	return out
}

// background is the options of every write of maintenance (Maintain's
// tasks, and what they share with other callers: CompactStats,
// SweepHistory) and of the jobs' chunks: written alone, when no other
// write waits.
var background = UpdateOptions{Background: true}

// Maintain runs every maintenance task once, each a chunk a transaction
// written as background (background) until nothing is due: the stats
// buckets past their retention, the history of replays and deletes
// (restore windows that ended, history past HistoryRetention), the audit
// entries past the audit retention (with one entry of the broker's stream
// saying how many, when any), the ended sessions, the login limiter's
// forgotten counts, the notifications past NotifyRetention, the merging of
// the full-text indexes' segments that is due, and free pages past the
// margin given back. It reports, per task, the rows removed, the time
// taken and its error, and adds them to MaintenanceTotals. A task's error
// does not stop the tasks after it: Maintain returns the errors joined,
// each named by its task. A cancelled context stops the run at once (the
// tasks that ran are reported and counted).
func (b *Broker) Maintain(ctx context.Context) (MaintenanceReport, error) {
	start := time.Now()
	var rep MaintenanceReport
	var errs []error
	for _, task := range []struct {
		name string
		run  func(ctx context.Context, r *TaskReport) error
	}{
		{TaskStats, b.maintainStats},
		{TaskMessages, b.maintainMessages},
		{TaskDeadLetters, b.maintainDeadLetters},
		{TaskHistory, b.maintainHistory},
		{TaskPartitions, b.maintainPartitions},
		{TaskAudit, b.maintainAudit},
		{TaskSessions, b.maintainSessions},
		{TaskLogins, b.maintainLogins},
		{TaskNotifications, b.maintainNotifications},
		{TaskSpace, b.maintainSpace},
	} {
		r := TaskReport{Task: task.name}
		t0 := time.Now()
		err := task.run(ctx, &r)
		r.Took = time.Since(t0)
		r.Err = err
		rep.Tasks = append(rep.Tasks, r)
		b.maintenance.add(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("maintenance: %s: %w", task.name, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	rep.Took = time.Since(start)
	return rep, errors.Join(errs...)
}

// sweepQueues runs fn for each of queues in turn: a queue's error does not
// stop the queues after it (the errors are returned joined, each named by
// its queue), a cancelled context stops at once.
func sweepQueues(ctx context.Context, queues []Queue, fn func(q Queue) error) error {
	var errs []error
	for _, q := range queues {
		if err := fn(q); err != nil {
			errs = append(errs, fmt.Errorf("queue %s: %w", q.Name, err))
		}
		if err := ctx.Err(); err != nil {
			if len(errs) == 0 {
				errs = append(errs, err)
			}
			break
		}
	}
	return errors.Join(errs...)
}

// chunks runs step a transaction at a time until it deletes fewer than
// maintainChunk rows, adding to r.
func (b *Broker) chunks(ctx context.Context, r *TaskReport, step func(tx Tx, mt MaintainTx, now time.Time) (int64, error)) error {
	for {
		var n int64
		err := b.store.Update(ctx, background, func(tx Tx) (err error) {
			n, err = step(tx, tx, b.now())
			return err
		})
		if err != nil {
			return err
		}
		r.Chunks++
		r.Removed += n
		if n < maintainChunk {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// maintainStats deletes the buckets past their retention (MinuteRetention,
// QuarterRetention, HourRetention) and the error groups' hourly counts past
// ErrorGroupHourRetention.
//
// First it opens the ignored error groups whose ignore's time has come
// (a change of state, not a removal: not counted in r).
func (b *Broker) maintainStats(ctx context.Context, r *TaskReport) error {
	for {
		n, err := b.endIgnores(ctx, maintainChunk)
		if err != nil {
			return fmt.Errorf("error groups' ignores: %w", err)
		}
		if n < maintainChunk {
			break
		}
	}
	for _, c := range []struct {
		bucket BucketTable
		keep   time.Duration
	}{{BucketMinute, MinuteRetention}, {BucketQuarter, QuarterRetention}, {BucketHour, HourRetention}, {BucketErrorGroupHour, ErrorGroupHourRetention}} {
		if err := b.chunks(ctx, r, func(_ Tx, mt MaintainTx, now time.Time) (int64, error) {
			return mt.SweepBuckets(ctx, c.bucket, now.Add(-c.keep), maintainChunk)
		}); err != nil {
			return err
		}
	}
	return nil
}

// maintainHistory is SweepHistory, counted: restore windows that ended
// (their rows cut to a record) and history past HistoryRetention.
func (b *Broker) maintainHistory(ctx context.Context, r *TaskReport) error {
	if err := b.chunks(ctx, r, func(tx Tx, _ MaintainTx, now time.Time) (int64, error) {
		return tx.EndRestoreWindows(ctx, now, maintainChunk)
	}); err != nil {
		return err
	}
	// Traces go once their message and its dead letters (and their
	// history) have: after the sweeps of the other tasks, and before
	// this one's of the history (the next run takes what it frees).
	if err := b.maintainTraces(ctx, r); err != nil {
		return err
	}
	// The walk of replays goes on past the copies it keeps: a chunk of
	// 0 rows with no place to go on ends it.
	var after int64
	for {
		var n, next int64
		if err := b.store.Update(ctx, background, func(tx Tx) (err error) {
			n, next, err = tx.SweepHistory(ctx, b.now().Add(-HistoryRetention), maintainChunk, after)
			return err
		}); err != nil {
			return err
		}
		r.Chunks++
		r.Removed += n
		if n == 0 && next == 0 {
			return nil
		}
		after = next
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// maintainAudit deletes the audit entries older than the audit retention
// and, when it removed any, says how many in the broker's stream.
func (b *Broker) maintainAudit(ctx context.Context, r *TaskReport) error {
	keep := b.auditRetention
	if keep < 0 {
		return nil
	}
	if err := b.chunks(ctx, r, func(_ Tx, mt MaintainTx, now time.Time) (int64, error) {
		return mt.SweepAudit(ctx, now.Add(-keep), maintainChunk)
	}); err != nil {
		return err
	}
	if r.Removed == 0 {
		return nil
	}
	return b.store.Update(ctx, background, func(tx Tx) error {
		return tx.InsertAudit(ctx, &AuditEntry{At: b.now(), Actor: BrokerActor, Action: AuditSwept, Count: int(r.Removed), Broker: true,
			Detail: fmt.Sprintf("audit: %s entries older than %s removed", Thousands(r.Removed), DurationWords(keep))})
	})
}

// maintainNotifications deletes the sent and failed notifications
// written more than NotifyRetention ago (the pending ones stay: they
// are given up NotifyRetryFor after they were written).
func (b *Broker) maintainNotifications(ctx context.Context, r *TaskReport) error {
	return b.chunks(ctx, r, func(tx Tx, _ MaintainTx, now time.Time) (int64, error) {
		return tx.SweepNotifications(ctx, now.Add(-NotifyRetention), maintainChunk)
	})
}

// maintainSessions deletes the sessions that have ended.
func (b *Broker) maintainSessions(ctx context.Context, r *TaskReport) error {
	return b.chunks(ctx, r, func(tx Tx, _ MaintainTx, now time.Time) (int64, error) {
		return tx.SweepSessions(ctx, now, now.Add(-SessionIdle), maintainChunk)
	})
}

// Thousands writes n with commas between thousands: 1,234,567 (the
// dashboard, the command line and the broker's own texts alike).
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
