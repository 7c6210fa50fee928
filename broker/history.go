package broker

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Dead-letter history bounds: how far a page of history reads.
const (
	// MaxLineage is how many replays back the lineage of a copy is
	// followed (a copy of a copy of ...).
	MaxLineage = 20
	// MaxAttemptsShown is how many failed attempts a history reads, the
	// latest; a queue's retryLimit may allow up to 1000.
	MaxAttemptsShown = 100
	// MaxCopiesShown is how many copies of one message a history reads
	// (one per consumer group at most, unless deletes were restored).
	MaxCopiesShown = 100
)

// Attempt is one failed attempt of a message in a consumer group that
// left it retries: its error as kept (cut to MaxErrorText; ErrorBytes is
// then the size sent, else 0) and when it failed. The last attempt, the
// one that made the dead letter, is the dead letter's own error.
type Attempt struct {
	Attempt    int // 1: the first try
	At         time.Time
	Error      string
	ErrorBytes int
	// Wait is how long the message was held back after this attempt
	// before its retry (Options.RetryWait as the options were at that
	// ack), when WaitKnown; an attempt recorded before migration 0025
	// did not keep it.
	Wait      time.Duration
	WaitKnown bool
	// ConsumerVersion is the version of the consumer that failed it, as
	// its ack said ("" none).
	ConsumerVersion string
}

// MessageRef names a message without its payload: what a history needs
// to say where it is.
type MessageRef struct {
	Seq           int64
	CreatedAt     time.Time
	TransactionID string
	QueueID       int64
	Queue         string
	PartitionID   int64
	Partition     string
	// Removed: retention removed the message; this is what its dead
	// letters (kept or deleted) or its replays kept of it.
	Removed bool
}

// ID is the message's public id.
func (m MessageRef) ID() string { return MessageID(m.CreatedAt, m.Seq) }

// ReplayHop is one step back in a copy's lineage: the copy CopySeq was
// replayed from the message Seq (OriginalID), by Actor at At.
type ReplayHop struct {
	CopySeq    int64
	CopyID     string
	Seq        int64
	OriginalID string // "" when the original message is gone (its queue deleted)
	Queue      string
	GroupID    int64  // an own-group copy: the only group that reads it; 0 every group
	Group      string // its name, "" for every group
	JobID      int64  // 0: a single replay
	Actor      string
	At         time.Time
	Edited     bool
}

// Copy outcomes in a group, as replay_outcomes keeps them (and
// CopyExpired, retention.go).
const (
	CopyPending   = 0
	CopySucceeded = 1
	CopyFailed    = 2
)

// CopyOutcome is how a replayed copy ended in one group whose dead letter
// of the original it replaced: pending, succeeded, or failed again (and
// then whether it is a dead letter of the group now).
type CopyOutcome struct {
	GroupID    int64
	Group      string
	Outcome    int // CopyPending, CopySucceeded or CopyFailed
	SettledAt  time.Time
	DeadLetter bool // the copy is the group's dead letter now
}

// OutcomeName is "pending", "succeeded", "failed" or "expired".
func (o CopyOutcome) OutcomeName() string {
	switch o.Outcome {
	case CopySucceeded:
		return "succeeded"
	case CopyFailed:
		return "failed"
	case CopyExpired:
		return "expired"
	}
	return "pending"
}

// ReplayCopy is a copy made of a message (a replay of its dead letters).
type ReplayCopy struct {
	CopySeq       int64
	CopyID        string
	TransactionID string // the copy's: dlq:<id>, or dlq:<id>:<group> for one group
	GroupID       int64  // an own-group copy: the only group that reads it; 0 every group
	Group         string // its name
	JobID         int64
	Actor         string
	At            time.Time
	Edited        bool
	Outcomes      []CopyOutcome // per group whose dead letter it replaced, by group name
}

// Mode is the copy's replay mode: ReplayEveryGroup or ReplayOwnGroup.
func (c ReplayCopy) Mode() string {
	if c.GroupID != 0 {
		return ReplayOwnGroup
	}
	return ReplayEveryGroup
}

// Outcome returns the copy's outcome in a group, if it replaced that
// group's dead letter.
func (c ReplayCopy) Outcome(groupID int64) (CopyOutcome, bool) {
	for _, o := range c.Outcomes {
		if o.GroupID == groupID {
			return o, true
		}
	}
	return CopyOutcome{}, false
}

// Fate kinds: what became of a message's dead letter in a group.
const (
	FateReplayed = "replayed"
	FateDeleted  = "deleted"
	FateExpired  = "expired" // deadLetterRetentionSeconds removed it
)

// Fate is what became of a message's dead letter in one consumer group
// that is no longer one: the latest of its replays and deletes.
type Fate struct {
	How      string // FateReplayed, FateDeleted or FateExpired
	GroupID  int64
	Group    string
	At       time.Time
	Actor    string
	JobID    int64
	Copy     *ReplayCopy        // FateReplayed: the copy, and its outcome in the group
	Deletion *RemovedDeadLetter // FateDeleted, FateExpired (Deletion.Retention: the rule)
}

