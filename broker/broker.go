// Package broker is the domain of Lazarus: queues, partitions, consumer
// groups, leases, acknowledgements, dead letters and replay.
//
// The rules of ../shared/SPEC.md live here. Storage is behind the Store
// interface, implemented by package db; this package imports only the
// standard library.
package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// QueueModeGroup is the consumer group of pops and acks that name none.
const QueueModeGroup = "__QUEUE_MODE__"

// DefaultPartition is the partition of pushes that name none.
const DefaultPartition = "Default"

// Limits that keep one request from holding the writer for long.
const (
	MaxBatch      = 1000 // messages per pop
	MaxPushItems  = 1000 // items per push call
	MaxAcks       = 1000 // acknowledgements per batch
	MaxPageSize   = 1000 // dead letters per page
	MaxNameLength = 255  // queue, partition and group names
	MaxErrorText  = 8192 // bytes of an ack's error kept with a dead letter
	bulkChunk     = 250  // dead letters per transaction in bulk replays: short, so that other writes wait at most a few ms
	deleteChunk   = 500  // the same for bulk deletes, cheaper a row
	// bulkBytes bounds the payloads a bulk replay copies in one
	// transaction (a chunk holds at least one message, whatever its size):
	// 250 dead letters of 1 MiB would hold other writes up for seconds.
	bulkBytes = 4 << 20
)

// Errors returned by the broker. The web layer maps them to HTTP statuses.
var (
	ErrNotFound  = errors.New("not found")
	ErrInvalid   = errors.New("invalid input")
	ErrConflict  = errors.New("conflict")
	ErrDuplicate = errors.New("duplicate")
	// ErrUnavailable is a store that cannot take the request now: the
	// database is busy or locked by another process past its busy timeout.
	// Nothing was changed; the same request may succeed a moment later.
	ErrUnavailable = errors.New("unavailable")
	// ErrCommitUnknown is a write whose COMMIT was sent but whose answer
	// never came (the connection to the database broke during it): it may
	// or may not have been made. Sending it again is safe where the write
	// is idempotent (a push with the same transactionIds is skipped as a
	// duplicate); an ack sent again may be refused as acked already.
	ErrCommitUnknown = errors.New("commit outcome unknown")
	// ErrTooSlow is a read the store stopped because it ran past the
	// store's time for one, so that it does not hold the server from the writes: nothing was
	// changed; a narrower filter may be answered.
	ErrTooSlow = errors.New("read took too long")
)

