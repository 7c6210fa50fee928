package broker

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// DLQQuery selects dead letters by name; the zero value selects all.
type DLQQuery struct {
	Queue         string
	Group         string
	Partition     string
	From, To      time.Time // failedAt range, To exclusive
	ErrorContains string
	TransactionID string
	// Fingerprint selects one error group of Queue (Fingerprint): it
	// needs Queue.
	Fingerprint string
	// ConsumerVersion selects the dead letters filed by an ack of this
	// consumer version (Ack.ConsumerVersion).
	ConsumerVersion string
	// Text is free text searched in payloads and error texts (TextMatch);
	// Fields are filters on payload fields (ParseFieldFilter), all met.
	Text      string
	Fields    []string
	Limit     int
	Offset    int
	After     *Cursor // keyset: rows older than this; Offset is then ignored
	WithTotal bool
	// AllQueues: a bulk action by filter with no Queue acts on the dead
	// letters of every queue; without it, such an action is refused
	// (ErrInvalid). Lists ignore it.
	AllQueues bool
	// Bound: a bulk action by filter acts only on the dead letters at or
	// below it (CountMatching's); nil takes one as the action starts.
	// Lists ignore it.
	Bound *Bound
	// Scope is the queues the request may see (its principal's): a dead
	// letter of another queue is as if absent, and a Queue out of it
	// matches nothing. The zero scope is every queue. A bulk job keeps
	// the scope of the request that made it.
	Scope QueueScope
}

// DLQPage is a page of dead letters, newest failure first.
type DLQPage struct {
	Items []DeadLetter
	Total int64   // when asked for
	Next  *Cursor // the keyset position after the last item; nil on the last page
	// TotalCapped: there may be more than Total (Triage counts no
	// further, or TotalIn).
	TotalCapped bool
	// TotalIn is set when a search read in windows (Window) counted its
	// matches in the newest TotalIn dead letters of the other filters
	// only (FieldScan), and there are more below: Total is then the
	// window's, TotalCapped is set, and the pages go on (Next).
	TotalIn int
	// MatchCapped: the free text or a field filter's words match more
	// than MatchCap entries of the index; only the newest were searched.
	MatchCapped bool
	// Scanned is, when a field filter the index cannot narrow made the
	// page read a window of the newest dead letters (FieldScan) without
	// filling up, how many it read; Next then goes on below the window.
	Scanned int
	// Window is set when the search read a window of the list in order
	// (common words, or a field filter the index cannot narrow): the
	// page and Total are complete for the window only.
	Window *SearchWindow
}

// Describe names the query's filters for people (audit, confirmations).
func (q DLQQuery) Describe() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, fmt.Sprintf("%s=%q", k, truncate(v, 64)))
		}
	}
	add("queue", q.Queue)
	add("group", q.Group)
	add("partition", q.Partition)
	if !q.From.IsZero() {
		add("from", q.From.UTC().Format(time.RFC3339))
	}
	if !q.To.IsZero() {
		add("to", q.To.UTC().Format(time.RFC3339))
	}
	add("error", q.ErrorContains)
	add("transactionId", q.TransactionID)
	add("fingerprint", q.Fingerprint)
	add("consumerVersion", q.ConsumerVersion)
	add("text", q.Text)
	for _, f := range q.Fields {
		add("field", f)
	}
	if len(parts) == 0 {
		return "all dead letters"
	}
	return strings.Join(parts, " ")
}

