package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Labels are a queue's namespace and task, as configure's top-level
// fields give them: nil leaves one as it is (Queen's clients send null
// when they have none), "" clears it.
type Labels struct {
	Namespace *string
	Task      *string
}

// Configure creates the queue if need be and changes the options named in
// raw (option name to JSON value); the others keep their values. An unknown
// option or an invalid value fails the call and changes nothing.
func (b *Broker) Configure(ctx context.Context, queue string, raw map[string]json.RawMessage, actor string) (Queue, error) {
	return b.ConfigureWith(ctx, ConfigureParams{Queue: queue, Options: raw, Actor: actor})
}

// ConfigureParams is what ConfigureWith does.
type ConfigureParams struct {
	Queue  string
	Labels Labels
	// Options are option names to JSON values; a null value puts that
	// option back to its default (Queen's configure_queue_v1 COALESCEs a
	// null to the default).
	Options map[string]json.RawMessage
	// Replace makes the options and labels the call does not name go back
	// to their defaults (no namespace, no task), as Queen's configure
	// always does; without it they keep their values.
	Replace bool
	Actor   string
}

// ConfigureWith creates the queue if need be and sets its options and
// labels as p says, in one transaction, audited.
func (b *Broker) ConfigureWith(ctx context.Context, p ConfigureParams) (Queue, error) {
	queue, labels, raw := p.Queue, p.Labels, p.Options
	if err := checkName("queue", queue); err != nil {
		return Queue{}, err
	}
	for _, l := range []struct {
		name string
		v    *string
	}{{"namespace", labels.Namespace}, {"task", labels.Task}} {
		if l.v != nil && len(*l.v) > MaxNameLength {
			return Queue{}, errorf(ErrInvalid, "%s is longer than %d bytes", l.name, MaxNameLength)
		}
	}
	var q Queue
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		var err error
		if q, err = queueOrCreate(ctx, tx, queue, now); err != nil {
			return fmt.Errorf("configure: %w", err)
		}
		from := q.Options
		if p.Replace {
			from = DefaultOptions()
			q.Namespace, q.Task = "", ""
		}
		if q.Options, err = applyOptions(from, raw); err != nil {
			return err
		}
		if labels.Namespace != nil {
			q.Namespace = *labels.Namespace
		}
		if labels.Task != nil {
			q.Task = *labels.Task
		}
		if err := tx.UpdateQueue(ctx, q); err != nil {
			return fmt.Errorf("configure: %w", err)
		}
		touched(q.Name) // a shorter lease or delay may make something ready
		names := make([]string, 0, len(raw))
		for k := range raw {
			names = append(names, k)
		}
		sort.Strings(names)
		detail := "options set: " + strings.Join(names, ", ")
		if p.Replace {
			detail = "replaced, the others back to their defaults; " + detail
		}
		if labels.Namespace != nil || p.Replace {
			detail += fmt.Sprintf("; namespace %q", truncate(q.Namespace, 64))
		}
		if labels.Task != nil || p.Replace {
			detail += fmt.Sprintf("; task %q", truncate(q.Task, 64))
		}
		return audit(ctx, tx, now, p.Actor, AuditConfigure, q.Name, "", 0, detail)
	})
	return q, err
}

// keptKind is the type of value an option kept without being enforced
// takes.
type keptKind int

const (
	keptCount   keptKind = iota // a whole number, 0 or more
	keptInteger                 // a whole number, negative too
	keptBool                    // true or false
)

// keptOptions are the options Lazarus accepts and keeps in
// Options.Kept: those Queen MQ knows (its configure route and
// configure_queue_v1) that have no field of Options. Each is reported in
// Options.NotEnforced once given, but those enforced all the same
// (keptEnforced: maxWaitTimeSeconds, windowBuffer).
var keptOptions = map[string]keptKind{
	// Queen's
	"priority":           keptInteger,
	"maxSize":            keptCount,
	"ttl":                keptCount,
	"windowBuffer":       keptCount,
	"retentionEnabled":   keptBool,
	"encryptionEnabled":  keptBool,
	"maxWaitTimeSeconds": keptCount,
}