// DeadLetterHistory is what a dead letter's page tells of its message: where it
// is, its dead letters now, the failed attempts before the last in one
// group, the lineage back (the message it is a copy of, and so on), the
// copies made of it, its deleted dead letters, and per group whose dead
// letter is gone what became of it.
type DeadLetterHistory struct {
	Message     MessageRef
	DeadLetters []DeadLetter // now, every group's, in filing order
	// ReplayCount counts the message's replays along its dlq: chain, with
	// its queue's cap (at the cap a replay needs force); zero when it is
	// no dead letter now.
	ReplayCount ReplayCount
	// IndexedInPart: the search index holds only part of the words of
	// the dead letters' payload (SearchTx.PayloadIndexedInPart): a search
	// does not find the words past the cut.
	IndexedInPart bool
	// GroupID and Group are those the attempts are of: the group asked
	// for, else that of the first dead letter, else of the latest fate.
	GroupID  int64
	Group    string
	Attempts []Attempt // oldest first; the latest MaxAttemptsShown
	// AttemptsLeftOut is how many earlier attempts were not read.
	AttemptsLeftOut int
	// ReplayOf is the lineage back, nearest first: ReplayOf[0] says which
	// message this one copies, ReplayOf[1] which that one copies...
	ReplayOf []ReplayHop
	// LineageCut: the lineage goes back further than MaxLineage hops.
	LineageCut bool
	Replays    []ReplayCopy        // copies made of this message, oldest first
	Deletions  []RemovedDeadLetter // its deleted dead letters, oldest first (without their error texts)
	// Fates are what became of the dead letters that are gone, by group:
	// only for groups with no dead letter of the message now.
	Fates []Fate
	// Traces are what workers recorded on the message (RecordTrace),
	// oldest first, every group's.
	Traces []Trace
}

// DeadLetter returns the message's dead letter in a group now, if any.
func (h DeadLetterHistory) DeadLetter(groupID int64) (DeadLetter, bool) {
	for _, d := range h.DeadLetters {
		if d.GroupID == groupID {
			return d, true
		}
	}
	return DeadLetter{}, false
}

// Fate returns what became of the message's dead letter in a group, when
// it was one and is gone.
func (h DeadLetterHistory) Fate(groupID int64) (Fate, bool) {
	for _, f := range h.Fates {
		if f.GroupID == groupID {
			return f, true
		}
	}
	return Fate{}, false
}

// Latest is the most recent fate (nil: none).
func (h DeadLetterHistory) Latest() *Fate {
	var out *Fate
	for i := range h.Fates {
		if out == nil || h.Fates[i].At.After(out.At) {
			out = &h.Fates[i]
		}
	}
	return out
}

// HistoryTx is what a dead letter's history needs from storage: its
// failed attempts, its lineage (the dlq: chain) and what became of it.
type HistoryTx interface {
	// InsertAttempt records a failed attempt of message seq in a group,
	// with the wait before its retry (writes attempts; an attempt of the
	// same number is overwritten).
	InsertAttempt(ctx context.Context, seq, groupID int64, a Attempt) error
	// DeleteAttempts forgets the failed attempts of message seq in a
	// group (writes attempts, by its primary key); none: no error.
	DeleteAttempts(ctx context.Context, seq, groupID int64) error
	// Attempts reads the latest limit failed attempts of message seq in
	// a group, oldest first, by attempts' primary key (none: empty).
	Attempts(ctx context.Context, seq, groupID int64, limit int) ([]Attempt, error)
	// MessageRef reads a message without its payload, with its queue's
	// and partition's names (ErrNotFound).
	MessageRef(ctx context.Context, seq int64) (MessageRef, error)
	// Lineage reads the replays a copy descends from, nearest first, up
	// to limit hops, by replays' primary key (not a copy: empty).
	Lineage(ctx context.Context, copySeq int64, limit int) ([]ReplayHop, error)
	// CopiesOf reads up to limit copies made of message seq, oldest
	// first, each with its outcomes per group (replay_outcomes) and
	// whether it is that group's dead letter now; by replays_seq.
	CopiesOf(ctx context.Context, seq int64, limit int) ([]ReplayCopy, error)
	// DeletionsOf reads the deleted dead letters of message seq, oldest
	// first (removed_dead_letters, by removed_dead_letters_seq; none:
	// empty).
	DeletionsOf(ctx context.Context, seq int64) ([]RemovedDeadLetter, error)
}