func (q *DLQQuery) validate() error {
	if q.Limit == 0 {
		q.Limit = 100
	}
	if q.Limit < 1 || q.Limit > MaxPageSize {
		return errorf(ErrInvalid, "limit must be between 1 and %d", MaxPageSize)
	}
	if q.Offset < 0 {
		return errorf(ErrInvalid, "offset must not be negative")
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.To.After(q.From) {
		return errorf(ErrInvalid, "to must be after from")
	}
	if len(q.ErrorContains) > 1024 || len(q.TransactionID) > MaxNameLength || len(q.Fingerprint) > 4*MaxFingerprint {
		return errorf(ErrInvalid, "filter text is too long")
	}
	if len(q.ConsumerVersion) > MaxConsumerVersion {
		return errorf(ErrInvalid, "consumerVersion is at most %d bytes", MaxConsumerVersion)
	}
	if q.Fingerprint != "" && q.Queue == "" {
		return errorf(ErrInvalid, "fingerprint needs queue")
	}
	return q.parseSearch(&Filter{})
}

// filter resolves names to ids. ok is false when a named thing does not
// exist, so nothing can match.
func (q DLQQuery) filter(ctx context.Context, tx partitionQueueSubscriptionTx) (f Filter, ok bool, err error) {
	f = Filter{From: q.From, To: q.To, ErrorContains: q.ErrorContains, TransactionID: q.TransactionID, Fingerprint: q.Fingerprint,
		ConsumerVersion: q.ConsumerVersion}
	if err := q.parseSearch(&f); err != nil {
		return f, false, err
	}
	if q.Queue != "" {
		if !q.Scope.Allows(q.Queue) {
			return f, false, nil
		}
		qu, err := tx.QueueByName(ctx, q.Queue)
		if isNotFound(err) {
			return f, false, nil
		}
		if err != nil {
			return f, false, err
		}
		f.QueueID = qu.ID
		if q.Partition != "" {
			p, err := tx.PartitionByName(ctx, qu.ID, q.Partition)
			if isNotFound(err) {
				return f, false, nil
			}
			if err != nil {
				return f, false, err
			}
			f.PartitionID = p.ID
		}
	} else if q.Partition != "" {
		return f, false, errorf(ErrInvalid, "partition needs queue")
	} else {
		ids, all, err := scopeQueueIDs(ctx, tx, q.Scope)
		if err != nil {
			return f, false, err
		}
		if !all && len(ids) == 0 {
			return f, false, nil
		}
		f.QueueIDs = ids
	}
	if q.Group != "" {
		gid, err := tx.GroupID(ctx, q.Group, false)
		if isNotFound(err) {
			return f, false, nil
		}
		if err != nil {
			return f, false, err
		}
		f.GroupID = gid
	}
	return f, true, nil
}

// DeadLetters lists dead letters, newest failure first.
func (b *Broker) DeadLetters(ctx context.Context, q DLQQuery) (DLQPage, error) {
	if err := q.validate(); err != nil {
		return DLQPage{}, err
	}
	var page DLQPage
	err := b.store.View(ctx, func(tx Tx) error {
		f, ok, err := q.filter(ctx, tx)
		if err != nil || !ok {
			return err
		}
		capped, err := narrow(ctx, tx, &f, q.After)
		if err != nil {
			return err
		}
		page, err = deadLetterPage(ctx, tx, f, q)
		page.MatchCapped = capped
		if err != nil {
			return err
		}
		return stampExpiry(ctx, tx, page.Items)
	})
	return page, err
}

// DeadLetterDetail is one dead letter of a message, and the message's dead
// letters in the other groups.
type DeadLetterDetail struct {
	DeadLetter
	Others []DeadLetter
	// CopyFor names the group the message was replayed to alone, when it
	// is such a copy: a replay of it goes to that group only.
	CopyFor string
	// Replays counts the message's replays along its dlq: chain, with its
	// queue's cap: at the cap, a replay needs force.
	Replays ReplayCount
}

// DeadLetter returns the dead letters of a message by its public id; group,
// when set, picks that group's.
func (b *Broker) DeadLetter(ctx context.Context, messageID, group string) (DeadLetterDetail, error) {
	var out DeadLetterDetail
	err := b.store.View(ctx, func(tx Tx) error {
		dls, err := deadLettersOf(ctx, tx, messageID)
		if err != nil {
			return err
		}
		i := 0
		if group != "" {
			i = -1
			for j, d := range dls {
				if d.Group == group {
					i = j
				}
			}
			if i < 0 {
				return errorf(ErrNotFound, "no dead letter of message %s in consumer group %q", messageID, truncate(group, 64))
			}
		}
		if err := stampExpiry(ctx, tx, dls); err != nil {
			return err
		}
		out.DeadLetter = dls[i]
		out.Others = append(append([]DeadLetter{}, dls[:i]...), dls[i+1:]...)
		counts, err := replayCounts(ctx, tx, keysOf(dls[i:i+1]))
		if err != nil {
			return err
		}
		out.Replays = counts[out.Seq]
		only, err := tx.CopyGroups(ctx, []int64{out.Seq})
		if err != nil {
			return fmt.Errorf("copy for one group: %w", err)
		}
		if gid := only[out.Seq]; gid != 0 {
			if out.CopyFor, err = tx.GroupName(ctx, gid); err != nil {
				return fmt.Errorf("copy for one group: %w", err)
			}
		}
		return nil
	})
	return out, err
}

func deadLettersOf(ctx context.Context, tx DeadLetterTx, messageID string) ([]DeadLetter, error) {
	ms, seq, ok := ParseMessageID(messageID)
	if !ok {
		return nil, errorf(ErrNotFound, "dead letter %q not found", truncate(messageID, 64))
	}
	dls, err := tx.DeadLettersOfMessage(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("dead letters of message: %w", err)
	}
	if len(dls) == 0 || dls[0].CreatedAt.UnixMilli() != ms {
		return nil, errorf(ErrNotFound, "dead letter %q not found", truncate(messageID, 64))
	}
	return dls, nil
}

// ReplayResult describes the copy a replay pushed.
type ReplayResult struct {
	Status        string // StatusQueued, or StatusDuplicate when a copy was already there
	MessageID     string // the copy's id
	TransactionID string // dlq:<original id>
	// PartitionID, Queue and Partition are where the copy is: the
	// message's own partition, or the replay's destination.
	PartitionID string
	Queue       string
	Partition   string
	Groups      []string // the groups whose dead letters it removed
	// DeadLetterID is the id of the message whose dead letters were
	// replayed (the API's dlqId), with its transactionId. ReplayTransactionWith
	// sets it also when it finds no dead letter (ErrNotFound) but knows
	// the message it looked for.
	DeadLetterID          string
	OriginalTransactionID string
	// Elsewhere: the copy went to a destination, not to the message's own
	// partition (FromQueue, FromPartition).
	Elsewhere     bool
	FromQueue     string
	FromPartition string
}

// The verdicts of a replay (Queen 1.6's "result"): ReplayMoved, a copy
// was made now; ReplayDuplicate, the copy was there already and nothing
// new was made; ReplayGone, there was no such dead letter (any more:
// replayed, deleted or expired), the replay's ErrNotFound. Every replay
// answer says one, single or bulk, in the API, the CLI and the tools.
const (
	ReplayMoved     = "moved"
	ReplayDuplicate = "duplicate"
	ReplayGone      = "gone"
)

// Verdict is what the replay that gave r did: ReplayMoved or
// ReplayDuplicate (a replay that found nothing gives no result but
// ErrNotFound: ReplayGone).
func (r ReplayResult) Verdict() string {
	if r.Status == StatusDuplicate {
		return ReplayDuplicate
	}
	return ReplayMoved
}

// Replay pushes a copy of a dead-lettered message to the end of its
// partition and removes the message's dead letters in every group, in one
// transaction. A second replay finds nothing (ErrNotFound).
func (b *Broker) Replay(ctx context.Context, messageID, actor string) (ReplayResult, error) {
	return b.ReplayWith(ctx, messageID, ReplayOptions{Actor: actor})
}

// ReplayOptions say how a dead letter is replayed.
type ReplayOptions struct {
	Actor string
	// Mode is ReplayEveryGroup (the default) or ReplayOwnGroup.
	Mode string
	// Group, with ReplayOwnGroup, replays only that group's dead letter
	// of the message (empty: each group's, each to its own group).
	Group string
	// Payload, when set, is the copy's payload, edited by an operator:
	// valid JSON (the caller checks its size). The copy is marked as
	// edited, and both versions are kept.
	Payload []byte
	// Force replays a message that has been replayed its queue's
	// maxReplays times already (ErrConflict without it); the audit says
	// it was forced.
	Force bool
	// Destination, when set, is where the copy goes instead of the
	// message's own partition (made when missing); audited with it.
	Destination *Destination
}

func (o ReplayOptions) validate() error {
	if o.Destination != nil {
		if err := o.Destination.validate(); err != nil {
			return err
		}
	}
	switch o.Mode {
	case ReplayEveryGroup, ReplayOwnGroup:
	default:
		return errorf(ErrInvalid, "mode must be %q (every group) or %q (only the group that gave up on it)", "every", ReplayOwnGroup)
	}
	if o.Group != "" && o.Mode != ReplayOwnGroup {
		return errorf(ErrInvalid, "a consumer group goes with mode %q: a replay to every group replays the message for all of them", ReplayOwnGroup)
	}
	if o.Payload != nil && !json.Valid(o.Payload) {
		return errorf(ErrInvalid, "the edited payload is not valid JSON")
	}
	return nil
}

// ReplayWith replays a dead-lettered message as o says: to every group
// (its dead letters in every group go), or to the group that gave up on
// it only (ReplayOwnGroup: that group's dead letter goes, the other
// groups pass the copy by and keep theirs), with an edited payload when
// o.Payload is set. A replay finds nothing to replay a second time
// (ErrNotFound). A message replayed its queue's maxReplays times already
// (its dlq: chain) is refused (ErrConflict, saying so) and nothing
// changes, unless o.Force: then the audit says it was forced.
func (b *Broker) ReplayWith(ctx context.Context, messageID string, o ReplayOptions) (ReplayResult, error) {
	if err := o.validate(); err != nil {
		return ReplayResult{}, err
	}
	var res ReplayResult
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		dls, err := deadLettersOf(ctx, tx, messageID)
		if err != nil {
			return err
		}
		if o.Group != "" {
			if dls = onlyGroup(dls, o.Group); len(dls) == 0 {
				return errorf(ErrNotFound, "no dead letter of message %s in consumer group %q", messageID, truncate(o.Group, 64))
			}
		}
		counts, err := replayCounts(ctx, tx, keysOf(dls[:1]))
		if err != nil {
			return err
		}
		count := counts[dls[0].Seq]
		if count.AtCap() && !o.Force {
			return errorf(ErrConflict, "message %s was %s: replay it with force to replay it again", messageID, count.Reason())
		}
		spec := replaySpec{by: ReplayBy{Actor: o.Actor}, mode: o.Mode, payload: o.Payload, dest: newDestinations(o.Destination, now, touched)}
		if res, err = replay(ctx, tx, now, dls, spec); err != nil {
			return err
		}
		touched(res.Queue)
		if res.Elsewhere {
			touched(res.FromQueue) // its dead letters went
		}
		action, detail := AuditReplay, fmt.Sprintf("message %s replayed as %s (%s)", messageID, res.MessageID, res.Status)
		if res.Elsewhere {
			detail += fmt.Sprintf(", to queue %q partition %q (from queue %q partition %q)", truncate(res.Queue, 64), truncate(res.Partition, 64),
				truncate(res.FromQueue, 64), truncate(res.FromPartition, 64))
		}
		if o.Mode == ReplayOwnGroup {
			detail += ", to its own group only"
		}
		if o.Payload != nil {
			action = AuditEditReplay
			orig := dls[0].Payload
			detail += fmt.Sprintf("; payload edited: original %s, edited %s (both kept with the copy)", payloadDigest(orig), payloadDigest(o.Payload))
		}
		if count.AtCap() {
			detail += "; forced past the replay cap: " + count.Reason()
		}
		return audit(ctx, tx, now, o.Actor, action, res.Queue, strings.Join(res.Groups, ","), 1, detail)
	})
	return res, err
}

