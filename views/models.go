package views

import (
	"fmt"
	"time"
)

// Session is who is looking: what the layout needs on every page.
type Session struct {
	User      string
	Role      string
	CSRFToken string
	// CanOperate shows replay and delete controls; IsAdmin the admin pages.
	CanOperate bool
	IsAdmin    bool
}

// Page is what every page's layout needs.
type Page struct {
	Title   string
	Nav     string // the active navigation entry: overview, audit, users
	Session Session
	Flash   *Flash
	Now     time.Time
	// Crumbs lead from the overview to this page.
	Crumbs []Crumb
	// Search is the text in the header's search box: the search shown.
	Search string
	// Version and Commit are the build's (the footer): Commit "" when
	// the build does not say.
	Version, Commit string
	// Maintenance is the banner of maintenance mode, on every page while
	// it holds deliveries (nil: it does not).
	Maintenance *MaintenanceNote
}

// MaintenanceNote says that maintenance mode holds every delivery: the
// scopes that are on (push, pop), who turned each on and since when.
type MaintenanceNote struct {
	Scopes []MaintenanceScope
}

// MaintenanceScope is one scope of maintenance mode that is on.
type MaintenanceScope struct {
	Scope string // push, pop
	By    string
	Since time.Time
}

// Crumb is one step of the breadcrumb trail.
type Crumb struct {
	Label string
	URL   string
}

// Flash is a short message about what just happened.
type Flash struct {
	Kind string // ok, error, info
	Text string
}

// Overview is page 1: every queue at a glance.
type Overview struct {
	Page
	Tiles  []Tile
	Queues []QueueRow
	// SelfURL is this view's URL (its sort, filter and page), which the
	// page refreshes itself from.
	SelfURL string
	// Controls are the queue table's sort, filter and toggle; Pager its
	// pages.
	Controls OverviewControls
	Pager    Pager
	// DemoUntil: the last 24 h (the sparklines, the rates of the tiles)
	// hold synthetic demo history, up to then (DemoNote); zero: none.
	DemoUntil time.Time
	// OpenGroups are the open error groups, regressed first: what
	// needs someone first.
	OpenGroups OpenGroups
}

// Tile is one headline number.
type Tile struct {
	Label  string
	Value  string
	Note   string
	Status string // ok, alert, or empty
	TestID string
	Delta  Delta // against 24 h ago, or the 24 h before
}

// Delta says how a number moved against an earlier one ("▲ 3 vs 24 h
// ago"); Class is worse, better or same, for its colour; Text empty:
// nothing to compare.
type Delta struct {
	Text  string
	Class string
	Title string
}

// OverviewControls are the overview's queue table's sort, name filter
// and hide-empty toggle, as the URL has them.
type OverviewControls struct {
	Action    string // the form's URL
	Sorts     []QuickRange
	Sort      string
	Name      string
	HideEmpty bool
	Matching  string // "4,998 of 5,000 queues" when a filter is set
	ClearURL  string // the view without the filter, "" when none is set
}

// Pager is where a paged table is and the links to its neighbours
// ("" at an end).
type Pager struct {
	Shown      string // "queues 51–100 of 5,000"
	Prev, Next string
	// PastEnd is the first page's URL when this page is past the last
	// (page=99 of 3): "" otherwise.
	PastEnd string
}

// QueueRow is one queue on the overview.
type QueueRow struct {
	Name       string
	URL        string
	DLQURL     string
	Partitions int
	Groups     []GroupDepth
	Depth      int64
	Oldest     string // age of the oldest dead letter, empty when none
	Alerts     []string
	Spark      Sparkline // depth over the last 24 h
	DepthDelta Delta     // dead letters now against 24 h ago
	// FailureRate is the failures among acks of the last 24 h ("–"
	// without acks), FailureDelta against the 24 h before; ReplayRate
	// the replayed copies settled in 24 h that succeeded.
	FailureRate  string
	FailureNote  string
	FailureDelta Delta
	ReplayRate   string
	ReplayNote   string
	// ErrorGroups are the queue's biggest error groups (up to 3), each
	// linking to its dead letters.
	ErrorGroups []TopError
	// Hold is the hold of the whole queue (nil: none).
	Hold *HoldNote
}

// GroupDepth is a group's dead-letter depth in a queue.
type GroupDepth struct {
	Group  string
	Depth  int64
	URL    string
	Oldest string
	Hold   *HoldNote // the group's own hold (nil: none)
}

