package broker

import (
	"context"
	"fmt"
	"strings"
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
	// By filter only: the bound the action kept to, and how many dead
	// letters matching the filter were filed after it was taken (a row id
	// above Bound.ID), left alone. ArrivedSince is counted as the action
	// ends: it is known only when the action returned no error.
	Bound        *Bound
	ArrivedSince int64
}

// MaxBulkIDs caps the ids one bulk call may name; larger sets go by filter.
const MaxBulkIDs = 10000

// ReplayIDs replays the dead-lettered messages named by id, in
// transactions of up to bulkChunk. Each message is replayed exactly once
// or not at all; the copies are pushed in the order of ids.
func (b *Broker) ReplayIDs(ctx context.Context, ids []string, actor string) (BulkResult, error) {
	return b.bulkIDs(ctx, ids, "", actor, AuditReplay)
}

// DeleteIDs deletes the dead letters of the messages named by id: every
// group's, or only group's when set.
func (b *Broker) DeleteIDs(ctx context.Context, ids []string, group, actor string) (BulkResult, error) {
	return b.bulkIDs(ctx, ids, group, actor, AuditDelete)
}

// bulkIDs replays or deletes by message id, a chunk of ids a transaction,
// each chunk with a few set-based statements.
func (b *Broker) bulkIDs(ctx context.Context, ids []string, group, actor, action string) (BulkResult, error) {
	var res BulkResult
	if len(ids) == 0 {
		return res, errorf(ErrInvalid, "ids: at least one is required")
	}
	if len(ids) > MaxBulkIDs {
		return res, errorf(ErrInvalid, "ids: at most %d per call; use a filter for more", MaxBulkIDs)
	}
	ids = uniqueStrings(ids)
	ctx = LowPriority(ctx)
	size := bulkChunk
	if action == AuditDelete {
		size = deleteChunk
	}
	for len(ids) > 0 {
		chunk := ids[:min(size, len(ids))]
		var done, consumed int
		err := b.update(ctx, func(tx Tx, touched func(string)) error {
			now := b.now()
			keys, at, err := keysOfIDs(ctx, tx, chunk, group)
			if err != nil {
				return err
			}
			consumed, done = len(chunk), messagesIn(keys)
			if action == AuditReplay {
				// Cut to the payloads one transaction may copy: the ids of
				// the messages left out come in the next chunk.
				if cut := withinBytes(keys); len(cut) < len(keys) {
					consumed, keys, done = at[len(cut)], cut, messagesIn(cut)
				}
			}
			if done == 0 {
				return nil
			}
			queues, err := applyKeys(ctx, tx, now, keys, action == AuditReplay, touched)
			if err != nil {
				return err
			}
			return auditBulk(ctx, tx, now, actor, action, queues, fmt.Sprintf("%d of %d ids by list", done, consumed))
		})
		if err != nil {
			res.Failed += len(ids)
			return res, fmt.Errorf("bulk %s: %w", action, err)
		}
		res.Done += done
		res.Skipped += consumed - done
		ids = ids[consumed:]
	}
	return res, nil
}

// keysOfIDs returns the dead letters of the messages named by ids (only
// group's when set), in the order of ids, each message's together, and
// for each the index in ids of the id that named it.
func keysOfIDs(ctx context.Context, tx Tx, ids []string, group string) (keys []DeadLetterKey, at []int, err error) {
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
	var total int64
	for i, k := range keys {
		if i > 0 && k.Seq == keys[i-1].Seq {
			continue
		}
		if i > 0 && total+k.Size > bulkBytes {
			return keys[:i]
		}
		total += k.Size
	}
	return keys
}

// messagesPerQueue counts the messages of keys per queue name, and
// touches each queue.
func messagesPerQueue(ctx context.Context, tx Tx, keys []DeadLetterKey, touched func(string)) (map[string]int, error) {
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
// ones are deleted or replayed (the store's obligation: AUTOINCREMENT,
// migration 0013). That holds whatever the clock does; by the clock it
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
func (b *Broker) boundOf(ctx context.Context, tx Tx, f Filter, ok bool, given *Bound) (Bound, error) {
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
		f, ok, err := q.filter(ctx, tx)
		if err != nil {
			return err
		}
		if out.Bound, err = b.boundOf(ctx, tx, f, ok, q.Bound); err != nil || !ok {
			return err
		}
		if q.Bound == nil {
			// In this snapshot what f selects is all at or below the
			// bound just taken: the kept counts answer when f is simple.
			out.Count, out.Messages, err = countDeadLettersAndMessages(ctx, tx, f)
			return err
		}
		if f, ok = within(f, out.Bound); ok {
			out.Count, out.Messages, err = countDeadLettersAndMessages(ctx, tx, f)
		}
		return err
	})
	if err != nil {
		return Counted{}, fmt.Errorf("count matching: %w", err)
	}
	return out, nil
}