// payloadDigest names a payload in the audit without its content: its
// size and a short hash.
func payloadDigest(p []byte) string {
	h := sha256.Sum256(p)
	return fmt.Sprintf("%d bytes sha256:%x", len(p), h[:6])
}

// ReplayTransaction replays the dead-lettered message named by its
// partition's UUID and its transactionId (ReplayTransactionWith).
func (b *Broker) ReplayTransaction(ctx context.Context, partitionUUID, txid, actor string) (ReplayResult, error) {
	return b.ReplayTransactionWith(ctx, partitionUUID, txid, ReplayOptions{Actor: actor})
}

// ReplayTransactionWith replays, as o says (ReplayWith), the
// dead-lettered message named by its partition's UUID and its
// transactionId: the message kept with that transactionId when it has a
// dead letter, else the newest dead letter with it. Retention may have
// removed the dead letter's message, and past the deduplication window a
// new push may have taken its transactionId (a message that is no dead
// letter): the dead letters keep their transactionId (by its index).
// With ErrNotFound, the result's DeadLetterID is the message it looked
// for when there is one (its dead letters are gone: replayed, deleted or
// expired).
func (b *Broker) ReplayTransactionWith(ctx context.Context, partitionUUID, txid string, o ReplayOptions) (ReplayResult, error) {
	id, _, err := b.transactionMessage(ctx, partitionUUID, txid)
	if err != nil {
		return ReplayResult{}, err
	}
	res, err := b.ReplayWith(ctx, id, o)
	if err != nil {
		return ReplayResult{DeadLetterID: id, OriginalTransactionID: txid}, err
	}
	return res, nil
}

