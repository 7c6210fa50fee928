package broker

import (
	"context"
	"fmt"
	"time"
)

// Dead letters that expire (deadLetterRetentionSeconds, issue 16): a dead
// letter that failed longer ago than its queue's retention leaves the
// dead letters the way a delete does, but for good, counted and said.

// RemovedExpired is how an expired dead letter was removed (its record
// in removed_dead_letters; never restorable).
const RemovedExpired = "expired"

// AuditDeadLettersExpired is the action of the broker's audit entry that
// says how many dead letters of a queue and group expired in a run of
// maintenance.
const AuditDeadLettersExpired = "dead_letters_expired"

// ExpiringWithin is how far ahead the dead-letter list says what will
// expire ("312 expire within 24 h").
const ExpiringWithin = 24 * time.Hour

// ExpiringCap is how many dead letters the "expire within" count reads
// at most: past it the list says "more than 10,000". The count is a walk
// of a range of the queue's (or group's) index from its oldest end,
// bounded by the cap, not a kept count: the window moves with the clock,
// and a kept count of it would have to be moved by every tick.
const ExpiringCap = 10000

// ExpiryTx is what dead-letter expiry (deadLetterRetentionSeconds) needs
// from storage besides DeleteDeadLetters, RemoveFromErrorGroup and
// AddStats.
type ExpiryTx interface {
	// DueDeadLetters returns the keys of up to limit dead letters of the
	// queue that failed before before, oldest first (failedAt, then row
	// id), by the index dead_letters_queue from its oldest end. It reads
	// dead_letters only and locks nothing; none due: empty.
	DueDeadLetters(ctx context.Context, queueID int64, before time.Time, limit int) ([]DeadLetterKey, error)
	// MarkExpired finishes the records that DeleteDeadLetters (with a
	// Removal of RemovedExpired) wrote for keys: each keeps the retention
	// that expired it, and is cut to what its page needs to say so (its
	// error text and any payload it kept go: an expired dead letter
	// cannot be restored). The
	// failed attempts of each (message, group) go too. It writes
	// removed_dead_letters (by removed_dead_letters_seq) and attempts (by
	// its primary key); keys with no record: nothing, no error.
	MarkExpired(ctx context.Context, keys []DeadLetterKey, retention time.Duration) error
	// UpdateExpiryAudit sets the count and detail of the audit entry id,
	// one of action AuditDeadLettersExpired that an earlier chunk of the
	// same run wrote (its time, queue and group stay). It writes audit
	// (by its primary key); no such entry: ErrNotFound.
	UpdateExpiryAudit(ctx context.Context, id int64, count int, detail string) error
	// ExpiryRules returns, for the expired records of message seq, the
	// retention that expired each, by record id (removed_dead_letters_seq;
	// none: empty).
	ExpiryRules(ctx context.Context, seq int64) (map[int64]time.Duration, error)
}

// DeadLetterRetention is the queue's deadLetterRetentionSeconds as a
// duration (0: dead letters are kept until replayed or deleted).
func (o Options) DeadLetterRetention() time.Duration {
	return time.Duration(o.DeadLetterRetentionSeconds) * time.Second
}

// ExpiresAt is when a dead letter that failed at failedAt expires under
// these options (zero: it does not). Maintenance removes it at its first
// run at or after that time.
func (o Options) ExpiresAt(failedAt time.Time) time.Time {
	if o.DeadLetterRetentionSeconds <= 0 || failedAt.IsZero() {
		return time.Time{}
	}
	return failedAt.Add(o.DeadLetterRetention())
}

// Expiring is what the dead-letter list says of what will expire soon:
// Count dead letters of the queue (or the group) expire before Before,
// which is ExpiringWithin from when it was read (More: there are more
// than Count, which is then ExpiringCap). Before is also the bound the
// list filters by (failedAt before Before minus the retention: To) to
// show exactly those.
type Expiring struct {
	Retention time.Duration
	Count     int64
	More      bool
	Before    time.Time // now + ExpiringWithin
	FailedTo  time.Time // the list's To: failedAt before this expires before Before
}

// expiring counts, up to ExpiringCap, the dead letters of the queue q
// (only groupID's when not 0) that expire within ExpiringWithin of now;
// nil when q keeps its dead letters.
func expiring(ctx context.Context, tx DeadLetterTx, q Queue, groupID int64, now time.Time) (*Expiring, error) {
	keep := q.Options.DeadLetterRetention()
	if keep <= 0 {
		return nil, nil
	}
	e := &Expiring{Retention: keep, Before: now.Add(ExpiringWithin)}
	// To the millisecond, as failedAt is kept: the list's link (to=)
	// then selects exactly what was counted.
	e.FailedTo = e.Before.Add(-keep).Truncate(time.Millisecond)
	n, err := tx.CountDeadLettersUpTo(ctx, Filter{QueueID: q.ID, GroupID: groupID, To: e.FailedTo}, ExpiringCap+1)
	if err != nil {
		return nil, fmt.Errorf("expiring dead letters: %w", err)
	}
	e.Count, e.More = min(n, ExpiringCap), n > ExpiringCap
	return e, nil
}

