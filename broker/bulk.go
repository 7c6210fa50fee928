package broker

import (
	"context"
	"fmt"
	"time"
)

// BulkResult counts what a bulk action did (Done): messages replayed
// (a message counts once, however many groups' dead letters it left), or
// dead letters deleted by filter (by ids: the messages whose dead letters
// were deleted); ids that had no dead letter any more (Skipped), and
// those left untouched by an error (Failed).
type BulkResult struct {
	Done    int
	Skipped int
	Failed  int
	// Capped, of a replay: how many were at their queue's replay cap
	// (maxReplays): skipped (counted in Skipped too), or, forced,
	// replayed past it.
	Capped int
	// By filter only: the bound the action kept to, and how many dead
	// letters matching the filter were filed after it was taken (a row id
	// above Bound.ID), left alone. ArrivedSince is counted as the action
	// ends: it is known only when the action returned no error.
	Bound        *Bound
	ArrivedSince int64
	JobID        int64 // the job that did it
}

// MaxBulkIDs caps the ids one bulk call may name; larger sets go by filter.
const MaxBulkIDs = 10000

// ReplayIDs replays the dead-lettered messages named by id, as a job run
// in the caller (StartJob, RunJob): in transactions of up to bulkChunk,
// each message exactly once or not at all, the copies pushed in the order
// of ids.
func (b *Broker) ReplayIDs(ctx context.Context, ids []string, actor string) (BulkResult, error) {
	return b.bulkNow(ctx, JobRequest{Kind: JobReplay, IDs: ids, Actor: actor})
}

// DeleteIDs deletes the dead letters of the messages named by id: every
// group's, or only group's when set.
func (b *Broker) DeleteIDs(ctx context.Context, ids []string, group, actor string) (BulkResult, error) {
	return b.bulkNow(ctx, JobRequest{Kind: JobDelete, IDs: ids, Group: group, Actor: actor})
}

// bulkNow starts the job r and runs it to its end in the caller.
func (b *Broker) bulkNow(ctx context.Context, r JobRequest) (BulkResult, error) {
	if r.Query == nil && len(r.IDs) == 0 {
		return BulkResult{}, errorf(ErrInvalid, "ids: at least one is required")
	}
	j, err := b.StartJob(ctx, r)
	if err != nil {
		return BulkResult{}, err
	}
	j, err = b.RunJob(ctx, j.ID)
	res := BulkResultOf(j)
	if err != nil {
		res.Failed = int(j.Left())
		return res, fmt.Errorf("bulk %s: %w", r.Kind, err)
	}
	return res, nil
}

// BulkResultOf is what a job did, as a bulk action's result.
func BulkResultOf(j Job) BulkResult {
	res := BulkResult{Done: int(j.Done), Skipped: int(j.Skipped), Failed: int(j.Failed), Capped: int(j.Capped), JobID: j.ID}
	if f := j.Scope.Filter; f != nil && f.Bound != nil {
		bd := *f.Bound
		res.Bound = &bd
	}
	if j.ArrivedSince >= 0 {
		res.ArrivedSince = j.ArrivedSince
	}
	return res
}

// keysOfIDs returns the dead letters of the messages named by ids (only
// group's when set), in the order of ids, each message's together, and
// for each the index in ids of the id that named it.
func keysOfIDs(ctx context.Context, tx deadLetterSubscriptionTx, ids []string, group string) (keys []DeadLetterKey, at []int, err error) {
	var gid int64
	if group != "" {
		if gid, err = tx.GroupID(ctx, group, false); isNotFound(err) {
			return nil, nil, nil
		} else if err != nil {
			return nil, nil, err
		}
	}
	type named struct {
		ms, seq int64
		at      int
	}
	want := make([]named, 0, len(ids))
	seqs := make([]int64, 0, len(ids))
	for i, id := range ids {
		if ms, seq, ok := ParseMessageID(id); ok {
			want = append(want, named{ms, seq, i})
			seqs = append(seqs, seq)
		}
	}
	all, err := tx.DeadLetterKeysOf(ctx, seqs)
	if err != nil {
		return nil, nil, fmt.Errorf("dead letters of messages: %w", err)
	}
	bySeq := map[int64][]DeadLetterKey{}
	for _, k := range all {
		bySeq[k.Seq] = append(bySeq[k.Seq], k)
	}
	// In the order of ids, each message's dead letters in push order.
	seen := map[int64]bool{}
	for _, w := range want {
		ks := bySeq[w.seq]
		if seen[w.seq] || len(ks) == 0 || ks[0].CreatedAt.UnixMilli() != w.ms {
			continue // no dead letter (any more), or not this message
		}
		seen[w.seq] = true
		for _, k := range ks {
			if gid == 0 || k.GroupID == gid {
				keys, at = append(keys, k), append(at, w.at)
			}
		}
	}
	return keys, at, nil
}