// transactionMessage returns the id of the message of
// ReplayTransactionWith, and whether the partition keeps a message with
// the transactionId.
func (b *Broker) transactionMessage(ctx context.Context, partitionUUID, txid string) (id string, kept bool, err error) {
	err = b.store.View(ctx, func(tx Tx) error {
		id, kept = "", false
		p, err := tx.PartitionByUUID(ctx, partitionUUID)
		if isNotFound(err) {
			return errorf(ErrNotFound, "partition %q not found", truncate(partitionUUID, 64))
		}
		if err != nil {
			return err
		}
		m, err := tx.MessageByTransaction(ctx, p.ID, txid)
		if err != nil && !isNotFound(err) {
			return err
		}
		if err == nil {
			id, kept = m.ID(), true
			own, err := tx.DeadLettersOfMessage(ctx, m.Seq)
			if err != nil || len(own) > 0 {
				return err
			}
		}
		dls, err := tx.ListDeadLetters(ctx, Filter{QueueID: p.QueueID, PartitionID: p.ID, TransactionID: txid}, Page{Limit: 1})
		if err != nil {
			return err
		}
		if len(dls) > 0 {
			id = dls[0].MessageID()
		}
		if id == "" {
			return errorf(ErrNotFound, "message %q not found in partition %q", truncate(txid, 64), p.Name)
		}
		// A kept message with no dead letter anywhere: ReplayWith says so.
		return nil
	})
	return id, kept, err
}

