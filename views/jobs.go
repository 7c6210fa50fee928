package views

import "time"

// JobsList is the Jobs page: bulk replays, deletes and restores, newest
// first.
type JobsList struct {
	Page
	Filter  JobsFilter
	States  []string
	Kinds   []string
	Rows    []JobRow
	NextURL string
}

// JobsFilter is the Jobs page's filter.
type JobsFilter struct {
	State string
	Kind  string
	Queue string
}

// JobRow is a job in the list.
type JobRow struct {
	ID          int64
	URL         string
	Kind        string
	State       string
	Reason      string
	Queue       string
	Description string
	Actor       string
	CreatedAt   time.Time
	Planned     int64
	Done        int64
	Skipped     int64
	Failed      int64
}

// JobPage is a job's page, whole.
type JobPage struct {
	Page
	Job JobDetail
}

// JobDetail is what a job's page and its progress fragment show.
type JobDetail struct {
	ID          int64
	URL         string
	ProgressURL string
	Kind        string // replay, delete, restore
	State       string
	Reason      string
	Queue       string
	QueueURL    string // "" for a job of every queue
	Description string // the frozen scope, in words
	Mode        string // a replay's: "every group" or "own group"
	Actor       string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	FinishedAt  time.Time // zero while running or paused
	Rate        int       // a second; 0 no limit
	Planned     int64
	Done        int64
	Skipped     int64
	Failed      int64
	Left        int64
	// Capped, of a replay: what was at its queue's replay cap
	// (maxReplays): skipped, or with Forced replayed past it.
	Capped int64
	Forced bool
	// ArrivedSince: dead letters of the filter filed after the bound
	// (not touched), once known; -1 until then or for a job by ids.
	ArrivedSince int64
	ByFilter     bool
	// Outcomes of a replay job's copies, per consumer group, and their
	// sum (Totals).
	Outcomes []JobOutcomeRow
	Totals   JobOutcomeRow
	Failures []JobFailureRow
	// FailuresMore: the list shows the most recent failures only.
	FailuresMore bool
	// Poll is the fragment's hx-trigger ("" none): the job's news on the
	// page's event stream (LiveURL), while the job runs and while a
	// finished replay's copies are still pending.
	Poll    string
	LiveURL string
	// What an operator may do now.
	CanPause, CanResume, CanCancel, CanUndo bool
	// UndoUntil: the last of a delete's dead letters can be restored
	// until then (zero: none deleted yet).
	UndoUntil              time.Time
	UndoOf, UndoneBy       int64
	UndoOfURL, UndoneByURL string
	AuditURL               string
	CSRFToken              string
	// Canary is a replay's first step (nil: none): a few drawn at
	// random, replayed, and waited for before the rest.
	Canary *CanaryStep
}

// CanaryStep is a replay job's canary as its page shows it.
type CanaryStep struct {
	Count, SettleSeconds, MaxFailed int
	State                           string // drawn, settling, passed, failed
	Until                           time.Time
	Copies                          []CanaryCopyRow
	Succeeded, Failed, Pending      int
	Reason                          string // why the job paused (failed)
	// Rest is how many the job replays after the canary.
	Rest int64
}

// CanaryCopyRow is one dead letter the canary replayed, and what became
// of its copy.
type CanaryCopyRow struct {
	DeadLetterID  string
	DeadLetterURL string // the dead letter drawn (gone once replayed: its page says where)
	Group         string
	Partition     string
	TransactionID string // the copy's
	CopyURL       string // the copy: its dead letter when it failed again
	Outcome       string // pending, succeeded, failed
	Error         string // the first line of its error, when it failed again
}

// JobOutcomeRow is a replay job's outcome in one consumer group.
type JobOutcomeRow struct {
	Group     string
	Replayed  int64
	Succeeded int64
	Failed    int64
	Expired   int64 // copies retentionSeconds deleted before the group settled them
	Pending   int64
}

// JobFailureRow is a replayed copy that failed again.
type JobFailureRow struct {
	CopyID      string
	URL         string // its dead letter's page; "" when it is no dead letter any more
	Queue       string
	Group       string
	Fingerprint string
	ErrorURL    string // the list of its error group
	Error       string // the first line of its error text
	SettledAt   time.Time
}

// JobStarted is the flash message after a bulk action started a job.
type JobStarted struct {
	ID     int64
	URL    string
	Action string // replay or delete
	Count  int64  // planned, in the action's unit
	Unit   string // "message" or "dead letter"
	Rate   int
	// Queue and Group, when the action replays to one group only.
	Group string
	// UndoURL, for a delete, undoes it (POST): the job is cancelled and
	// what it deleted restored.
	UndoURL string
}

// DeletedOne is the flash message after one dead letter was deleted:
// what was deleted and where to post to undo it.
type DeletedOne struct {
	Text    string
	UndoURL string
}

// BulkGroup is how many dead letters of a consumer group a bulk action
// touches; Capped: at least that many (counted up to a cap).
type BulkGroup struct {
	Group       string
	DeadLetters int64
	Capped      bool
}

// BulkSample is one of the first dead letters a bulk action touches.
type BulkSample struct {
	ID            string
	URL           string
	TransactionID string
	Group         string
	Error         string // its first line
	FailedAt      time.Time
	Now           time.Time // to say how long ago
}