// QueueDetail is page 2: one queue.
type QueueDetail struct {
	Page
	Name      string
	URL       string // the page's own, the finder's action
	CreatedAt time.Time
	Options   []Option
	// Namespace and Task are the queue's labels (empty: none).
	Namespace string
	Task      string
	// NotEnforced names the options the queue keeps without enforcing
	// (e.g. "priority, maxSize"); empty when none.
	NotEnforced string
	// Partitions are the rows shown: all of them, or for a queue of many
	// (one per customer, say) the first of those whose name starts with
	// Find, by name.
	Partitions      []PartitionRow
	PartitionTotal  int  // partitions of the queue
	PartitionsMatch int  // those whose name starts with Find
	Finder          bool // too many to list: show the finder
	Find            string
	Groups          []GroupRow
	Depth           int64
	DLQURL          string
	// Holds are the holds of the queue and of its groups; HoldForm the
	// Hold dialog's (PostURL "": the visitor may not hold).
	Holds    []HoldNote
	HoldForm HoldForm
}

// Option is a queue option and its value.
type Option struct {
	Name  string
	Value string
	Note  string
}

// PartitionRow is a partition of a queue.
type PartitionRow struct {
	Name     string
	ID       string
	Messages int64
	DLQURL   string
}

// GroupRow is a consumer group of a queue.
type GroupRow struct {
	Name         string
	Lag          int64
	Leased       int64
	Depth        int64
	Oldest       string
	DeadLettered int64
	Replayed     int64
	Deleted      int64
	Dropped      int64
	Expired      int64 // messages retentionSeconds deleted before the group settled them
	DLQURL       string
	Hold         *HoldNote // what holds the group: its own hold, or the queue's (nil: none)
}

// DeadLetterList is page 3: the dead letters of a queue.
type DeadLetterList struct {
	Page
	Queue      string
	QueueURL   string
	Groups     []string
	Partitions []string // the partition filter's choices; nil: a text field (too many to list)
	Filter     DeadLetterFilter
	Chips      []Chip
	// ErrorGroups is the panel of the error groups of the queue and
	// consumer group of the filter; ErrorGroupsScope says whose they are
	// ("queue q", "consumer group g of queue q"), ErrorGroupsNarrower that
	// the list's other filters do not narrow them.
	ErrorGroups         []ErrorGroupRow
	ErrorGroupsScope    string
	ErrorGroupsNarrower bool
	Rows                []DeadLetterRow
	// Matching is how many dead letters the filter selects; MatchingKnown
	// is false when counting would cost a scan (it is then fetched apart).
	Matching      int64
	MatchingKnown bool
	// MatchingIn is set when Matching counts only the matches among the
	// newest MatchingIn dead letters of the other filters (a search read
	// in windows): the count is then no count of the filter's.
	MatchingIn int64
	// Scanned is, when this page read a window of the list in order
	// without filling up, how many dead letters it checked; FromHere is
	// set when that window is not the newest (a page further on).
	Scanned     int64
	FromHere    bool
	CountURL    string
	NextURL     string
	FirstURL    string // set when not on the first page
	ListURL     string // the list's path, without query
	RefreshURL  string // this very view, for refreshing in place
	FilterQuery string // the filter as URL query, without paging
	PageSizes   []PageSize
	QuickRanges []QuickRange
	// SearchNote says what a search left unread (too many matches, a
	// field filter's scan window); empty when it read everything.
	SearchNote string
	// ScanWindow is how many of the newest dead letters a page checks
	// when no index narrows a filter (broker.FieldScan): the form's help
	// says which boxes read that way.
	ScanWindow int64
	// Expiring is set when the queue's dead letters expire
	// (deadLetterRetentionSeconds).
	Expiring *ExpiringNote
	// RestoreFor is how long a delete can be undone ("24 hours").
	RestoreFor string
	// Holds are the holds of the queue and of the filter's group (of
	// every group without one); HoldForm the Hold dialog's.
	Holds    []HoldNote
	HoldForm HoldForm
}

// ExpiringNote says how the list's dead letters expire and how many do
// within ExpiringWithin: Count (More: more than Count), linked (URL) to
// exactly those.
type ExpiringNote struct {
	Retention string // "7 days"
	Within    string // "24 h"
	Count     int64
	More      bool
	Before    time.Time // those expire before this
	URL       string
	Group     string // the consumer group counted ("" every group)
}

