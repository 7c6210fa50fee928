package broker

import (
	"context"
	"time"
)

// Error groups you own (SPEC section 7): each error group (a fingerprint
// in a queue and consumer group) has a state, an owner, a note, a link,
// the history of its state changes and its funnel (what became of its
// dead letters), kept in error_group_states as the broker works.

// ErrorGroupState is the state of an error group.
type ErrorGroupState string

// The states of an error group.
const (
	// GroupOpen: new, or back (Regressed says it was resolved before).
	GroupOpen ErrorGroupState = "open"
	// GroupAcknowledged: someone (Owner) is on it.
	GroupAcknowledged ErrorGroupState = "acknowledged"
	// GroupResolved: fixed (Note, Version: the consumer version with the
	// fix); a new dead letter, or a replayed copy failing again, opens it
	// again, regressed.
	GroupResolved ErrorGroupState = "resolved"
	// GroupIgnored: not worth acting on, until UntilAt, until the group
	// has filed UntilFiled dead letters in its whole life, or for ever
	// (both zero); it opens again by itself when its condition ends.
	GroupIgnored ErrorGroupState = "ignored"
)

// ErrorGroupStates are the states, in the order the lists sort them by
// (an open group that regressed comes before the other open ones).
var ErrorGroupStates = []ErrorGroupState{GroupOpen, GroupAcknowledged, GroupResolved, GroupIgnored}

// Limits of what a person writes on an error group.
const (
	MaxGroupNote  = 4096 // bytes of the note
	MaxGroupLink  = 2048 // bytes of the link
	MaxGroupOwner = 256  // bytes of the owner
	// MaxUntilCount is the most dead letters an ignore may wait for.
	MaxUntilCount = 1_000_000_000
	// MaxConsumerVersion is the most bytes of an ack's consumerVersion.
	MaxConsumerVersion = 64
	// MaxErrorGroupHistory is the most state changes a group's page and
	// API answer show, newest first.
	MaxErrorGroupHistory = 200
	// ErrorGroupSystemActor is the actor of the changes the broker makes
	// by itself (a regression, the end of an ignore).
	ErrorGroupSystemActor = "lazarus"
)

// Funnel is what became of the dead letters of an error group, over a
// span of time (its whole life, or the last 24 hours or 7 days): each
// count is of events in the span.
type Funnel struct {
	Filed       int64 // dead letters filed into it
	Replayed    int64 // of its dead letters, replayed (each dead letter once)
	Succeeded   int64 // replayed copies that then completed in the group
	FailedAgain int64 // replayed copies that were dead-lettered (or dropped) again
	Deleted     int64 // dead letters deleted (less those restored)
	Expired     int64 // dead letters removed by deadLetterRetentionSeconds (less those restored)
	// Lost is how many replayed copies will never have an outcome: the
	// retention removed the copy before the group settled it, its queue
	// was deleted, or its record was swept (whole life only).
	Lost int64
}

// Add returns f plus d, count by count.
func (f Funnel) Add(d Funnel) Funnel {
	return Funnel{f.Filed + d.Filed, f.Replayed + d.Replayed, f.Succeeded + d.Succeeded,
		f.FailedAgain + d.FailedAgain, f.Deleted + d.Deleted, f.Expired + d.Expired, f.Lost + d.Lost}
}

// Sub returns f minus d, count by count.
func (f Funnel) Sub(d Funnel) Funnel {
	return f.Add(Funnel{-d.Filed, -d.Replayed, -d.Succeeded, -d.FailedAgain, -d.Deleted, -d.Expired, -d.Lost})
}

// Pending is how many replayed copies have not settled yet: Replayed
// less Succeeded, FailedAgain and Lost, meaningful over a group's whole
// life.
func (f Funnel) Pending() int64 { return max(f.Replayed-f.Succeeded-f.FailedAgain-f.Lost, 0) }

// ErrorGroupKey names an error group: by ID (error_group_states.id),
// or by queue, consumer group and fingerprint.
type ErrorGroupKey struct {
	ID          int64
	QueueID     int64
	GroupID     int64
	Fingerprint string
}