// replaySpec is how replayKeys replays: by whom, for which job, to
// which groups, with which payload.
type replaySpec struct {
	by      ReplayBy
	mode    string
	payload []byte
	dest    *destinations // nil: each copy to its message's own partition
}

// replayWriteTx is what a replay reads and writes: the dead letters and
// their error groups, the copies (messages, partitions, passes) it
// pushes, and the counts it moves.
type replayWriteTx interface {
	DeadLetterTx
	ErrorGroupStateTx
	GroupTx
	PartitionTx
	PassTx
	QueueTx
	ReplayTx
	StatsTx
	SubscriptionTx
}

// replay pushes the copy of the message whose dead letters dls are (at
// least one) and removes them; with ReplayOwnGroup one copy a group.
func replay(ctx context.Context, tx replayWriteTx, now time.Time, dls []DeadLetter, spec replaySpec) (ReplayResult, error) {
	copies, err := replayKeys(ctx, tx, now, keysOf(dls), spec)
	if err != nil {
		return ReplayResult{}, err
	}
	d, c := dls[0], copies[0]
	res := ReplayResult{Status: StatusQueued, MessageID: MessageID(c.CopyCreatedAt, c.CopySeq), TransactionID: c.TransactionID,
		PartitionID: d.PartitionKey, Queue: d.Queue, Partition: d.Partition, DeadLetterID: d.MessageID(), OriginalTransactionID: d.TransactionID,
		FromQueue: d.Queue, FromPartition: d.Partition}
	if spec.dest != nil && c.PartitionID != d.PartitionID {
		t := spec.dest.byID[c.PartitionID]
		res.PartitionID, res.Queue, res.Partition, res.Elsewhere = t.UUID, t.Queue, t.Name, true
	}
	for _, c := range copies {
		if !c.Inserted {
			res.Status = StatusDuplicate
		}
	}
	for _, x := range dls {
		res.Groups = append(res.Groups, x.Group)
	}
	return res, nil
}

// OwnGroupTransaction is the transactionId of a copy of message id
// replayed to group only (ReplayOwnGroup).
func OwnGroupTransaction(id, group string) string { return ReplayPrefix + id + ":" + group }

// replayKeys replays the messages whose dead letters keys are: to every
// group (all of each message's dead letters, in every group, must be in
// keys), one copy a message pushed to the end of its partition (or of
// the partition spec.dest gives it) in the order the messages first
// appear in keys; or, with ReplayOwnGroup, one
// copy a dead letter, read by its group only. The dead letters are
// removed, and each group that had dead-lettered a message is to learn
// its copy's outcome. A dead letter of a copy that was itself replayed to
// one group only is replayed to that group only.
func replayKeys(ctx context.Context, tx replayWriteTx, now time.Time, keys []DeadLetterKey, spec replaySpec) ([]Copy, error) {
	// A dead letter of a copy that was replayed to one group only is
	// replayed to that group only, whatever the mode: the other groups
	// passed the original copy by, and would else get its payload again.
	seqs := make([]int64, 0, len(keys))
	for _, k := range keys {
		seqs = append(seqs, k.Seq)
	}
	oneGroup, err := tx.CopyGroups(ctx, seqs)
	if err != nil {
		return nil, fmt.Errorf("replay: copies for one group: %w", err)
	}
	own := func(k DeadLetterKey) bool { return spec.mode == ReplayOwnGroup || oneGroup[k.Seq] != 0 }
	var copies []Copy
	index := map[[2]int64]int{}
	names := map[int64]string{}
	for _, k := range keys {
		id := MessageID(k.CreatedAt, k.Seq)
		key, c := [2]int64{k.Seq, 0}, Copy{Seq: k.Seq, PartitionID: k.PartitionID, TransactionID: ReplayPrefix + id, Payload: spec.payload}
		if spec.dest != nil {
			t, err := spec.dest.partitionFor(ctx, tx, k.QueueID, k.PartitionID)
			if err != nil {
				return nil, err
			}
			c.PartitionID = t.ID
		}
		if own(k) {
			name, err := memo(names, k.GroupID, func() (string, error) { return tx.GroupName(ctx, k.GroupID) })
			if err != nil {
				return nil, fmt.Errorf("replay: group: %w", err)
			}
			key, c.GroupID, c.TransactionID = [2]int64{k.Seq, k.GroupID}, k.GroupID, OwnGroupTransaction(id, name)
		}
		if _, ok := index[key]; !ok {
			index[key] = len(copies)
			copies = append(copies, c)
		}
	}
	if err := tx.PushCopies(ctx, copies, now, spec.by); err != nil {
		return nil, fmt.Errorf("replay: push copies: %w", err)
	}
	groups, err := removeKeys(ctx, tx, keys, Stats{Replayed: 1}, nil, now)
	if err != nil {
		return nil, err
	}
	expect := make([][3]int64, len(keys))
	for i, k := range keys {
		key := [2]int64{k.Seq, 0}
		if own(k) {
			key[1] = k.GroupID
		}
		expect[i] = [3]int64{copies[index[key]].CopySeq, k.GroupID, groups[ErrorGroupKey{QueueID: k.QueueID, GroupID: k.GroupID, Fingerprint: k.Fingerprint}]}
	}
	if err := tx.ExpectReplayOutcomes(ctx, expect, spec.by.JobID); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	return copies, nil
}