// messagesIn counts the messages of keys, whose dead letters of one
// message are next to each other.
func messagesIn(keys []DeadLetterKey) int {
	n := 0
	for i, k := range keys {
		if i == 0 || k.Seq != keys[i-1].Seq {
			n++
		}
	}
	return n
}

// withinBytes is the longest start of keys, message by message (their
// dead letters next to each other), whose payloads add up to bulkBytes at
// most: never less than the first message.
func withinBytes(keys []DeadLetterKey) []DeadLetterKey {
	cut, _ := withinBytesOf(keys, bulkBytes)
	return cut
}

// withinBytesOf is withinBytes with limit for bulkBytes; it also says
// how many payload bytes the start holds.
func withinBytesOf(keys []DeadLetterKey, limit int64) ([]DeadLetterKey, int64) {
	var total int64
	for i, k := range keys {
		if i > 0 && k.Seq == keys[i-1].Seq {
			continue
		}
		if i > 0 && total+k.Size > limit {
			return keys[:i], total
		}
		total += k.Size
	}
	return keys, total
}

// messagesPerQueue counts the messages of keys per queue name, and
// touches each queue.
func messagesPerQueue(ctx context.Context, tx QueueTx, keys []DeadLetterKey, touched func(string)) (map[string]int, error) {
	names := map[int64]string{}
	seen := map[int64]bool{}
	out := map[string]int{}
	for _, k := range keys {
		if seen[k.Seq] {
			continue
		}
		seen[k.Seq] = true
		name, ok := names[k.QueueID]
		if !ok {
			q, err := tx.QueueByID(ctx, k.QueueID)
			if err != nil {
				return nil, fmt.Errorf("queue: %w", err)
			}
			name, names[k.QueueID] = q.Name, q.Name
			touched(name)
		}
		out[name]++
	}
	return out, nil
}

// Bound freezes the dead letters a bulk action by filter acts on: those
// that failed at or before FailedAt and whose row id is at most ID. A dead
// letter filed after the bound was taken has a higher row id: ids only
// grow, and are never given again even once the rows with the highest
// ones are deleted or replayed (the store's obligation: Tx,
// "Order"). That holds whatever the clock does; by the clock it
// also failed later, unless the clock went back. Either way it is above
// the bound, and left alone. Taken as a filter's set is counted
// (CountMatching), it lets the action touch exactly what its confirmation
// counted; a replay also removes those messages' dead letters in other
// groups (SPEC 4), the filter's or not, at or above the bound.
type Bound struct {
	FailedAt time.Time
	ID       int64
}