// DeadLetterFilter is the list's filter as the form shows it.
type DeadLetterFilter struct {
	Group     string
	Partition string
	Since     string // 1h, 24h, 7d, or empty
	From, To  string // datetime-local values
	Error     string
	TxID      string
	Version   string // the consumer version of the filing ack (version)
	Size      int
	Text      string   // free text in payloads and errors (q)
	Fields    []string // payload field filters (field), as typed
}

// Chip is an active filter with the link that removes it.
type Chip struct {
	Label     string
	RemoveURL string
}

// ErrorGroupRow is one error group in the dead-letter list's panel.
type ErrorGroupRow struct {
	Fingerprint string
	Count       int64
	First, Last time.Time
	Trend       Sparkline // dead letters filed per hour, the last 24 h
	TrendTotal  int64
	Sample      string // the newest full error text
	FilterURL   string // the list filtered by the group
	ReplayURL   string // the bulk confirmations of the group
	DeleteURL   string
	Current     bool // the list is filtered by it
	// Hold is what the row's Hold button holds: the filter's consumer
	// group, or the queue's only one (AnyGroup: the dialog asks).
	Hold HoldTarget
	// Owned are the states of the error group in each consumer group
	// that has it, each linked to its page (SPEC section 7).
	Owned []OwnedLink
}

// OwnedLink is an error group's state badge linked to its page; Group
// names its consumer group when the row sums several.
type OwnedLink struct {
	GroupState
	Group string
	URL   string
}

// TopError is a frequent error text with the link that filters by it.
type TopError struct {
	Error string
	Count int64
	URL   string
}

// PageSize is a page-size choice.
type PageSize struct {
	Size    int
	URL     string
	Current bool
}

// QuickRange is a 1h / 24h / 7d quick pick.
type QuickRange struct {
	Label   string
	URL     string
	Current bool
}

// DeadLetterRow is one row of the list.
type DeadLetterRow struct {
	ID        string
	ShortID   string
	TxID      string
	Partition string
	Group     string
	Error     string // first line only
	ErrorCut  string // "cut at 8 KiB of 23 KiB" when the error was cut to be kept, else ""
	Retries   int
	FailedAt  time.Time
	ExpiresAt time.Time // deadLetterRetentionSeconds expires it then (zero: kept)
	IsReplay  bool
	URL       string // the dead letter's page
	ReplayURL string
	DeleteURL string
}

// DeadLetterDetail is page 4: one dead letter.
type DeadLetterDetail struct {
	Page
	// MaskedPaths: the payload shows these fields of its queue as •••
	// ("" none), RevealRole the role that may reveal them; RevealURL
	// reveals them (a POST) when the viewer may; RevealedPaths: they
	// are shown, revealed (and audited).
	MaskedPaths   string
	RevealRole    string
	RevealURL     string
	RevealedPaths string
	ID            string
	Queue         string
	QueueURL      string
	ListURL       string
	Partition     string
	PartitionID   string
	Group         string
	TxID          string
	TraceID       string
	// ConsumerVersion is the version the filing ack said ("" none), and
	// VersionURL the list of the queue's dead letters of that version.
	ConsumerVersion string
	VersionURL      string
	Error           string
	Retries         int
	PushedAt        time.Time
	FailedAt        time.Time
	// ExpiresAt is when deadLetterRetentionSeconds (Retention, in words)
	// expires it; zero: kept until replayed or deleted.
	ExpiresAt   time.Time
	Retention   string
	IsReplay    bool
	OriginalID  string // for a replay: the id of the message it copies
	OriginalURL string
	Payload     Payload
	FullURL     string // the page with the whole payload, when truncated
	ErrorCut    string // "cut at 8 KiB of 23 KiB" when the error was cut to be kept, else ""
	// IndexedInPart: the search index holds only the first part of the
	// payload's words.
	IndexedInPart bool
	PayloadURL    string // the payload as a download, byte for byte
	ErrorURL      string // the error text as a download
	OtherGroups   []string
	Readers       []string // the groups that read the queue
	// Completed are the groups that completed the message already: the
	// replay to every group asks first, naming them.
	Completed []string
	// SelfURL is this page, which reloads itself in place after an
	// action (a replay, a delete, an undo) to show what is now true.
	SelfURL string
	// RestoreFor is how long a delete can be undone ("24 hours").
	RestoreFor string
	CopyFor    string // the group the message is a copy for alone ("" every group)
	ReplayURL  string
	DeleteURL  string
	History    History // attempts, lineage and earlier replays (deadletter.templ)

	// Replays: how many times the message was replayed along its dlq:
	// chain; MaxReplays its queue's cap (0 none): at it, a replay needs
	// the force box.
	Replays, MaxReplays int

	// KnownIssue is what is known of its error group (nil: nothing: an
	// open group nobody has said anything about).
	KnownIssue *KnownIssue
	// Holds are the holds of the queue and of the dead letter's group;
	// HoldForm the Hold dialog's.
	Holds    []HoldNote
	HoldForm HoldForm
}