// keysOf returns the keys of dls.
func keysOf(dls []DeadLetter) []DeadLetterKey {
	keys := make([]DeadLetterKey, len(dls))
	for i, d := range dls {
		keys[i] = DeadLetterKey{ID: d.ID, Seq: d.Seq, QueueID: d.QueueID, PartitionID: d.PartitionID, GroupID: d.GroupID, CreatedAt: d.CreatedAt, Fingerprint: d.Fingerprint}
	}
	return keys
}

// removeKeysTx is what removing dead letters writes: theirs and their
// groups' and counts' (deadLetterGroupStatsTx), and their error groups'.
type removeKeysTx interface {
	deadLetterGroupStatsTx
	ErrorGroupStateTx
}

// removeKeys deletes the dead letters keys are and counts each in its
// group: depth down, plus per (Replayed, Deleted or DeadLettersExpired,
// 1 each); with keep (a delete, an expiry), they are kept as keep says.
// Each error group's funnel counts them (replayed, deleted or expired)
// at now; it returns the error groups' ids (error_group_states.id) by
// their keys (ID 0).
func removeKeys(ctx context.Context, tx removeKeysTx, keys []DeadLetterKey, per Stats, keep *Removal, now time.Time) (map[ErrorGroupKey]int64, error) {
	ids := make([]int64, len(keys))
	type key struct{ q, g int64 }
	counts := map[key]int64{}
	var order []key
	type groupKey struct {
		key
		fingerprint string
	}
	groups := map[groupKey]int64{}
	var groupOrder []groupKey
	for i, d := range keys {
		ids[i] = d.ID
		k := key{d.QueueID, d.GroupID}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
		gk := groupKey{k, d.Fingerprint}
		if groups[gk] == 0 {
			groupOrder = append(groupOrder, gk)
		}
		groups[gk]++
	}
	if err := tx.DeleteDeadLetters(ctx, ids, keep); err != nil {
		return nil, fmt.Errorf("delete dead letters: %w", err)
	}
	marks := make(map[ErrorGroupKey]int64, len(groupOrder))
	for _, gk := range groupOrder {
		n := groups[gk]
		if err := tx.RemoveFromErrorGroup(ctx, gk.q, gk.g, gk.fingerprint, n); err != nil {
			return nil, fmt.Errorf("error groups: %w", err)
		}
		key := ErrorGroupKey{QueueID: gk.q, GroupID: gk.g, Fingerprint: gk.fingerprint}
		m, err := tx.AddErrorGroupFunnel(ctx, key, Funnel{Replayed: per.Replayed * n, Deleted: per.Deleted * n, Expired: per.DeadLettersExpired * n}, now)
		if err != nil {
			return nil, fmt.Errorf("error groups: %w", err)
		}
		marks[key] = m.ID
	}
	for _, k := range order {
		n := counts[k]
		s := Stats{Depth: -n, Replayed: per.Replayed * n, Deleted: per.Deleted * n, DeadLettersExpired: per.DeadLettersExpired * n}
		if err := tx.AddStats(ctx, k.q, k.g, s, time.Time{}); err != nil {
			return nil, fmt.Errorf("stats: %w", err)
		}
	}
	return marks, nil
}

// removal is how a delete at now by actor (for job, 0: none) keeps what
// it deletes.
func (b *Broker) removal(now time.Time, actor string, job int64) *Removal {
	return &Removal{How: RemovedDeleted, At: now, Actor: actor, JobID: job, RestoreUntil: now.Add(b.restoreWindow)}
}

// Delete removes a message's dead letters: all of them, or only group's.
// They can be restored (Restore) within the restore window.
func (b *Broker) Delete(ctx context.Context, messageID, group, actor string) (int, error) {
	n, _, err := b.deleteDeadLetters(ctx, messageID, group, actor)
	return n, err
}