// KnownOptions lists, sorted, every option configure accepts: those
// Lazarus enforces and those it keeps without enforcing.
func KnownOptions() []string {
	names := []string{"leaseTime", "retryLimit", "retryDelay", "deadLetterQueue", "dlqAfterMaxRetries", "delayedProcessing", "replayPausePercent", "replayPauseWindow",
		"completedRetentionSeconds", "retentionSeconds", "deadLetterRetentionSeconds",
		"retryBackoff", "retryDelayMax", "maxReplays", "deadLetterArchive",
		"holdAfterFailures", "holdProbeSeconds", "maskPaths", "maskRevealRole"}
	for k := range keptOptions {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// maxDelay is the longest delayedProcessing, in seconds: 30 days.
const maxDelay = 30 * 24 * 3600

// applyOptions returns o changed by raw, checking every value; a null
// value puts its option back to its default (a kept one is no longer
// kept: it has no value to report).
func applyOptions(o Options, raw map[string]json.RawMessage) (Options, error) {
	number := func(name string, v json.RawMessage, what string) (json.Number, error) {
		var x any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&x); err != nil {
			return "", errorf(ErrInvalid, "option %s must be %s", name, what)
		}
		n, isNum := x.(json.Number)
		if !isNum {
			return "", errorf(ErrInvalid, "option %s must be %s", name, what)
		}
		return n, nil
	}
	whole := func(name string, v json.RawMessage, lo, hi int64) (int64, error) {
		n, err := number(name, v, "a whole number")
		if err != nil {
			return 0, err
		}
		i, err := n.Int64()
		if err != nil {
			return 0, errorf(ErrInvalid, "option %s must be a whole number", name)
		}
		if i < lo || i > hi {
			return 0, errorf(ErrInvalid, "option %s must be between %d and %d, got %d", name, lo, hi, i)
		}
		return i, nil
	}
	intOpt := func(name string, v json.RawMessage, lo, hi int, dst *int) error {
		i, err := whole(name, v, int64(lo), int64(hi))
		if err == nil {
			*dst = int(i)
		}
		return err
	}
	boolOpt := func(name string, v json.RawMessage, dst *bool) error {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) || json.Unmarshal(v, dst) != nil {
			return errorf(ErrInvalid, "option %s must be true or false", name)
		}
		return nil
	}
	kept := func(name string, kind keptKind, v json.RawMessage) error {
		var err error
		switch kind {
		case keptCount:
			_, err = whole(name, v, 0, 1<<31-1)
		case keptInteger:
			_, err = whole(name, v, -1<<31, 1<<31-1)
		case keptBool:
			var b bool
			err = boolOpt(name, v, &b)
		}
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return errorf(ErrInvalid, "option %s is not valid JSON", name)
		}
		o.Kept = o.Kept.with(name, buf.Bytes())
		return nil
	}
	// In name order, so that the error of a call with several bad
	// options is always the same one.
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	var defaults map[string]json.RawMessage
	for _, name := range names {
		v := raw[name]
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			if _, ok := keptOptions[name]; ok {
				o.Kept = o.Kept.without(name)
				continue
			}
			if defaults == nil {
				d, _ := DefaultOptions().MarshalJSON() // plain numbers and booleans: cannot fail
				_ = json.Unmarshal(d, &defaults)
			}
			if d, ok := defaults[name]; ok {
				v = d // and checked below as if sent
			}
		}
		var err error
		switch name {
		case "leaseTime":
			err = intOpt(name, v, 1, 7*24*3600, &o.LeaseTime)
		case "retryLimit":
			err = intOpt(name, v, 0, 1000, &o.RetryLimit)
		case "retryDelay":
			err = intOpt(name, v, 0, 24*3600*1000, &o.RetryDelay)
		case "deadLetterQueue":
			err = boolOpt(name, v, &o.DeadLetterQueue)
		case "dlqAfterMaxRetries":
			err = boolOpt(name, v, &o.DLQAfterMaxRetries)
		case "delayedProcessing":
			err = intOpt(name, v, 0, maxDelay, &o.DelayedProcessing)
		case "replayPausePercent":
			err = intOpt(name, v, 0, 100, &o.ReplayPausePercent)
		case "replayPauseWindow":
			err = intOpt(name, v, 1, MaxPauseWindow, &o.ReplayPauseWindow)
		case "completedRetentionSeconds":
			err = intOpt(name, v, 0, MaxRetention, &o.CompletedRetentionSeconds)
		case "retentionSeconds":
			err = intOpt(name, v, 0, MaxRetention, &o.RetentionSeconds)
		case "deadLetterRetentionSeconds":
			err = intOpt(name, v, 0, MaxRetention, &o.DeadLetterRetentionSeconds)
		case "retryBackoff":
			var n json.Number
			if n, err = number(name, v, "a number"); err == nil {
				f, ferr := n.Float64()
				if ferr != nil || f < 1 || f > MaxRetryBackoff {
					err = errorf(ErrInvalid, "option %s must be a number from 1 to %d, got %s", name, MaxRetryBackoff, truncate(n.String(), 32))
				} else {
					o.RetryBackoff = f
				}
			}
		case "retryDelayMax":
			err = intOpt(name, v, 0, 24*3600*1000, &o.RetryDelayMax)
		case "maxReplays":
			err = intOpt(name, v, 0, 1000, &o.MaxReplays)
		case "deadLetterArchive":
			err = boolOpt(name, v, &o.DeadLetterArchive)
		case "holdAfterFailures":
			err = intOpt(name, v, 0, MaxHoldAfterFailures, &o.HoldAfterFailures)
		case "holdProbeSeconds":
			err = intOpt(name, v, 1, MaxHoldProbeSeconds, &o.HoldProbeSeconds)
		case "maskPaths":
			var paths []string
			if json.Unmarshal(v, &paths) != nil || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				err = errorf(ErrInvalid, "option maskPaths must be a list of JSON paths (strings), such as [\"$.card.number\", \"$..email\"]")
				break
			}
			o.MaskPaths, err = ParseMaskPaths(paths)
		case "maskRevealRole":
			var r string
			if json.Unmarshal(v, &r) != nil || (Role(r) != RoleOperator && Role(r) != RoleAdmin) {
				err = errorf(ErrInvalid, "option maskRevealRole must be \"operator\" or \"admin\"")
				break
			}
			o.MaskRevealRole = Role(r)
		default:
			kind, ok := keptOptions[name]
			if !ok {
				err = errorf(ErrInvalid, "unknown option %q", truncate(name, 64))
				break
			}
			err = kept(name, kind, v)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