// ReplayMatching replays every dead-lettered message that q selects at or
// below q.Bound (taken as the call begins when nil; see Bound), in
// transactions of up to bulkChunk, so that producers are not held up:
// newest failure first. Done counts messages. Each message leaves its dead
// letters in every group (SPEC 4), also those q does not select or filed
// after the bound. Dead letters of other messages filed after the bound
// are left alone (a replayed copy that fails again is not replayed again
// here), and counted in the result's ArrivedSince. A q with no Queue is
// refused unless q.AllQueues.
func (b *Broker) ReplayMatching(ctx context.Context, q DLQQuery, actor string) (BulkResult, error) {
	return b.bulkMatching(ctx, q, actor, AuditReplay, true)
}

// DeleteMatching deletes every dead letter that q selects at or below
// q.Bound, as ReplayMatching replays them, in transactions of up to
// deleteChunk.
func (b *Broker) DeleteMatching(ctx context.Context, q DLQQuery, actor string) (BulkResult, error) {
	return b.bulkMatching(ctx, q, actor, AuditDelete, false)
}

func (b *Broker) bulkMatching(ctx context.Context, q DLQQuery, actor, action string, isReplay bool) (BulkResult, error) {
	var res BulkResult
	if err := q.validateBulk(); err != nil {
		return res, err
	}
	ctx = LowPriority(ctx)
	var bound Bound
	if err := b.store.View(ctx, func(tx Tx) error {
		f, ok, err := q.filter(ctx, tx)
		if err != nil {
			return err
		}
		bound, err = b.boundOf(ctx, tx, f, ok, q.Bound)
		return err
	}); err != nil {
		return res, fmt.Errorf("bulk %s: %w", action, err)
	}
	res.Bound = &bound
	for bound.ID > 0 {
		var n int
		err := b.update(ctx, func(tx Tx, touched func(string)) error {
			now := b.now()
			n = 0
			f, ok, err := q.filter(ctx, tx)
			if err != nil || !ok {
				return err
			}
			f, _ = within(f, bound)
			limit := deleteChunk
			if isReplay {
				limit = bulkChunk
			}
			keys, err := tx.DeadLetterKeys(ctx, f, limit)
			if err != nil || len(keys) == 0 {
				return err
			}
			if isReplay {
				// Every group's dead letters of the messages go with them,
				// the messages in the order listed, as many as the
				// payloads one transaction may copy (the rest still match:
				// the next chunk takes them).
				if keys, err = allGroups(ctx, tx, keys); err != nil {
					return err
				}
				keys = withinBytes(keys)
			}
			queues, err := applyKeys(ctx, tx, now, keys, isReplay, touched)
			if err != nil {
				return err
			}
			if isReplay {
				for _, c := range queues {
					n += c
				}
			} else {
				n = len(keys)
			}
			what := "dead letters"
			if isReplay {
				what = "messages (their dead letters in every group)"
			}
			return auditBulk(ctx, tx, now, actor, action, queues, fmt.Sprintf("%d %s matching %s, at or below %s", n, what, q.Describe(), bound))
		})
		if err != nil {
			return res, fmt.Errorf("bulk %s: %w", action, err)
		}
		if n == 0 {
			break
		}
		res.Done += n
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	// What matches with a row id above the bound's now was filed since,
	// and not touched. Those at or below it that failed after its
	// failedAt (a bound given with an earlier one) were there before: the
	// caller left them out, and they are not counted.
	if err := b.store.View(ctx, func(tx Tx) error {
		f, ok, err := q.filter(ctx, tx)
		if err != nil || !ok {
			return err
		}
		res.ArrivedSince, err = tx.CountDeadLettersAbove(ctx, f, bound)
		return err
	}); err != nil {
		return res, fmt.Errorf("bulk %s: count what arrived since: %w", action, err)
	}
	return res, nil
}

// applyKeys replays (or deletes) the dead letters of keys and returns how
// many messages that was per queue, telling touched of each queue.
func applyKeys(ctx context.Context, tx Tx, now time.Time, keys []DeadLetterKey, replay bool, touched func(string)) (map[string]int, error) {
	var err error
	if replay {
		_, err = replayKeys(ctx, tx, now, keys)
	} else {
		err = removeKeys(ctx, tx, keys, Stats{Deleted: 1})
	}
	if err != nil {
		return nil, err
	}
	return messagesPerQueue(ctx, tx, keys, touched)
}

// allGroups returns the dead letters, in every group, of the messages of
// keys, message by message in the order they first appear in keys.
func allGroups(ctx context.Context, tx Tx, keys []DeadLetterKey) ([]DeadLetterKey, error) {
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

func auditBulk(ctx context.Context, tx Tx, now time.Time, actor, action string, queues map[string]int, detail string) error {
	n := 0
	var names []string
	for q, c := range queues {
		n += c
		names = append(names, q)
	}
	if n == 0 {
		return nil
	}
	return audit(ctx, tx, now, actor, action, strings.Join(names, ","), "", n, detail)
}

func uniqueStrings(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
