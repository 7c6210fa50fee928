package views

import (
	"net/url"
	"strings"
	"time"
)

// Error groups you own (SPEC section 7, DASHBOARD.md "Owning a
// failure"): the list across queues, a group's page, the state badge
// other pages show beside a group, and the known-issue banner on its
// dead letters.

// GroupState is an error group's state as a badge shows it.
type GroupState struct {
	State     string // open, acknowledged, resolved, ignored
	Regressed bool   // open again after it was resolved
}

// Label is the badge's word: "regressed" for an open group that came
// back, else the state.
func (s GroupState) Label() string {
	if s.State == "open" && s.Regressed {
		return "regressed"
	}
	return s.State
}

// class is the badge's CSS class.
func (s GroupState) class() string {
	c := "badge gstate gstate-" + s.State
	if s.Regressed && s.State == "open" {
		c += " regressed"
	}
	return c
}

// title says the state in a sentence, for the badge's title.
func (s GroupState) title() string {
	switch {
	case s.State == "open" && s.Regressed:
		return "Open again: it was resolved, and failed again since"
	case s.State == "open":
		return "Open: nobody is on it yet"
	case s.State == "acknowledged":
		return "Acknowledged: someone is on it"
	case s.State == "resolved":
		return "Resolved: fixed; a new dead letter opens it again, regressed"
	case s.State == "ignored":
		return "Ignored: not worth acting on, until its condition ends"
	}
	return s.State
}

// SafeLink is link when it is an absolute http or https URL, else "":
// a group's link is written by people, and only those schemes may
// become an href (never javascript: or data:).
func SafeLink(link string) string {
	link = strings.TrimSpace(link)
	if link == "" || strings.ContainsAny(link, " \t\r\n\\") {
		return ""
	}
	u, err := url.Parse(link)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return ""
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return link
	}
	return ""
}

// IgnoreEnd says until when an ignored group stays ignored: "until
// 2 Dec 2026 14:00 UTC", "until 20 more dead letters (at 140 filed)",
// "for ever".
func IgnoreEnd(until time.Time, untilFiled, filed int64) string {
	var parts []string
	if !until.IsZero() {
		parts = append(parts, "until "+Exact(until))
	}
	if untilFiled > 0 {
		more := max(untilFiled-filed, 0)
		parts = append(parts, "until "+Plural(more, "more dead letter", "more dead letters")+" ("+Count(untilFiled)+" filed in all)")
	}
	if len(parts) == 0 {
		return "for ever"
	}
	return strings.Join(parts, ", or ")
}

// OwnedGroupRow is an error group in the list across queues (and on the
// overview).
type OwnedGroupRow struct {
	GroupState
	ID          int64
	URL         string // its page
	Queue       string
	QueueURL    string
	Group       string // the consumer group
	Fingerprint string
	Sample      string // the newest error, cut
	DeadLetters int64  // now
	FiledDay    int64  // filed in the last 24 hours
	Owner       string
	NoteLine    string // the note's first line, cut
	Link        string // SafeLink'd: "" when none or not http(s)
	IgnoreEnd   string // ignored: until when
	LastSeen    time.Time
}

// ErrorGroupsFilter is the list's filter as the URL carries it.
type ErrorGroupsFilter struct {
	Queue, Group, State, Owner, Version string
}

// ErrorGroupsList is the page of error groups across queues.
type ErrorGroupsList struct {
	Page
	Filter  ErrorGroupsFilter
	States  []string
	ListURL string
	Chips   []Chip
	Rows    []OwnedGroupRow
	// Limit is how many the page shows at most: Full says it showed that
	// many, and there may be more.
	Limit int
	Full  bool
}

// FunnelRow is one line of a group's funnel: a count over its whole
// life, the last 24 hours and the last 7 days.
type FunnelRow struct {
	Key, Label, Help string
	Life, Day, Week  int64
	LifeOnly         bool // pending: meaningful over the whole life only
}

// GroupVersion is a consumer version that filed dead letters into the
// group.
type GroupVersion struct {
	Version             string
	Filed               int64
	FirstSeen, LastSeen time.Time
}

// GroupChange is a line of the group's history.
type GroupChange struct {
	At       time.Time
	Actor    string
	From, To GroupState
	Why      string
}

// Evidence is what a resolve is judged by: what the group's replayed
// copies did since its state began.
type Evidence struct {
	Replayed, Succeeded, FailedAgain, Pending int64
	Since                                     time.Time // zero: its whole life
}

// Text says the evidence: "12 replayed, 12 succeeded, 0 failed again,
// 0 pending since 2 Dec 2026 14:00 UTC".
func (e Evidence) Text() string {
	s := Count(e.Replayed) + " replayed, " + Count(e.Succeeded) + " succeeded, " + Count(e.FailedAgain) + " failed again, " + Count(e.Pending) + " pending"
	if e.Since.IsZero() {
		return s + " in its whole life"
	}
	return s + " since " + Exact(e.Since)
}

// Proven reports whether the evidence lets a resolve through without
// force: nothing pending, nothing failed again.
func (e Evidence) Proven() bool { return e.Pending == 0 && e.FailedAgain == 0 }

// ErrorGroupDetail is the page of one error group.
type ErrorGroupDetail struct {
	Page
	GroupState
	ID          int64
	Queue       string
	QueueURL    string
	Group       string
	Fingerprint string
	Sample      string
	Owner       string
	Note        string
	Link        string // SafeLink'd
	LinkRaw     string // as written, shown as text when it is not a safe link
	Version     string
	IgnoreEnd   string
	ChangedAt   time.Time
	ChangedBy   string
	DeadLetters int64
	FirstSeen   time.Time
	LastSeen    time.Time
	Funnel      []FunnelRow
	Evidence    Evidence
	Versions    []GroupVersion
	Trend       Sparkline
	TrendTotal  int64
	History     []GroupChange
	// DeadLettersURL is the dead-letter list filtered by its queue,
	// consumer group and fingerprint.
	DeadLettersURL string
	SelfURL        string

	// The operators' actions (PostURL "" for viewers): each form posts
	// its state there.
	PostURL   string
	CSRFToken string
	Me        string // the signed-in user: Acknowledge's default owner
	// Refused is a refused resolve's reason: the page offers Force,
	// with what was typed (RefusedNote, RefusedVersion).
	Refused                     string
	RefusedNote, RefusedVersion string
	// ReplayURL opens the bulk replay's confirmation of its dead letters,
	// with the canary ticked; Hold, the hold dialog for its consumer
	// group.
	ReplayURL string
	Hold      HoldTarget
	HoldForm  HoldForm
	Holds     []HoldNote
}

// KnownIssue is the banner on a dead letter whose error group someone
// has said something about (an owner, a note, a link), or that is not
// open: support reads it there.
type KnownIssue struct {
	GroupState
	URL       string // the group's page
	NoteLine  string
	Link      string // SafeLink'd
	Owner     string
	IgnoreEnd string
}

// OpenGroups is the overview's panel of open error groups: how many,
// how many regressed, and the first few (regressed first).
type OpenGroups struct {
	Open, Regressed int64
	Rows            []OwnedGroupRow
	URL             string // the list of open groups
}