// stampExpiry sets ExpiresAt on dls from their queues' options (each
// queue read once).
func stampExpiry(ctx context.Context, tx QueueTx, dls []DeadLetter) error {
	opts := map[int64]Options{}
	for i := range dls {
		o, ok := opts[dls[i].QueueID]
		if !ok {
			q, err := tx.QueueByID(ctx, dls[i].QueueID)
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("expiry: queue: %w", err)
			}
			o = q.Options
			opts[q.ID] = o
		}
		dls[i].ExpiresAt = o.ExpiresAt(dls[i].FailedAt)
	}
	return nil
}

// maintainDeadLetters expires the dead letters past their queue's
// deadLetterRetentionSeconds, queue by queue, oldest first, a chunk of
// maintainChunk a transaction on the low-priority lane (Maintain's
// context). Each chunk, in its transaction: the dead letters leave as a
// delete takes them (full-text indexes, error groups, depth), counted in
// Stats.DeadLettersExpired of their queue and group, with a record that
// says they expired, when and by which retention (not restorable), and
// the run's entry of the broker's audit stream for each group that lost
// any says how many so far (see expireQueue). A queue's error does not
// stop the other queues (see sweepQueues): the errors are returned joined.
func (b *Broker) maintainDeadLetters(ctx context.Context, r *TaskReport) error {
	var queues []Queue
	if err := b.store.View(ctx, func(tx Tx) error {
		qs, err := tx.Queues(ctx)
		queues = queues[:0]
		for _, q := range qs {
			if q.Options.DeadLetterRetentionSeconds > 0 {
				queues = append(queues, q)
			}
		}
		return err
	}); err != nil {
		return err
	}
	return sweepQueues(ctx, queues, func(q Queue) error { return b.expireQueue(ctx, q, r) })
}

// expiryEntry is the broker's audit entry of one group's dead letters
// expired in a run, as the chunks committed so far left it.
type expiryEntry struct {
	id    int64 // the entry (0: none written yet)
	name  string
	count int64
	keep  time.Duration
}