// Payload is a message payload ready to show.
type Payload struct {
	Pretty    string // indented when it is JSON; else the raw text
	Raw       string
	IsJSON    bool
	Size      int // bytes
	Truncated bool
	Limit     int  // when Truncated: the bytes shown of each view
	Binary    bool // not valid UTF-8: shown escaped
	// Decoded is set for a payload that is one base64 string (the way
	// binary data travels in JSON), and for one that is not text: its
	// bytes, shown as a hex dump.
	Decoded *DecodedPayload
}

// DecodedPayload is the bytes of a base64 or binary payload: their size
// and a hex dump of them (of the first HexLimit bytes when Cut).
type DecodedPayload struct {
	Base64 bool // decoded from a base64 string; else the raw bytes
	Size   int
	Hex    string
	Cut    bool
}

// BulkConfirm asks before a bulk action.
type BulkConfirm struct {
	Action  string // replay or delete
	MaxRate int    // the highest rate limit a job takes (broker.MaxJobRate)
	// Count is in the action's unit, as its button and its result say:
	// messages for a replay, dead letters for a delete (by ids: the
	// messages named, whose dead letters go).
	Count int64
	// DeadLetters, for a replay by filter: the dead letters that match,
	// of the Count messages (more when several groups dead-lettered one).
	DeadLetters int64
	Queue       string
	Where       string // the filter, for people
	IDs         []string
	Group       string // with IDs: only this group's dead letters
	All         bool   // everything Filter matches, rather than IDs
	Filter      string // the filter as URL query, when All
	Bound       string // with All: the bound of the count, sent back with the action
	PostURL     string
	TypeQueue   bool // the operator must type the queue name (Count above 1,000)
	Error       string
	// Groups says how many dead letters of each consumer group it
	// touches; Sample shows the first few, newest first.
	Groups []BulkGroup
	Sample []BulkSample
	// OwnGroup, for a replay: the filter's group, to name the choice
	// "Replay to billing only" ("" when the filter names none).
	OwnGroup string
	// RestoreFor is how long a delete can be undone ("24 hours").
	RestoreFor string
	// OwnFirst: the view named a group (a filter's, or the selection's),
	// so the replay to that group alone is the default.
	OwnFirst bool
	// Untouched are the groups that read the queue and have none of the
	// dead letters counted: they completed those messages, or have not
	// reached them yet, and a replay to every group has them process the
	// copies again.
	Untouched []string
	// CanaryAsked: the page that opened it offers a replay with a canary
	// (an error group's page), so the canary is ticked whatever the count.
	CanaryAsked bool
}

// Canary defaults, as the bulk replay's confirmation offers them (SPEC
// section 4): on above CanaryAbove dead letters.
const (
	CanaryAbove         = 100
	CanaryCount         = 5
	CanarySettleSeconds = 120
	CanaryMaxFailed     = 0
)

// CanaryOn reports whether the confirmation offers the canary ticked:
// when the page that opened it asked (CanaryAsked), or above CanaryAbove
// dead letters, as it counts them (DeadLetters, for a replay by filter;
// else Count).
func (v BulkConfirm) CanaryOn() bool {
	if v.CanaryAsked {
		return true
	}
	n := v.DeadLetters
	if n == 0 {
		n = v.Count
	}
	return n > CanaryAbove
}

// BulkResult reports a bulk action.
type BulkResult struct {
	Action  string
	Done    int
	Skipped int
	Failed  int
	Error   string
	// ByFilter: the action was by filter; when ArrivedKnown (it ended
	// without an error), ArrivedSince dead letters matching it were filed
	// after its confirmation and left alone.
	ByFilter     bool
	ArrivedKnown bool
	ArrivedSince int64
}

// AuditList is page 6: who did what.
type AuditList struct {
	Page
	Filter  AuditFilter
	Actions []string
	Rows    []AuditRow
	NextURL string
}