// deleteDeadLetters is Delete; it says until when they can be restored.
func (b *Broker) deleteDeadLetters(ctx context.Context, messageID, group, actor string) (n int, until time.Time, err error) {
	err = b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		n, until = 0, time.Time{}
		dls, err := deadLettersOf(ctx, tx, messageID)
		if err != nil {
			return err
		}
		if group != "" {
			dls = onlyGroup(dls, group)
			if len(dls) == 0 {
				return errorf(ErrNotFound, "no dead letter of message %s in consumer group %q", messageID, truncate(group, 64))
			}
		}
		removal := b.removal(now, actor, 0)
		if _, err := removeKeys(ctx, tx, keysOf(dls), Stats{Deleted: 1}, removal, removal.At); err != nil {
			return err
		}
		n, until = len(dls), removal.RestoreUntil
		touched(dls[0].Queue) // news for the pages that show its dead letters (Watch)
		return audit(ctx, tx, now, actor, AuditDelete, dls[0].Queue, groupsOf(dls), n,
			fmt.Sprintf("message %s deleted (restorable for %s)", messageID, b.restoreWindow))
	})
	return n, until, err
}

func onlyGroup(dls []DeadLetter, group string) []DeadLetter {
	var out []DeadLetter
	for _, d := range dls {
		if d.Group == group {
			out = append(out, d)
		}
	}
	return out
}

func groupsOf(dls []DeadLetter) string {
	seen := map[string]bool{}
	var gs []string
	for _, d := range dls {
		if !seen[d.Group] {
			seen[d.Group] = true
			gs = append(gs, d.Group)
		}
	}
	return strings.Join(gs, ",")
}

// Triage is what the dead-letter list shows, read from one snapshot: the
// queue at a glance, a page of its dead letters and the top errors of the
// same filter.
type Triage struct {
	Queue QueueBrief
	Page  DLQPage
	// ErrorGroups are the biggest error groups of the queue and consumer
	// group of the filter (and only its error group, when it names one),
	// with their trends, from the kept counts: the other filters do not
	// narrow them.
	ErrorGroups []ErrorGroup
	// Owned are the states of ErrorGroups' fingerprints in the filter's
	// consumer group (or in each), by fingerprint: ErrorGroupStatesOf's
	// answer, read in the same snapshot.
	Owned map[string][]OwnedErrorGroup
	// Expiring: with the queue's deadLetterRetentionSeconds set, how
	// many of the queue's dead letters (the consumer group's, when the
	// filter names one) expire within ExpiringWithin; nil when it keeps
	// them.
	Expiring *Expiring
}

// Triage reads the dead-letter list of q.Queue (which must exist), with
// up to maxGroups of its error groups.
func (b *Broker) Triage(ctx context.Context, q DLQQuery, maxGroups int) (Triage, error) {
	if err := q.validate(); err != nil {
		return Triage{}, err
	}
	var out Triage
	err := b.store.View(ctx, func(tx Tx) error {
		qu, err := queueNamed(ctx, tx, q.Queue)
		if err != nil {
			return err
		}
		if out.Queue, err = b.brief(ctx, tx, qu); err != nil {
			return err
		}
		f, ok, err := q.filter(ctx, tx)
		if err != nil || !ok {
			return err
		}
		withTotal := q.WithTotal
		q.WithTotal = false
		capped, err := narrow(ctx, tx, &f, q.After)
		if err != nil {
			return err
		}
		if out.Page, err = deadLetterPage(ctx, tx, f, q); err != nil {
			return err
		}
		out.Page.MatchCapped = capped
		if err := stampExpiry(ctx, tx, out.Page.Items); err != nil {
			return err
		}
		if out.Expiring, err = expiring(ctx, tx, qu, f.GroupID, b.now()); err != nil {
			return err
		}
		if out.ErrorGroups, err = errorGroups(ctx, tx, f.QueueID, f.GroupID, f.Fingerprint, maxGroups, b.now()); err != nil {
			return err
		}
		fps := make([]string, len(out.ErrorGroups))
		for i, g := range out.ErrorGroups {
			fps[i] = g.Fingerprint
		}
		if out.Owned, err = statesOf(ctx, tx, f.QueueID, f.GroupID, fps); err != nil {
			return fmt.Errorf("error group states: %w", err)
		}
		// A page costs the same at any depth: the total comes from
		// maintained counts when the filter is a queue, a group or an error
		// group, else from at most TriageScan of the newest matching rows.
		if n, ok, err := groupCount(ctx, tx, f); err != nil || ok {
			out.Page.Total = n
			return err
		}
		if f.simple() {
			if withTotal {
				for _, g := range out.Queue.Stats {
					if f.GroupID == 0 || g.GroupID == f.GroupID {
						out.Page.Total += g.Depth
					}
				}
			}
			return nil
		}
		if withTotal && f.Window != nil {
			out.Page.Total, out.Page.TotalCapped, out.Page.TotalIn, err = windowTotal(ctx, tx, f, SearchCount)
			return err
		}
		if withTotal {
			limit := TriageScan
			if f.Text != "" || len(f.Fields) > 0 {
				limit = SearchCount // a search counts less far
			}
			if out.Page.Total, err = tx.CountDeadLettersUpTo(ctx, f, limit+1); err != nil {
				return err
			}
			if out.Page.Total > int64(limit) {
				out.Page.Total, out.Page.TotalCapped = int64(limit), true
			}

		}
		return nil
	})
	return out, err
}