// expireQueue expires q's due dead letters, a chunk a transaction. Each
// chunk says in its own transaction how many went: the first chunk that
// expires any of a group's writes the group's entry of the broker's
// audit stream, the later ones of the same run update its count and
// detail (its id kept between chunks). Whatever stops the run between
// chunks (cancelled, an error, a crash) leaves an audit that says all
// that was committed, and a run of a million dead letters one entry a
// group. A retention changed during the run starts new entries.
func (b *Broker) expireQueue(ctx context.Context, q Queue, r *TaskReport) error {
	entries := map[int64]expiryEntry{} // by group, as committed
	for {
		// A queue that archives writes the chunk first, outside the
		// writer (archiveDue); the transaction then expires those only.
		archived, more, archiving, err := b.archiveDue(ctx, q)
		if err != nil {
			return err
		}
		var keys []DeadLetterKey
		var written map[int64]expiryEntry
		err = b.updateWith(ctx, background, func(tx Tx, _ UpdateOptions, _ func(string)) error {
			keys, written = nil, nil
			// The option is read again: it may have changed since the
			// run began (or the queue gone).
			cur, err := tx.QueueByID(ctx, q.ID)
			if isNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			keep := cur.Options.DeadLetterRetention()
			if keep <= 0 {
				return nil
			}
			now := b.now()
			if keys, err = tx.DueDeadLetters(ctx, q.ID, now.Add(-keep), maintainChunk); err != nil || len(keys) == 0 {
				return err
			}
			if keys = beforeExpiry(cur, keys, archived); len(keys) == 0 {
				return nil
			}
			if _, err := removeKeys(ctx, tx, keys, Stats{DeadLettersExpired: 1}, &Removal{How: RemovedExpired, At: now, Actor: BrokerActor}, now); err != nil {
				return err
			}
			if err := tx.MarkExpired(ctx, keys, keep); err != nil {
				return err
			}
			written, err = b.auditExpiry(ctx, tx, cur, keys, keep, now, entries)
			return err
		})
		if err != nil {
			return err
		}
		// Committed: the entries are as written (a transaction run again
		// started from entries as they were).
		for g, e := range written {
			entries[g] = e
		}
		r.Chunks++
		r.Removed += int64(len(keys))
		if archiving && !more || !archiving && len(keys) < maintainChunk {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// auditExpiry writes, in the chunk's transaction tx, the audit of keys,
// the dead letters of q that expired by retention keep: per group, the
// run's entry (from entries, the earlier chunks') updated with the
// chunk's count, or a new one. It returns the groups' entries as it
// wrote them and leaves entries as it was (the transaction may run
// again).
func (b *Broker) auditExpiry(ctx context.Context, tx auditExpirySubscriptionTx, q Queue, keys []DeadLetterKey, keep time.Duration, now time.Time, entries map[int64]expiryEntry) (map[int64]expiryEntry, error) {
	var groups []int64
	chunk := map[int64]int64{}
	for _, k := range keys {
		if chunk[k.GroupID] == 0 {
			groups = append(groups, k.GroupID)
		}
		chunk[k.GroupID]++
	}
	out := make(map[int64]expiryEntry, len(groups))
	for _, g := range groups {
		e := entries[g]
		if e.keep != keep {
			e = expiryEntry{name: e.name, keep: keep} // a new rule: a new entry
		}
		if e.name == "" {
			name, err := tx.GroupName(ctx, g)
			if err != nil {
				return nil, fmt.Errorf("expiry audit: group: %w", err)
			}
			e.name = name
		}
		e.count += chunk[g]
		detail := fmt.Sprintf("dead letters: %s expired in %s / %s, older than %s (deadLetterRetentionSeconds)", Thousands(e.count), q.Name, e.name, DurationWords(keep))
		if e.id != 0 {
			err := tx.UpdateExpiryAudit(ctx, e.id, int(e.count), detail)
			if err == nil {
				out[g] = e
				continue
			}
			if !isNotFound(err) {
				return nil, fmt.Errorf("expiry audit: %w", err)
			}
			// Gone (the audit sweep took it): a new entry says the run's count.
		}
		a := &AuditEntry{At: now, Actor: BrokerActor, Action: AuditDeadLettersExpired, Queue: q.Name, Group: e.name,
			Count: int(e.count), Detail: detail, Broker: true}
		if err := tx.InsertAudit(ctx, a); err != nil {
			return nil, fmt.Errorf("expiry audit: %w", err)
		}
		e.id = a.ID
		out[g] = e
	}
	return out, nil
}

// beforeExpiry keeps, of a chunk of q's dead letters about to expire
// (keys, read in the chunk's transaction), those that may expire: when q
// archives (deadLetterArchive), only those archiveDue wrote to the
// archive (archived, already on the disk: nil, none); else all. The
// archive is written before this transaction, never inside it: the
// function given to Update may run again and touches nothing outside
// its transaction (STORAGE.md rule 1), and the writer is not held while
// the archive's file is compressed and synced.
func beforeExpiry(q Queue, keys []DeadLetterKey, archived map[int64]bool) []DeadLetterKey {
	if !q.Options.DeadLetterArchive {
		return keys
	}
	out := keys[:0:0]
	for _, k := range keys {
		if archived[k.ID] {
			out = append(out, k)
		}
	}
	return out
}

// ExpiryWords says the rule that expired a dead letter:
// "deadLetterRetentionSeconds: 7 days".
func ExpiryWords(retention time.Duration) string {
	if retention <= 0 {
		return "deadLetterRetentionSeconds"
	}
	return "deadLetterRetentionSeconds: " + DurationWords(retention)
}

// DurationWords says a retention in the largest whole unit: "7 days",
// "1 day", "36 hours", "90 minutes", "45 seconds".
func DurationWords(d time.Duration) string {
	unit := func(n int64, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return Thousands(n) + " " + one + "s"
	}
	switch {
	case d%(24*time.Hour) == 0:
		return unit(int64(d/(24*time.Hour)), "day")
	case d%time.Hour == 0:
		return unit(int64(d/time.Hour), "hour")
	case d%time.Minute == 0:
		return unit(int64(d/time.Minute), "minute")
	}
	return unit(int64(d/time.Second), "second")
}

// expiryRules sets Retention on the expired ones of rs, the removals of
// message seq.
func expiryRules(ctx context.Context, tx ExpiryTx, seq int64, rs []RemovedDeadLetter) error {
	expired := false
	for _, r := range rs {
		expired = expired || r.How == RemovedExpired
	}
	if !expired {
		return nil
	}
	rules, err := tx.ExpiryRules(ctx, seq)
	if err != nil {
		return fmt.Errorf("expiry rules: %w", err)
	}
	for i := range rs {
		rs[i].Retention = rules[rs[i].ID]
	}
	return nil
}