// AuditFilter is the audit page's filter.
type AuditFilter struct {
	Action string
	Actor  string
	Queue  string
	// Broker: the broker's own entries are shown too.
	Broker bool
	JobID  int64 // only the entries of this job
}

// AuditRow is one audit entry.
type AuditRow struct {
	At     time.Time
	Actor  string
	Action string
	Queue  string
	Group  string
	Count  int
	Detail string
	JobURL string // the job the entry is of ("" none)
	Broker bool   // an entry of the broker's own stream
}

// Login is the login page.
type Login struct {
	Page
	Name  string
	Next  string
	Error string
	// Expired: the visitor came with a session that has ended, and is
	// told so.
	Expired bool
	// SSOURL and SSOLabel are the single sign-on's link and its text;
	// "" without single sign-on.
	SSOURL, SSOLabel string
}

// Users is the admin page of users and their API tokens.
type Users struct {
	Page
	Users    []UserRow
	Tokens   []TokenRow // every user's
	NewToken string     // the secret of a token just made: shown this once
	Roles    []string
}

// UserRow is a user on the admin page.
type UserRow struct {
	ID        int64
	Name      string
	Role      string
	Queues    string // the queue scope's patterns; "": every queue
	CreatedAt time.Time
	Self      bool
	// SSO: the user logs in through single sign-on, whose claims set the
	// role (a role set here lasts until their next login).
	SSO bool
}

// TokenRow is an API token; it acts with its user's current role.
type TokenRow struct {
	ID       int64
	UserID   int64
	User     string
	Role     string
	Name     string
	Queues   string // the queues it sees (its own and its user's scope); "": every queue
	Created  time.Time
	LastUsed time.Time
}

// ErrorPage explains an error to a person.
type ErrorPage struct {
	Page
	Status  int
	Message string
}

// Charts is page 5: the health of the system over time, for managers.
type Charts struct {
	Page
	Range  string
	Ranges []QuickRange
	Queue  string
	// Suggest are the first queue names the picker suggests (more come
	// as a person types, from SuggestURL); QueueCount counts every queue.
	Suggest    []string
	SuggestURL string
	QueueCount int
	// Missing: no queue is named Queue; Matches are those whose names
	// contain it (up to MaxSuggest), each its charts.
	Missing bool
	Matches []QuickRange
	Charts  []Chart
	// DemoUntil: the range shows synthetic demo history, up to then
	// (DemoNote); zero: none.
	DemoUntil time.Time
}

// ThresholdsForm is the admin page of the monitoring thresholds.
type ThresholdsForm struct {
	Page
	Default   LimitRow
	Overrides []LimitRow
	Queues    []string // queues without an override, for adding one
	Error     string
}

// LimitRow is one set of limits in the form.
type LimitRow struct {
	Queue       string // empty for the defaults
	Depth       string
	OldestHours string
	FailurePct  string
	ReplayPct   string
}

// partitionsShown says which of a queue's many partitions its page lists.
func partitionsShown(v QueueDetail) string {
	shown := len(v.Partitions)
	if v.Find == "" {
		return fmt.Sprintf("The first %s of %s partitions, by name. Find others by the start of their name.", Count(int64(shown)), Count(int64(v.PartitionTotal)))
	}
	switch {
	case v.PartitionsMatch == 0:
		return fmt.Sprintf("No partition's name starts with %q.", v.Find)
	case shown < v.PartitionsMatch:
		return fmt.Sprintf("The first %s of %s partitions whose name starts with %q, by name.", Count(int64(shown)), Count(int64(v.PartitionsMatch)), v.Find)
	}
	return fmt.Sprintf("%s whose name starts with %q.", Plural(int64(shown), "partition", "partitions"), v.Find)
}

// ReplaysText says how many times a dead letter's message was replayed,
// against its queue's cap: "replayed 3 times (cap 5)".
func ReplaysText(n, max int) string {
	t := fmt.Sprintf("replayed %d times", n)
	if n == 1 {
		t = "replayed once"
	}
	if max == 0 {
		return t + " (no cap)"
	}
	return fmt.Sprintf("%s (cap %d)", t, max)
}

// AtReplayCap reports whether a replay of the dead letter needs force.
func (v DeadLetterDetail) AtReplayCap() bool { return v.MaxReplays > 0 && v.Replays >= v.MaxReplays }