// QueueSummary is a queue with its partitions, groups, stats and holds.
type QueueSummary struct {
	Queue
	Partitions []PartitionInfo
	Groups     []GroupInfo
	Stats      []GroupStats
	// Holds are the holds of the queue and of its groups, by id, each
	// with what waits behind it (Hold.Waiting, from Groups); none: nil.
	Holds []Hold
}

// Depth is the queue's dead letters across its groups.
func (s QueueSummary) Depth() int64 { return depthOf(s.Stats) }

func depthOf(stats []GroupStats) int64 {
	var n int64
	for _, g := range stats {
		n += g.Depth
	}
	return n
}

// eachQueue reads every queue in one snapshot and makes a T of each.
func eachQueue[T any](ctx context.Context, b *Broker, fn func(Tx, Queue) (T, error)) ([]T, error) {
	var out []T
	err := b.store.View(ctx, func(tx Tx) error {
		qs, err := tx.Queues(ctx)
		if err != nil {
			return err
		}
		for _, q := range qs {
			v, err := fn(tx, q)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// Queues describes every queue.
func (b *Broker) Queues(ctx context.Context) ([]QueueSummary, error) {
	return b.QueuesMatching(ctx, QueueFilter{})
}

// ArchivingQueues names the queues whose dead letters are to be archived
// before they expire (deadLetterArchive with a dead-letter retention):
// the leading process needs an archive directory for them.
func (b *Broker) ArchivingQueues(ctx context.Context) ([]string, error) {
	names, err := eachQueue(ctx, b, func(_ Tx, q Queue) (string, error) {
		if q.Options.DeadLetterArchive && q.Options.DeadLetterRetention() > 0 {
			return q.Name, nil
		}
		return "", nil
	})
	return slices.DeleteFunc(names, func(n string) bool { return n == "" }), err
}

// QueueFilter selects queues by their labels; an empty field selects any.
type QueueFilter struct {
	Namespace string
	Task      string
}

func (f QueueFilter) match(q Queue) bool {
	return (f.Namespace == "" || q.Namespace == f.Namespace) && (f.Task == "" || q.Task == f.Task)
}

// QueuesMatching describes the queues f selects.
func (b *Broker) QueuesMatching(ctx context.Context, f QueueFilter) ([]QueueSummary, error) {
	var holds map[int64][]Hold // every queue's, read once
	out, err := eachQueue(ctx, b, func(tx Tx, q Queue) (*QueueSummary, error) {
		if !f.match(q) {
			return nil, nil
		}
		s, err := b.describe(ctx, tx, q)
		if err == nil && holds == nil {
			holds, err = holdsByQueue(ctx, tx, 0)
		}
		s.Holds = withWaiting(holds[q.ID], s.Groups)
		if err == nil {
			s.Holds, err = withProbes(ctx, tx, s.Holds, q, b.now())
		}
		return &s, err
	})
	if err != nil {
		return nil, err
	}
	var qs []QueueSummary
	for _, s := range out {
		if s != nil {
			qs = append(qs, *s)
		}
	}
	return qs, nil
}

// queueNamed returns the named queue, or an ErrNotFound that names it.
func queueNamed(ctx context.Context, tx QueueTx, name string) (Queue, error) {
	q, err := tx.QueueByName(ctx, name)
	if isNotFound(err) {
		return q, errorf(ErrNotFound, "queue %q not found", truncate(name, 64))
	}
	return q, err
}

// Queue describes one queue.
func (b *Broker) Queue(ctx context.Context, name string) (QueueSummary, error) {
	var out QueueSummary
	err := b.store.View(ctx, func(tx Tx) error {
		q, err := queueNamed(ctx, tx, name)
		if err != nil {
			return err
		}
		if out, err = b.describe(ctx, tx, q); err != nil {
			return err
		}
		holds, err := holdsByQueue(ctx, tx, q.ID)
		if err != nil {
			return err
		}
		out.Holds, err = withProbes(ctx, tx, withWaiting(holds[q.ID], out.Groups), q, b.now())
		return err
	})
	return out, err
}

func (b *Broker) describe(ctx context.Context, tx partitionStatsSubscriptionTx, q Queue) (QueueSummary, error) {
	now := b.now()
	s := QueueSummary{Queue: q}
	var err error
	if s.Partitions, err = tx.Partitions(ctx, q.ID); err != nil {
		return s, fmt.Errorf("partitions: %w", err)
	}
	if s.Groups, err = tx.Groups(ctx, q.ID, now); err != nil {
		return s, fmt.Errorf("groups: %w", err)
	}
	if s.Stats, err = b.stats(ctx, tx, q.ID); err != nil {
		return s, fmt.Errorf("stats: %w", err)
	}
	return s, nil
}

// DeleteQueue deletes a queue with its partitions, messages, consumers and
// dead letters.
func (b *Broker) DeleteQueue(ctx context.Context, name, actor string) error {
	if err := checkName("queue", name); err != nil {
		return err
	}
	return b.update(ctx, func(tx Tx, touched func(string)) error {
		q, err := queueNamed(ctx, tx, name)
		if err != nil {
			return err
		}
		if err := tx.DeleteQueue(ctx, q.ID); err != nil {
			return fmt.Errorf("delete queue: %w", err)
		}
		// Its counts still in memory go with it (written later, they
		// would bring its counters back): no later function of this
		// transaction writes them, and they leave memory once it has
		// committed.
		// The audit entry first: it is the last statement that can fail,
		// and the scope's view of the transaction (st.drop) is not undone
		// when a function is rolled back alone.
		if err := audit(ctx, tx, b.now(), actor, AuditQueueDelete, q.Name, "", 0, "queue deleted"); err != nil {
			return err
		}
		_, st, err := scopeOf(tx)
		if err != nil {
			return err
		}
		st.drop(q.ID)
		touched(q.Name)
		return afterCommit(tx, func() { b.pending.takeQueue(q.ID) })
	})
}

// Audit lists audit entries, newest first.
func (b *Broker) Audit(ctx context.Context, f AuditFilter, p Page) ([]AuditEntry, error) {
	if p.Limit <= 0 || p.Limit > MaxPageSize {
		p.Limit = 100
	}
	var out []AuditEntry
	err := b.store.View(ctx, func(tx Tx) (err error) {
		if f.Scope.All() {
			out, err = tx.ListAudit(ctx, f, p)
			return err
		}
		// Within a scope: pages newest first by id, the other queues'
		// entries passed over, until the page (after its offset) is full,
		// the entries end, or auditScopeReads pages were read.
		want, offset := p.Offset+p.Limit, p.Offset
		read := Page{Limit: MaxPageSize, After: p.After}
		for range auditScopeReads {
			page, err := tx.ListAudit(ctx, f, read)
			if err != nil {
				return err
			}
			for _, a := range page {
				if auditInScope(f.Scope, a) && len(out) < want {
					out = append(out, a)
				}
			}
			if len(out) >= want || len(page) < read.Limit {
				break
			}
			read.After = &Cursor{ID: page[len(page)-1].ID}
		}
		out = out[min(offset, len(out)):]
		return nil
	})
	return out, err
}

// auditScopeReads bounds the pages a scoped audit list reads.
const auditScopeReads = 50

// auditInScope reports whether a viewer limited to sc sees entry a: one
// whose queues (a comma-separated list) sc all allows, or one of people's
// accounts (logins, users, tokens), which name none. Another entry that
// names no queue acted on every queue (an export or a job over all of
// them, a pause of every delivery): out of scope, its filter's text too.
func auditInScope(sc QueueScope, a AuditEntry) bool {
	if a.Queue == "" {
		switch a.Action {
		case AuditLogin, AuditLoginFailed, AuditLogout, AuditUser, AuditToken:
			return true
		}
		return false
	}
	for _, q := range strings.Split(a.Queue, ",") {
		if !sc.Allows(q) {
			return false
		}
	}
	return true
}

// Record adds an audit entry for something done outside the broker
// (logins, user changes).
func (b *Broker) Record(ctx context.Context, actor, action, detail string) error {
	return b.update(ctx, func(tx Tx, _ func(string)) error {
		return audit(ctx, tx, b.now(), actor, action, "", "", 0, detail)
	})
}

// QueueBrief is a queue with what the dashboard shows at a glance, from
// maintained counters only: no scan of messages or dead letters.
type QueueBrief struct {
	Queue
	Partitions []Partition
	Groups     []string // groups that read the queue or have dead letters in it
	Stats      []GroupStats
}

// Depth is the queue's dead letters across its groups.
func (q QueueBrief) Depth() int64 { return depthOf(q.Stats) }

// Briefs describes every queue cheaply, for the overview.
func (b *Broker) Briefs(ctx context.Context) ([]QueueBrief, error) {
	return eachQueue(ctx, b, func(tx Tx, q Queue) (QueueBrief, error) { return b.brief(ctx, tx, q) })
}

// Brief describes one queue cheaply.
func (b *Broker) Brief(ctx context.Context, name string) (QueueBrief, error) {
	var out QueueBrief
	err := b.store.View(ctx, func(tx Tx) error {
		q, err := queueNamed(ctx, tx, name)
		if err != nil {
			return err
		}
		out, err = b.brief(ctx, tx, q)
		return err
	})
	return out, err
}

// Readers names the consumer groups that read a queue (ErrNotFound when
// there is no such queue).
func (b *Broker) Readers(ctx context.Context, queue string) ([]string, error) {
	var out []string
	err := b.store.View(ctx, func(tx Tx) error {
		q, err := queueNamed(ctx, tx, queue)
		if err != nil {
			return err
		}
		out, err = tx.GroupNames(ctx, q.ID)
		return err
	})
	return out, err
}

func (b *Broker) brief(ctx context.Context, tx partitionStatsSubscriptionTx, q Queue) (QueueBrief, error) {
	br := QueueBrief{Queue: q}
	var err error
	if br.Partitions, err = tx.PartitionList(ctx, q.ID); err != nil {
		return br, fmt.Errorf("partitions: %w", err)
	}
	if br.Stats, err = b.stats(ctx, tx, q.ID); err != nil {
		return br, fmt.Errorf("stats: %w", err)
	}
	names, err := tx.GroupNames(ctx, q.ID)
	if err != nil {
		return br, fmt.Errorf("groups: %w", err)
	}
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	for _, s := range br.Stats {
		if !seen[s.Group] {
			seen[s.Group] = true
			names = append(names, s.Group)
		}
	}
	sort.Strings(names)
	br.Groups = names
	return br, nil
}