// TriageScan is how many matching dead letters the list reads, at most,
// to count them when the filter is more than a queue, a group and an
// error group.
const TriageScan = 10000

// deadLetterPage reads one page of f, with the keyset position of the next
// and, when asked, the total.
func deadLetterPage(ctx context.Context, tx deadLetterGroupStatsTx, f Filter, q DLQQuery) (DLQPage, error) {
	var page DLQPage
	var err error
	if page.Window, err = searchWindow(ctx, tx, f); err != nil {
		return page, fmt.Errorf("list dead letters: %w", err)
	}
	// One row more than asked tells whether there is a next page.
	items, err := tx.ListDeadLetters(ctx, f, Page{Limit: q.Limit + 1, Offset: q.Offset, After: q.After})
	if err != nil {
		return page, fmt.Errorf("list dead letters: %w", err)
	}
	if len(items) > q.Limit {
		items = items[:q.Limit]
		last := items[len(items)-1]
		page.Next = &Cursor{At: last.FailedAt, ID: last.ID}
	} else if page.Window != nil {
		// The window was read to its end: the next page reads the next.
		page.Scanned = page.Window.Rows
		if page.Window.More {
			page.Next = f.Floor
		}
	}
	page.Items = items
	if q.WithTotal && f.Window != nil {
		// A search read in windows counts its matches in the newest
		// window, up to SearchCount, and says when that is not all.
		if page.Total, page.TotalCapped, page.TotalIn, err = windowTotal(ctx, tx, f, SearchCount); err != nil {
			return page, err
		}
	} else if q.WithTotal && (f.Text != "" || len(f.Fields) > 0) {
		// A search counts its matches up to SearchCount: bounded by the
		// index's matches.
		n, err := tx.CountDeadLettersUpTo(ctx, f, SearchCount+1)
		if err != nil {
			return page, fmt.Errorf("count dead letters: %w", err)
		}
		page.Total, page.TotalCapped = min(n, SearchCount), n > SearchCount
	} else if q.WithTotal {
		if page.Total, err = countDeadLetters(ctx, tx, f); err != nil {
			return page, fmt.Errorf("count dead letters: %w", err)
		}
	}
	return page, nil
}

// countDeadLettersAndMessages counts what f selects, exactly, in dead
// letters and in messages (a message dead-lettered by several groups has
// a dead letter in each). Within one group, or when the maintained depths
// show dead letters in one group only, they are the same number; else the
// messages are counted (a read of what f selects).
func countDeadLettersAndMessages(ctx context.Context, tx deadLetterGroupStatsTx, f Filter) (rows, messages int64, err error) {
	if rows, err = countDeadLetters(ctx, tx, f); err != nil || rows == 0 || f.GroupID != 0 {
		return rows, rows, err
	}
	if f.QueueID != 0 {
		gs, err := tx.Stats(ctx, f.QueueID)
		if err != nil {
			return 0, 0, err
		}
		holding := 0
		for _, g := range gs {
			if g.Depth > 0 {
				holding++
			}
		}
		if holding <= 1 {
			return rows, rows, nil
		}
	}
	messages, err = tx.CountDeadLetterMessages(ctx, f)
	return rows, messages, err
}

// countDeadLetters counts what f selects, exactly: from the maintained
// depths when f is a queue or a group, from the error groups' counts when
// it is an error group of one, else by counting the rows.
func countDeadLetters(ctx context.Context, tx deadLetterGroupStatsTx, f Filter) (int64, error) {
	if n, ok, err := groupCount(ctx, tx, f); err != nil || ok {
		return n, err
	}
	if !f.simple() {
		return tx.CountDeadLetters(ctx, f)
	}
	gs, err := tx.Stats(ctx, f.QueueID)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, g := range gs {
		if f.GroupID == 0 || g.GroupID == f.GroupID {
			n += g.Depth
		}
	}
	return n, nil
}