// String is the bound for the audit trail.
func (bd Bound) String() string {
	return fmt.Sprintf("%s #%d", bd.FailedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"), bd.ID)
}

// Counted is how many dead letters a filter selects (Count), how many
// messages they are (Messages: a message dead-lettered by several groups
// has a dead letter in each), and the bound that freezes them. A replay
// counts in messages, a delete by filter in dead letters.
type Counted struct {
	Count    int64
	Messages int64
	Bound    Bound
}

// validateBulk checks a bulk action's filter: its paging fields are
// ignored, and no Queue means every queue only when AllQueues says so.
func (q *DLQQuery) validateBulk() error {
	q.Limit, q.Offset, q.After, q.WithTotal = bulkChunk, 0, nil, false
	if err := q.validate(); err != nil {
		return err
	}
	if q.Queue == "" && !q.AllQueues {
		return errorf(ErrInvalid, "the filter names no queue: name one, or say all to act on the dead letters of every queue")
	}
	if q.Queue != "" && q.AllQueues {
		return errorf(ErrInvalid, "all means every queue: it cannot go with a queue")
	}
	if q.Bound != nil && q.Bound.FailedAt.IsZero() {
		return errorf(ErrInvalid, "a bound needs its failedAt")
	}
	if q.Bound != nil && q.Bound.ID < 0 {
		return errorf(ErrInvalid, "a bound's id must not be negative")
	}
	return nil
}

// boundOf is the bound of a bulk action by f (ok false: nothing can
// match): given's, or taken now as the newest failure f selects and the
// highest row id. A given id is kept at most the highest row id now, so
// that copies replayed by the action that fail again (filed later, with
// higher ids) are not replayed again by it; a given failedAt is kept at
// most now, or the newest failure f selects when the clock went back
// since it failed, so that a bound sent from the future does not lean on
// the ids alone, and every dead letter of f that is there stays within
// it.
func (b *Broker) boundOf(ctx context.Context, tx DeadLetterTx, f Filter, ok bool, given *Bound) (Bound, error) {
	maxID, err := tx.MaxDeadLetterID(ctx)
	if err != nil {
		return Bound{}, fmt.Errorf("highest dead letter id: %w", err)
	}
	newest := b.now()
	if ok {
		at, found, err := tx.NewestFailure(ctx, f)
		if err != nil {
			return Bound{}, fmt.Errorf("newest dead letter: %w", err)
		}
		if found && (given == nil || at.After(newest)) {
			newest = at
		}
	}
	if given == nil {
		return Bound{FailedAt: newest, ID: maxID}, nil
	}
	bd := *given
	if bd.ID == 0 || bd.ID > maxID {
		bd.ID = maxID
	}
	if bd.FailedAt.After(newest) {
		bd.FailedAt = newest
	}
	return bd, nil
}

// frozenTx is what freezing a bulk action's filter reads: the filter's
// queue, partition and subscription, and the dead letters' bound.
type frozenTx interface {
	DeadLetterTx
	PartitionTx
	QueueTx
	SubscriptionTx
}

// frozen resolves q's filter and takes its bound (q.Bound, kept as
// boundOf keeps it, or taken now) in tx's snapshot. It returns the
// filter that counts exactly the dead letters at or below the bound: f
// itself when the bound was taken now (in this snapshot all that f
// selects is at or below it, and the kept counts may answer), f narrowed
// to a bound given; ok is false when nothing can match (a queue, group
// or partition q names does not exist, or there was no dead letter).
func (b *Broker) frozen(ctx context.Context, tx frozenTx, q DLQQuery) (f Filter, bound Bound, ok bool, err error) {
	f, named, err := q.bulkFilter(ctx, tx)
	if err == nil && named {
		err = checkErrorScan(ctx, tx, f)
	}
	if err != nil {
		return f, bound, false, err
	}
	if bound, err = b.boundOf(ctx, tx, f, named, q.Bound); err != nil || !named {
		return f, bound, false, err
	}
	if q.Bound == nil {
		return f, bound, bound.ID > 0, nil
	}
	f, ok = within(f, bound)
	return f, bound, ok, nil
}

// within narrows f to the dead letters at or below bd; ok is false when
// none can be (no dead letter at all when bd was taken).
func within(f Filter, bd Bound) (Filter, bool) {
	f.MaxID, f.MaxFailedAt = bd.ID, bd.FailedAt
	return f, bd.ID > 0
}

// CountMatching counts the dead letters q selects (its paging fields are
// ignored) and their messages, and takes the bound that freezes them, from
// one read snapshot: ReplayMatching (in messages) or DeleteMatching (in
// dead letters) given that bound act on exactly those, less any gone
// since. With q.Bound set, it counts those of q at or below that bound
// instead. Like them, it refuses a q with no Queue unless q.AllQueues.
func (b *Broker) CountMatching(ctx context.Context, q DLQQuery) (Counted, error) {
	if err := q.validateBulk(); err != nil {
		return Counted{}, err
	}
	var out Counted
	err := b.store.View(ctx, func(tx Tx) error {
		f, bound, ok, err := b.frozen(ctx, tx, q)
		out.Bound = bound
		if err != nil || !ok {
			return err
		}
		out.Count, out.Messages, err = countDeadLettersAndMessages(ctx, tx, f)
		return err
	})
	if err != nil {
		return Counted{}, fmt.Errorf("count matching: %w", err)
	}
	return out, nil
}

// ReplayMatching replays every dead-lettered message that q selects at or
// below q.Bound (taken as the call begins when nil; see Bound), as a job
// run in the caller: in transactions of up to bulkChunk, so that
// producers are not held up, newest failure first. Done counts messages.
// Each message leaves its dead letters in every group (SPEC 4), also
// those q does not select or filed after the bound. Dead letters of other
// messages filed after the bound are left alone (a replayed copy that
// fails again is not replayed again here), and counted in the result's
// ArrivedSince. A q with no Queue is refused unless q.AllQueues.
func (b *Broker) ReplayMatching(ctx context.Context, q DLQQuery, actor string) (BulkResult, error) {
	return b.bulkNow(ctx, JobRequest{Kind: JobReplay, Query: &q, Actor: actor})
}

// DeleteMatching deletes every dead letter that q selects at or below
// q.Bound, as ReplayMatching replays them, in transactions of up to
// deleteChunk.
func (b *Broker) DeleteMatching(ctx context.Context, q DLQQuery, actor string) (BulkResult, error) {
	return b.bulkNow(ctx, JobRequest{Kind: JobDelete, Query: &q, Actor: actor})
}

// allGroups returns the dead letters, in every group, of the messages of
// keys, message by message in the order they first appear in keys.
func allGroups(ctx context.Context, tx DeadLetterTx, keys []DeadLetterKey) ([]DeadLetterKey, error) {
	var seqs []int64
	seen := map[int64]bool{}
	for _, k := range keys {
		if !seen[k.Seq] {
			seen[k.Seq] = true
			seqs = append(seqs, k.Seq)
		}
	}
	all, err := tx.DeadLetterKeysOf(ctx, seqs)
	if err != nil {
		return nil, fmt.Errorf("dead letters of messages: %w", err)
	}
	bySeq := map[int64][]DeadLetterKey{}
	for _, k := range all {
		bySeq[k.Seq] = append(bySeq[k.Seq], k)
	}
	out := make([]DeadLetterKey, 0, len(all))
	for _, s := range seqs {
		out = append(out, bySeq[s]...)
	}
	return out, nil
}

// unique is in without its repeats, in order (a new slice).
func unique[T comparable](in []T) []T {
	seen := make(map[T]bool, len(in))
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// memo is m[k], read once by read when m lacks it (an error is not kept):
// the names and rows a loop over keys looks up again and again.
func memo[K comparable, V any](m map[K]V, k K, read func() (V, error)) (V, error) {
	if v, ok := m[k]; ok {
		return v, nil
	}
	v, err := read()
	if err != nil {
		return v, err
	}
	m[k] = v
	return v, nil
}

// bulkFilter is q's filter (filter) for a bulk action or an export, which
// act on every dead letter it selects, not on a page: an error text
// (ErrorContains) with words the index can answer (ErrorWords) is
// looked up by them in the error texts' index, all of their matches,
// and checked exactly on each, as "Payload or error has" is (at any
// depth: what it costs follows the words' matches, not the queue's
// size). A text with no such word is left as it is: checkErrorScan says
// whether it may be read so.
func (q DLQQuery) bulkFilter(ctx context.Context, tx partitionQueueSubscriptionTx) (f Filter, ok bool, err error) {
	f, ok, err = q.filter(ctx, tx)
	if err == nil && f.ErrorContains != "" && f.TransactionID == "" {
		f.ErrorWords = ErrorWords(f.ErrorContains)
	}
	return f, ok, err
}

// checkErrorScan refuses (ErrInvalid) a bulk action or an export whose
// error text has no word the index can answer (bulkFilter) when the
// other filters select more than FieldScan dead letters: the text could
// only be checked by reading every one of them (600,000 in one group:
// half a minute, for a text that may match none). A list reads such a
// text a window at a time and says so; an action or an export must do
// all that its filter says or nothing, so it is refused, saying what to
// type instead. Up to FieldScan, the text is checked on each, as the
// list's window would.
func checkErrorScan(ctx context.Context, tx DeadLetterTx, f Filter) error {
	if f.ErrorContains == "" || f.ErrorWords != "" || f.TransactionID != "" {
		return nil
	}
	base := f
	base.ErrorContains = ""
	n, err := tx.CountDeadLettersUpTo(ctx, base, fieldScan+1)
	if err != nil {
		return fmt.Errorf("count the dead letters an error text would read: %w", err)
	}
	if n > int64(fieldScan) {
		return errorf(ErrInvalid, "the error text %q (Error contains, error=) has no whole word the index can look up, and the other filters select more than %s dead letters: it would read each of them. "+
			"Type whole words as they stand in the error (\": timeout,\" or \"connection refused\", not part of a word), use \"Payload or error has\" (q) for words, "+
			"or narrow by error group, consumer group or time first; nothing was changed", truncate(f.ErrorContains, 64), Thousands(int64(fieldScan)))
	}
	return nil
}