// Error is an error with a message that is safe to show to the caller, and a
// kind (one of the Err* sentinels) that decides the status.
type Error struct {
	Kind    error
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap lets errors.Is match the kind.
func (e *Error) Unwrap() error { return e.Kind }

func errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Clock tells the time; tests inject one they move by hand.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// SystemClock is the wall clock.
var SystemClock Clock = ClockFunc(time.Now)

// ValidName reports whether s may name a queue, a partition or a group:
// 1-255 of A-Z a-z 0-9 . _ - (a loop, not a regexp: every push, pop and
// ack checks its names, and the regexp was 2 % of a pop+ack's
// instructions).
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// ValidUserName reports whether s may name a user: as ValidName, and
// '@' and '+' too, so that the e-mail addresses single sign-on providers
// give as user names (Entra's preferred_username) are names.
func ValidUserName(s string) bool {
	return ValidName(strings.Map(func(r rune) rune {
		if r == '@' || r == '+' {
			return '.'
		}
		return r
	}, s))
}

func checkName(what, s string) error {
	if !ValidName(s) {
		return errorf(ErrInvalid, "%s name %q must be 1-255 letters, digits, '.', '_' or '-'", what, truncate(s, 64))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// Options are a queue's settings (SPEC.md section 2).
type Options struct {
	LeaseTime          int  `json:"leaseTime"`          // seconds
	RetryLimit         int  `json:"retryLimit"`         // retries after the first try
	RetryDelay         int  `json:"retryDelay"`         // milliseconds
	DeadLetterQueue    bool `json:"deadLetterQueue"`    // false: keep no dead letters
	DLQAfterMaxRetries bool `json:"dlqAfterMaxRetries"` // false: drop what runs out of retries
	// DelayedProcessing is how long, in seconds, a pushed message waits
	// before it may be delivered; its partition waits with it, for every
	// group (nothing behind it is delivered first).
	DelayedProcessing int `json:"delayedProcessing"`
	// ReplayPausePercent and ReplayPauseWindow: a replay job of the queue
	// pauses itself when more than ReplayPausePercent of the last
	// ReplayPauseWindow copies settled failed again (0: never).
	ReplayPausePercent int `json:"replayPausePercent"`
	ReplayPauseWindow  int `json:"replayPauseWindow"`
	// CompletedRetentionSeconds: a message every group of the queue has
	// settled (completed, dead-lettered, dropped) is deleted this long
	// after its last settlement; 0 keeps it.
	CompletedRetentionSeconds int `json:"completedRetentionSeconds"`
	// RetentionSeconds: any message older than this is deleted, settled or
	// not; those deleted before a group settled them are counted as
	// expired (Stats.Expired). 0: off.
	RetentionSeconds int `json:"retentionSeconds"`
	// DeadLetterRetentionSeconds: a dead letter older than this expires
	// (Stats.DeadLettersExpired); 0 keeps it until replayed or deleted.
	DeadLetterRetentionSeconds int `json:"deadLetterRetentionSeconds"`
	// RetryBackoff and RetryDelayMax: the wait before retry k (k = 1, 2,
	// …) is RetryDelay × RetryBackoff^(k-1), at most RetryDelayMax
	// milliseconds (RetryWait). RetryBackoff 1 is the fixed delay.
	RetryBackoff  float64 `json:"retryBackoff"`
	RetryDelayMax int     `json:"retryDelayMax"`
	// MaxReplays: a dead letter whose message was replayed this many
	// times already (its dlq: chain) is not replayed again unless forced;
	// 0: no cap.
	MaxReplays int `json:"maxReplays"`
	// DeadLetterArchive: with DeadLetterRetentionSeconds, dead letters are
	// written to the archive before they expire.
	DeadLetterArchive bool `json:"deadLetterArchive"`
	// HoldAfterFailures and HoldProbeSeconds are the circuit breaker
	// (SPEC section 6, breaker.go): a consumer group whose tries fail
	// HoldAfterFailures times in a row (acks failed or dlq) holds itself,
	// and one message is let through every HoldProbeSeconds; 0: off.
	HoldAfterFailures int `json:"holdAfterFailures"`
	HoldProbeSeconds  int `json:"holdProbeSeconds"`
	// MaskPaths name the payload fields shown masked (mask.go), and
	// MaskRevealRole the role that may reveal them (operator or admin;
	// "" reads as admin: RevealRole).
	MaskPaths      MaskPaths `json:"-"`
	MaskRevealRole Role      `json:"-"`
	// Kept are Queen's options the queue was given that have no field
	// here (priority, maxSize, …), with the JSON value last given: kept
	// and shown so that nothing is accepted silently. Most are not
	// enforced (NotEnforced); maxWaitTimeSeconds and windowBuffer are
	// (keptEnforced).
	Kept KeptOptions `json:"-"`
}

// KeptOptions are options kept without being enforced: a JSON object of
// name to value, keys sorted, or "" for none. A string, so that Options
// stay comparable and a cached Queue cannot be changed through it.
type KeptOptions string

// Values returns the kept options by name (nil for none).
func (k KeptOptions) Values() map[string]json.RawMessage {
	if k == "" {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(k), &m) != nil {
		return nil
	}
	return m
}

// with returns k with name set to v (compact JSON).
func (k KeptOptions) with(name string, v json.RawMessage) KeptOptions {
	m := k.Values()
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	m[name] = v
	b, _ := json.Marshal(m) // raw values that are valid JSON: cannot fail
	return KeptOptions(b)
}

// without returns k without name.
func (k KeptOptions) without(name string) KeptOptions {
	m := k.Values()
	if _, ok := m[name]; !ok {
		return k
	}
	delete(m, name)
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m) // raw values that are valid JSON: cannot fail
	return KeptOptions(b)
}

// keptEnforced are the options kept as given (in Kept, with Queen's
// others) that Lazarus enforces all the same: not reported as not
// enforced (maxWaitTimeSeconds: MessageRetention; windowBuffer: Window).
var keptEnforced = map[string]bool{"maxWaitTimeSeconds": true, windowBufferOption: true}

// MessageRetention is how long, in seconds, the queue keeps a message
// that is not settled yet (0: for ever): retentionSeconds, or Queen's
// maxWaitTimeSeconds (which evicts messages waiting longer than it) when
// that is set and shorter.
func (o Options) MessageRetention() int {
	r := o.RetentionSeconds
	if o.Kept == "" {
		return r
	}
	var w int
	if v, ok := o.Kept.Values()["maxWaitTimeSeconds"]; ok && json.Unmarshal(v, &w) == nil && w > 0 && (r == 0 || w < r) {
		return w
	}
	return r
}

// NotEnforced lists, sorted, the options o keeps without enforcing them.
func (o Options) NotEnforced() []string {
	m := o.Kept.Values()
	names := make([]string, 0, len(m))
	for k := range m {
		if keptEnforced[k] {
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// MarshalJSON writes the options as the API shows them (SPEC.md section
// 2): the enforced ones in a fixed order, then the kept ones by name with
// the values they were given.
func (o Options) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	field := func(name string, value any) error {
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		buf.Write(k)
		buf.WriteByte(':')
		b, err := json.Marshal(value)
		buf.Write(b)
		return err
	}
	for _, f := range []struct {
		name  string
		value any
	}{
		{"leaseTime", o.LeaseTime}, {"retryLimit", o.RetryLimit}, {"retryDelay", o.RetryDelay},
		{"deadLetterQueue", o.DeadLetterQueue}, {"dlqAfterMaxRetries", o.DLQAfterMaxRetries},
		{"delayedProcessing", o.DelayedProcessing},
		{"replayPausePercent", o.ReplayPausePercent}, {"replayPauseWindow", o.ReplayPauseWindow},
		{"completedRetentionSeconds", o.CompletedRetentionSeconds}, {"retentionSeconds", o.RetentionSeconds},
		{"deadLetterRetentionSeconds", o.DeadLetterRetentionSeconds},
		{"retryBackoff", o.RetryBackoff}, {"retryDelayMax", o.RetryDelayMax}, {"maxReplays", o.MaxReplays},
		{"deadLetterArchive", o.DeadLetterArchive},
		{"holdAfterFailures", o.HoldAfterFailures}, {"holdProbeSeconds", o.HoldProbeSeconds},
		{"maskPaths", o.maskPathList()}, {"maskRevealRole", o.RevealRole()},
	} {
		if err := field(f.name, f.value); err != nil {
			return nil, err
		}
	}
	kept := o.Kept.Values()
	names := make([]string, 0, len(kept))
	for k := range kept {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := field(name, kept[name]); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// RevealRole is the role that may reveal the queue's masked fields:
// MaskRevealRole, admin when unset.
func (o Options) RevealRole() Role {
	if o.MaskRevealRole == "" {
		return RoleAdmin
	}
	return o.MaskRevealRole
}

// MaskedFor reports whether the queue's masked fields stay masked to
// role, which may then neither reveal them nor search or filter on them.
func (o Options) MaskedFor(role Role) bool {
	return o.MaskPaths != "" && !role.Allows(o.RevealRole())
}

// maskPathList is MaskPaths as the API shows them: [] for none.
func (o Options) maskPathList() []string {
	if l := o.MaskPaths.List(); l != nil {
		return l
	}
	return []string{}
}

// Delay is DelayedProcessing as a duration.
func (o Options) Delay() time.Duration { return time.Duration(o.DelayedProcessing) * time.Second }

// DefaultOptions are the options of a queue created by its first push.
func DefaultOptions() Options {
	return Options{LeaseTime: 300, RetryLimit: 3, RetryDelay: 1000, DeadLetterQueue: true, DLQAfterMaxRetries: true,
		ReplayPausePercent: DefaultPausePercent, ReplayPauseWindow: DefaultPauseWindow,
		CompletedRetentionSeconds: DefaultCompletedRetention,
		RetryBackoff:              1, RetryDelayMax: DefaultRetryDelayMax, MaxReplays: DefaultMaxReplays,
		HoldProbeSeconds: DefaultHoldProbeSeconds, MaskRevealRole: RoleAdmin}
}

// DefaultHoldProbeSeconds is holdProbeSeconds's default.
const DefaultHoldProbeSeconds = 30

// The bounds of the circuit breaker's options.
const (
	MaxHoldAfterFailures = 1000000
	MaxHoldProbeSeconds  = 86400
)

// DefaultRetryDelayMax is retryDelayMax's default, in milliseconds: 5
// minutes.
const DefaultRetryDelayMax = 300000

// DefaultMaxReplays is maxReplays's default.
const DefaultMaxReplays = 5

// MaxRetryBackoff is the largest retryBackoff.
const MaxRetryBackoff = 1000

// RetryWait is how long a message waits before its retry k (k = 1 for
// the first retry): RetryDelay × RetryBackoff^(k-1), at most
// RetryDelayMax. The cap bounds the growth only: a RetryDelay above
// RetryDelayMax is waited as it is (so a fixed delay, RetryBackoff 1,
// is RetryDelay whatever RetryDelayMax says).
func (o Options) RetryWait(k int) time.Duration {
	if o.RetryDelay <= 0 {
		return 0 // and no 0 × Inf (a huge power) to make NaN of
	}
	w := float64(o.RetryDelay) * math.Pow(max(o.RetryBackoff, 1), float64(max(k-1, 0)))
	w = min(w, float64(max(o.RetryDelayMax, o.RetryDelay)))
	return time.Duration(w * float64(time.Millisecond))
}

// DefaultCompletedRetention is completedRetentionSeconds's default: 7 days.
const DefaultCompletedRetention = 7 * 24 * 3600

// MaxRetention is the longest retention option, in seconds: 10 years.
const MaxRetention = 10 * 365 * 24 * 3600

// Queue is a named container of partitions.
type Queue struct {
	ID      int64
	Name    string
	Options Options
	// Namespace and Task group queues as Queen's clients name them
	// (configure's top-level fields); empty when not given.
	Namespace string
	Task      string
	CreatedAt time.Time
}

// Partition is an ordered lane of a queue.
type Partition struct {
	ID        int64
	UUID      string // the partitionId of the API
	QueueID   int64
	Name      string
	CreatedAt time.Time
}

// Message is what a producer pushed. Immutable once stored.
type Message struct {
	Seq           int64 // push order, global
	PartitionID   int64
	TransactionID string
	Payload       []byte // JSON, byte-exact as pushed
	TraceID       string
	CreatedAt     time.Time
}

// ID is the message's public id: a UUIDv7 made of its time and sequence.
func (m Message) ID() string { return MessageID(m.CreatedAt, m.Seq) }

// Consumer is the state of one consumer group in one partition.
type Consumer struct {
	PartitionID int64
	GroupID     int64
	QueueID     int64
	Cursor      int64 // seq of the last settled message
	LeaseID     string
	LeaseUntil  time.Time
	LeaseLast   int64 // seq of the last message of the leased batch
	LeasedAt    time.Time
	RetrySeq    int64 // the message whose retries Retries counts
	Retries     int
	AvailableAt time.Time  // the partition waits for this group until then
	Acks        []LeaseAck // acks received for messages not yet at the head
	// The lease that an earlier failure in its batch ended: late acks for
	// the rest of its batch are answered, and change nothing.
	VoidLeaseID string
	VoidLast    int64
}

// LeaseAck is an acknowledgement recorded while earlier messages of the
// same lease are still unacknowledged.
type LeaseAck struct {
	Seq    int64  `json:"seq"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// ErrorBytes is the size of the error as sent, when Error was cut.
	ErrorBytes int `json:"errorBytes,omitempty"`
	// ConsumerVersion is the ack's (Ack.ConsumerVersion).
	ConsumerVersion string `json:"consumerVersion,omitempty"`
}

func (c *Consumer) leaseLive(now time.Time) bool {
	return c.LeaseID != "" && c.LeaseUntil.After(now)
}

func (c *Consumer) clearLease() {
	c.LeaseID, c.LeaseUntil, c.LeaseLast, c.Acks = "", time.Time{}, 0, nil
}

// voidLease ends the lease because a message of its batch failed: the
// messages behind it will be delivered again.
func (c *Consumer) voidLease() {
	c.VoidLeaseID, c.VoidLast = c.LeaseID, c.LeaseLast
	c.clearLease()
}

func (c *Consumer) retriesOf(seq int64) int {
	if c.RetrySeq == seq {
		return c.Retries
	}
	return 0
}

// Start says where a consumer group begins reading a queue it has never read.
type Start struct {
	// From is the zero time for "from the beginning"; otherwise the group
	// starts with the first message pushed at or after From.
	From time.Time
	// Now: start after everything already pushed ("new" / "now").
	Now bool
}

// DeadLetter is a message one consumer group gave up on.
type DeadLetter struct {
	ID           int64 // row id, the keyset tie-breaker
	Seq          int64
	QueueID      int64
	Queue        string
	PartitionID  int64
	Partition    string
	PartitionKey string // the partition's UUID
	GroupID      int64
	Group        string
	Error        string
	// ErrorBytes is the size in bytes of the error text the worker sent
	// when it was cut to MaxErrorText to be kept; 0 when Error is whole.
	ErrorBytes int
	RetryCount int
	FailedAt   time.Time
	// Fingerprint names the error group it is counted in (Fingerprint of
	// Error, stored when it was filed).
	Fingerprint string
	// ConsumerVersion is the version the consumer said it was in the ack
	// that filed it ("" none: SPEC section 7).
	ConsumerVersion string
	// The message, joined.
	TransactionID string
	Payload       []byte
	TraceID       string
	CreatedAt     time.Time
	// ExpiresAt is when its queue's deadLetterRetentionSeconds expires
	// it (zero: it is kept until replayed or deleted); set by the
	// broker's reads of dead letters, not stored.
	ExpiresAt time.Time
}

// MessageID is the dead-lettered message's public id.
func (d DeadLetter) MessageID() string { return MessageID(d.CreatedAt, d.Seq) }

// ErrorCut reports whether the error text was cut to be kept (at
// MaxErrorText), and then how many bytes of the text as sent are kept
// (the "…" that marks the cut not counted) and how many were sent.
func (d DeadLetter) ErrorCut() (kept, sent int, cut bool) {
	if d.ErrorBytes == 0 {
		return 0, 0, false
	}
	return len(strings.TrimSuffix(d.Error, "…")), d.ErrorBytes, true
}

// IsReplay reports whether the message is itself a replayed copy.
func (d DeadLetter) IsReplay() bool { return IsReplayTransaction(d.TransactionID) }

// ReplayPrefix starts the transactionId of every replayed copy.
const ReplayPrefix = "dlq:"

// IsReplayTransaction reports whether a transactionId is a replay's.
func IsReplayTransaction(txid string) bool {
	return len(txid) > len(ReplayPrefix) && txid[:len(ReplayPrefix)] == ReplayPrefix
}

// Stats are running totals per queue and consumer group, kept in the same
// transactions as the events they count.
type Stats struct {
	Depth        int64 // dead letters now
	DeadLettered int64
	Replayed     int64
	Deleted      int64
	Dropped      int64
	Completed    int64 // acks completed (and auto-acked messages)
	Failed       int64 // acks failed
	// Outcomes of replayed copies (transactionId dlq:...) in this group:
	// completed, or dead-lettered again or dropped.
	ReplayCompleted int64
	ReplayFailed    int64
	// Expired: messages retentionSeconds deleted before this group had
	// settled them. DeadLettersExpired: dead letters that
	// deadLetterRetentionSeconds expired.
	Expired            int64
	DeadLettersExpired int64
}

// add returns s + d.
func (s Stats) add(d Stats) Stats {
	return Stats{
		Depth: s.Depth + d.Depth, DeadLettered: s.DeadLettered + d.DeadLettered, Replayed: s.Replayed + d.Replayed,
		Deleted: s.Deleted + d.Deleted, Dropped: s.Dropped + d.Dropped, Completed: s.Completed + d.Completed, Failed: s.Failed + d.Failed,
		ReplayCompleted: s.ReplayCompleted + d.ReplayCompleted, ReplayFailed: s.ReplayFailed + d.ReplayFailed,
		Expired: s.Expired + d.Expired, DeadLettersExpired: s.DeadLettersExpired + d.DeadLettersExpired,
	}
}

// sub returns s - d.
func (s Stats) sub(d Stats) Stats {
	return s.add(Stats{
		Depth: -d.Depth, DeadLettered: -d.DeadLettered, Replayed: -d.Replayed, Deleted: -d.Deleted, Dropped: -d.Dropped,
		Completed: -d.Completed, Failed: -d.Failed, ReplayCompleted: -d.ReplayCompleted, ReplayFailed: -d.ReplayFailed,
		Expired: -d.Expired, DeadLettersExpired: -d.DeadLettersExpired,
	})
}

// GroupStats are a group's stats in one queue.
type GroupStats struct {
	QueueID int64
	GroupID int64
	Group   string
	Stats
	OldestFailedAt time.Time // zero when the group has no dead letters
}

// AuditEntry records who did what.
type AuditEntry struct {
	ID     int64
	At     time.Time
	Actor  string
	Action string // replay, delete, dead_letter, drop, configure, queue_delete, ...
	Queue  string
	Group  string
	Count  int
	Detail string
	JobID  int64 // the job the entry is of (0: none)
	// Broker: an entry of the broker's own stream (dead letters filed,
	// jobs that paused themselves), not of a person's action.
	Broker bool
}

// Audit actions.
const (
	AuditReplay      = "replay"
	AuditDelete      = "delete"
	AuditDeadLetter  = "dead_letter"
	AuditConfigure   = "configure"
	AuditQueueDelete = "queue_delete"
)