// DeadLetterHistory reads what a dead letter's page says of a message, by its
// public id, from one snapshot: see the type. group, when set,
// picks the group whose attempts are read. ErrNotFound: the id names no
// message (never pushed, or its queue deleted).
func (b *Broker) DeadLetterHistory(ctx context.Context, messageID, group string) (DeadLetterHistory, error) {
	var h DeadLetterHistory
	ms, seq, ok := ParseMessageID(messageID)
	if !ok {
		return h, errorf(ErrNotFound, "message %q not found", truncate(messageID, 64))
	}
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		h = DeadLetterHistory{}
		if h.Message, err = tx.MessageRef(ctx, seq); isNotFound(err) || (err == nil && h.Message.CreatedAt.UnixMilli() != ms) {
			return errorf(ErrNotFound, "message %q not found", truncate(messageID, 64))
		}
		if err != nil {
			return fmt.Errorf("history: message: %w", err)
		}
		if h.DeadLetters, err = tx.DeadLettersOfMessage(ctx, seq); err != nil {
			return fmt.Errorf("history: dead letters: %w", err)
		}
		if h.ReplayOf, err = tx.Lineage(ctx, seq, MaxLineage+1); err != nil {
			return fmt.Errorf("history: lineage: %w", err)
		}
		if len(h.ReplayOf) > MaxLineage {
			h.ReplayOf, h.LineageCut = h.ReplayOf[:MaxLineage], true
		}
		if h.Replays, err = tx.CopiesOf(ctx, seq, MaxCopiesShown); err != nil {
			return fmt.Errorf("history: copies: %w", err)
		}
		if h.Traces, err = tx.TracesOf(ctx, seq, MaxTracesPerMessage); err != nil {
			return fmt.Errorf("history: traces: %w", err)
		}
		if h.Deletions, err = tx.DeletionsOf(ctx, seq); err != nil {
			return fmt.Errorf("history: removals: %w", err)
		}
		if err := expiryRules(ctx, tx, seq, h.Deletions); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if err := stampExpiry(ctx, tx, h.DeadLetters); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if len(h.DeadLetters) > 0 {
			counts, err := replayCounts(ctx, tx, keysOf(h.DeadLetters[:1]))
			if err != nil {
				return fmt.Errorf("history: replays: %w", err)
			}
			h.ReplayCount = counts[seq]
			h.IndexedInPart = tx.PayloadIndexedInPart(h.DeadLetters[0].Payload)
		}
		h.Fates = fates(h)
		switch {
		case group != "":
			h.Group = group
			h.GroupID, err = tx.GroupID(ctx, group, false)
			if isNotFound(err) {
				return nil // no such group: nothing of it to tell
			}
			if err != nil {
				return fmt.Errorf("history: group: %w", err)
			}
		case len(h.DeadLetters) > 0:
			h.GroupID, h.Group = h.DeadLetters[0].GroupID, h.DeadLetters[0].Group
		case h.Latest() != nil:
			h.GroupID, h.Group = h.Latest().GroupID, h.Latest().Group
		default:
			return nil
		}
		if h.Attempts, err = tx.Attempts(ctx, seq, h.GroupID, MaxAttemptsShown); err != nil {
			return fmt.Errorf("history: attempts: %w", err)
		}
		if len(h.Attempts) > 0 {
			h.AttemptsLeftOut = h.Attempts[0].Attempt - 1
		}
		return nil
	})
	return h, err
}

// fates works out, for each group whose dead letter of the message was
// replayed or deleted and which has none now, the latest of those.
func fates(h DeadLetterHistory) []Fate {
	byGroup := map[int64]Fate{}
	consider := func(f Fate) {
		if _, live := h.DeadLetter(f.GroupID); live {
			return
		}
		if old, ok := byGroup[f.GroupID]; !ok || !f.At.Before(old.At) {
			byGroup[f.GroupID] = f
		}
	}
	for i := range h.Replays {
		c := &h.Replays[i]
		for _, o := range c.Outcomes {
			consider(Fate{How: FateReplayed, GroupID: o.GroupID, Group: o.Group, At: c.At, Actor: c.Actor, JobID: c.JobID, Copy: c})
		}
	}
	for i := range h.Deletions {
		r := &h.Deletions[i]
		if !r.RestoredAt.IsZero() {
			continue // it came back; a later replay or delete says what then
		}
		how := FateDeleted
		if r.How == RemovedExpired {
			how = FateExpired
		}
		consider(Fate{How: how, GroupID: r.DeadLetter.GroupID, Group: r.DeadLetter.Group, At: r.At, Actor: r.Actor, JobID: r.JobID, Deletion: r})
	}
	out := make([]Fate, 0, len(byGroup))
	for _, f := range byGroup {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Fate) int {
		if a.Group < b.Group {
			return -1
		}
		if a.Group > b.Group {
			return 1
		}
		return 0
	})
	return out
}

// MessageQueue names the queue of the message messageID (a public id),
// from its reference alone: what a request limited to some queues checks
// before it reads or changes a message by id (a queue scope). ErrNotFound
// as DeadLetterHistory says it.
func (b *Broker) MessageQueue(ctx context.Context, messageID string) (string, error) {
	ms, seq, ok := ParseMessageID(messageID)
	if !ok {
		return "", errorf(ErrNotFound, "message %q not found", truncate(messageID, 64))
	}
	var queue string
	err := b.store.View(ctx, func(tx Tx) error {
		m, err := tx.MessageRef(ctx, seq)
		if isNotFound(err) || (err == nil && m.CreatedAt.UnixMilli() != ms) {
			return errorf(ErrNotFound, "message %q not found", truncate(messageID, 64))
		}
		queue = m.Queue
		return err
	})
	return queue, err
}