// ErrorGroupMark is what the broker learns of a group's row when it
// adds to its funnel: enough to see whether its state must change.
type ErrorGroupMark struct {
	ID         int64
	State      ErrorGroupState
	Regressed  bool
	Filed      int64 // in its whole life, this change included
	UntilAt    time.Time
	UntilFiled int64
}

// OwnedErrorGroup is an error group with its state and funnel.
type OwnedErrorGroup struct {
	ID          int64
	QueueID     int64
	Queue       string
	GroupID     int64
	Group       string
	Fingerprint string

	State     ErrorGroupState
	Regressed bool   // open again after it was resolved
	Owner     string // the user on it
	Note      string // plain text
	Link      string // http or https
	Version   string // the consumer version with the fix (resolved)
	// UntilAt and UntilFiled are an ignore's end: a time, or the
	// group's whole-life Filed count that ends it (zero: none).
	UntilAt    time.Time
	UntilFiled int64
	ChangedAt  time.Time // when the state last changed (zero: never)
	ChangedBy  string

	// DeadLetters is how many of its dead letters there are now.
	DeadLetters int64
	// FirstFiledAt and LastFiledAt span its whole life.
	FirstFiledAt, LastFiledAt time.Time
	// SampleError is the newest error filed (whole, as kept); "" once
	// its dead letters are all gone.
	SampleError string

	// Life, Day and Week are its funnel over its whole life, the last
	// 24 hours and the last 7 days (filled by the group's reads).
	Life, Day, Week Funnel
	// Since is its whole-life funnel when the state last changed:
	// Life.Sub(Since) is what happened in the current state (the
	// evidence of a resolve).
	Since Funnel

	// Versions are the consumer versions its dead letters were filed by,
	// the one last seen first (filled by the broker's reads of groups).
	Versions []ErrorGroupVersion
	// Trend is how many dead letters were filed in each of the last
	// TrendHours hours, oldest first (filled by ErrorGroup).
	Trend []int64
}

// Evidence is what happened to the group's replayed copies in its
// current state: replayed, succeeded and failed again since the state
// began, and pending now.
func (g OwnedErrorGroup) Evidence() (replayed, succeeded, failedAgain, pending int64) {
	d := g.Life.Sub(g.Since)
	return d.Replayed, d.Succeeded, d.FailedAgain, g.Life.Pending()
}

// ErrorGroupVersion is a consumer version that filed dead letters into
// an error group: how many, and when first and last.
type ErrorGroupVersion struct {
	Version             string
	Filed               int64
	FirstSeen, LastSeen time.Time
}

// ErrorGroupChange is one change of an error group's state, as its
// history keeps it.
type ErrorGroupChange struct {
	At    time.Time
	Actor string // a user, a token's name, or ErrorGroupSystemActor
	From  ErrorGroupState
	To    ErrorGroupState
	Why   string // in words: what changed and why (a resolve's evidence, "note set", a regression's cause)
}

// ErrorGroupFilter selects error groups across queues. Empty fields
// select all.
type ErrorGroupFilter struct {
	Queue   string
	Group   string
	State   ErrorGroupState
	Owner   string
	Version string // groups that have filed a dead letter by this version
	Limit   int    // 1..MaxErrorGroups
	// DayOnly leaves the Week funnels zero: a list that shows the last
	// 24 hours reads 24 hourly rows a group, not 168.
	DayOnly bool
	// Scope is the queues the viewer may see: the other queues' groups
	// are as if absent (zero: every queue).
	Scope QueueScope
}

// StateChange is a person's change of an error group's state.
type StateChange struct {
	ID          int64 // the group (error_group_states.id); else Queue, Group, Fingerprint
	Queue       string
	Group       string // "" : every consumer group of the queue with the fingerprint
	Fingerprint string
	State       ErrorGroupState
	// Owner, Note, Link and Version are set when not nil ("" clears);
	// nil keeps what the group has. Acknowledged with no owner makes
	// the actor its owner; Version is the consumer version with the fix
	// (resolved only; the other states clear it).
	Owner      *string
	Note       *string
	Link       *string
	Version    *string
	Until      time.Time // ignored until then
	UntilCount int64     // ignored until this many more dead letters
	Force      bool      // resolve while copies are pending or failed again
	Actor      string
}

// ErrorGroupCount is how many of a queue's error groups are open, and of
// those how many regressed (/metrics, the overview).
type ErrorGroupCount struct {
	Queue           string
	Open, Regressed int64
}

// ErrorGroupQuery selects error groups in storage: zero fields select
// all.
type ErrorGroupQuery struct {
	ID      int64
	QueueID int64
	// QueueIDs, when not nil (and QueueID 0), are the only queues whose
	// groups are read: a queue scope's. Empty: none.
	QueueIDs    []int64
	GroupID     int64
	Fingerprint string
	// Fingerprints, when not nil (with QueueID, and no Fingerprint,
	// State, Owner or Version), are the fingerprints read, each by
	// error_group_states' key, in one statement: the groups come by
	// fingerprint, then consumer group id, Limit in all.
	Fingerprints []string
	State        ErrorGroupState
	Owner        string
	Version      string // groups that filed a dead letter by this consumer version
	Limit        int
}

// ErrorGroupStateTx is what error groups you own need from storage:
// error_group_states (a row a group, made by its first filing and kept
// after its dead letters are gone), its history, and the funnel's hours
// in error_group_hours.
type ErrorGroupStateTx interface {
	// AddErrorGroupFunnel adds d to the whole-life funnel of the group
	// k names (by k.ID, else by its queue, consumer group and
	// fingerprint, making the row when there is none, open, with
	// first_filed_at and last_filed_at at), and its counts other than
	// Filed to the hour at is in (filings' hours are written with the
	// dead letter: InsertDeadLetter). A filing (d.Filed > 0) moves
	// last_filed_at to at when later. It returns the row as it is after;
	// by ID, a row not kept (its queue deleted) is the zero mark. An
	// upsert or an update by key, and an upsert of the hour when d has
	// counts other than Filed.
	AddErrorGroupFunnel(ctx context.Context, k ErrorGroupKey, d Funnel, at time.Time) (ErrorGroupMark, error)
	// ErrorGroupStates returns up to q.Limit groups q selects, with their
	// whole-life funnel and Since, their dead letters now and sample
	// (error_groups), queue and consumer group names: open ones first,
	// regressed first among them, then acknowledged, resolved and
	// ignored, each newest filed first (then by id); of q.Fingerprints,
	// by fingerprint, then consumer group id. It reads
	// error_group_states by its id, or a queue's fingerprints, or along
	// an index in that order (of every queue or of q's), ending at the
	// limit's row; filters other than the queue and state are checked on
	// the rows walked.
	ErrorGroupStates(ctx context.Context, q ErrorGroupQuery) ([]OwnedErrorGroup, error)
	// ErrorGroupWindows fills the Day and Week funnels of gs from the
	// hours at or after dayHour and weekHour (one statement, by the
	// groups' keys: on PostgreSQL their hours from weekHour on; on SQLite
	// their hours from dayHour on, and the week from its days in
	// error_group_days and at most 12 hours at its edge).
	ErrorGroupWindows(ctx context.Context, gs []OwnedErrorGroup, dayHour, weekHour int64) error
	// SetErrorGroupState writes g's state and what goes with it (State,
	// Regressed, Owner, Note, Link, Version, UntilAt, UntilFiled) on its
	// row by g.ID and appends c to its history. A change of state (c.From
	// is not c.To) also writes c.At and c.Actor as the last change and the
	// funnel's counts now as Since; an edit keeps them.
	SetErrorGroupState(ctx context.Context, g OwnedErrorGroup, c ErrorGroupChange) error
	// ErrorGroupHistory returns up to limit changes of the group id,
	// newest first.
	ErrorGroupHistory(ctx context.Context, id int64, limit int) ([]ErrorGroupChange, error)
	// FillErrorGroupVersions sets the Versions of gs (each the one last
	// seen first), in one read of error_group_versions by their keys.
	FillErrorGroupVersions(ctx context.Context, gs []OwnedErrorGroup) error
	// IgnoresEnded returns the ids of up to limit ignored groups whose
	// until_at is at or before now (the index of ignores by time).
	IgnoresEnded(ctx context.Context, now time.Time, limit int) ([]int64, error)
	// ErrorGroupCounts returns, per queue id with any, its open and
	// regressed groups (a read of error_group_states whole).
	ErrorGroupCounts(ctx context.Context) (map[int64][2]int64, error)
}
