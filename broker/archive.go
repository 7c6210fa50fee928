package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The archive before expiry (deadLetterArchive, issue 19): a queue that
// sets it with deadLetterRetentionSeconds has its dead letters written to
// an Archiver before they expire. The write is durable before the
// transaction that expires them commits: a crash between the two may
// write a dead letter twice (at least once), never lose one. A write that
// fails keeps the dead letters (nothing expires unarchived), says so
// (ArchiveStatus, the log once a failure state) and is tried again at the
// next maintenance run.

// Archiver writes dead letters about to expire to cold storage.
type Archiver interface {
	// Archive writes dls, dead letters of the queue named queue, and
	// returns nil once they are on the disk (written and synced); at is
	// the time of the expiry run (its day, in UTC, names the file). An
	// error means none of dls may be taken as archived.
	Archive(ctx context.Context, queue string, at time.Time, dls []DeadLetter) error
}

// ErrNoArchive is the failure of a queue that asks for the archive when
// no archive directory is configured.
var ErrNoArchive = errors.New("no archive directory is configured (--archive-dir or LAZARUS_ARCHIVE_DIR)")

// archiveBytes bounds the payloads and error texts of a chunk written to
// the archive (and held in memory for it): a chunk is maintainChunk dead
// letters, or fewer once they reach this size (one at least).
const archiveBytes = 4 << 20

// ArchiveStatus is what the archive of one queue did since the process
// started.
type ArchiveStatus struct {
	Queue    string
	Written  int64 // dead letters archived
	Failures int64 // writes that failed (each kept its chunk unexpired)
	// FailingSince is when the current failure began (zero: the last
	// write, if any, succeeded); Err is its error.
	FailingSince time.Time
	Err          string
}

// archiveState is the ArchiveStatus of every queue that archived or
// tried to.
type archiveState struct {
	mu     sync.Mutex
	queues map[string]*ArchiveStatus
	// untold are the queues whose failure is not told yet: telling it
	// failed (told), so the next failed write tells it again.
	untold map[string]bool
}

// record notes a write of n dead letters of queue that returned err at
// now. A failure is logged when it begins or its error changes, not at
// every chunk; the first write that succeeds after it says so. It
// reports whether a failure is to be told: it began (the write before
// it, if any, succeeded, in this process), or telling it failed before.
func (s *archiveState) record(log *slog.Logger, queue string, n int, err error, now time.Time) (tell bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues == nil {
		s.queues = map[string]*ArchiveStatus{}
	}
	st := s.queues[queue]
	if st == nil {
		st = &ArchiveStatus{Queue: queue}
		s.queues[queue] = st
	}
	if err == nil {
		st.Written += int64(n)
		delete(s.untold, queue)
		if !st.FailingSince.IsZero() {
			log.Info("archive: writing again; the queue's dead letters expire again", "queue", queue, "failing_since", st.FailingSince)
			st.FailingSince, st.Err = time.Time{}, ""
		}
		return false
	}
	st.Failures++
	if st.FailingSince.IsZero() || st.Err != err.Error() {
		log.Error("archive: cannot write; the queue's dead letters are kept, not expired, until it can (tried again at each maintenance run)",
			"queue", queue, "err", err)
		if st.FailingSince.IsZero() {
			st.FailingSince, tell = now, true
		}
		st.Err = err.Error()
	}
	return tell || s.untold[queue]
}

// told notes whether the failure record asked to tell was told (its
// event committed): one that was not is asked again at the next failure.
func (s *archiveState) told(queue string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		delete(s.untold, queue)
		return
	}
	if s.untold == nil {
		s.untold = map[string]bool{}
	}
	s.untold[queue] = true
}

// ArchiveStatuses returns the archive's status of every queue that
// archived or tried to since the process started, by queue name.
func (b *Broker) ArchiveStatuses() []ArchiveStatus {
	b.archive.mu.Lock()
	defer b.archive.mu.Unlock()
	out := make([]ArchiveStatus, 0, len(b.archive.queues))
	for _, st := range b.archive.queues {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out
}

// Archives reports whether an archive is configured (--archive-dir).
func (b *Broker) Archives() bool { return b.archiver != nil }

// ArchiveStatusOf returns the archive's status of the queue (ok false:
// it has not archived nor tried to since the process started).
func (b *Broker) ArchiveStatusOf(queue string) (ArchiveStatus, bool) {
	b.archive.mu.Lock()
	defer b.archive.mu.Unlock()
	st, ok := b.archive.queues[queue]
	if !ok {
		return ArchiveStatus{}, false
	}
	return *st, true
}

// archiveDue writes the next due dead letters of q to the archive when q,
// read again now, archives (archiving; else nothing is read). It reads
// in a read transaction, the way expireQueue's next chunk will select
// them (DueDeadLetters, oldest first), up to maintainChunk and
// archiveBytes, and writes outside any transaction, so that the writer
// is never held by the archive's disk. It returns the ids written, and
// more when there may be due dead letters past them.
func (b *Broker) archiveDue(ctx context.Context, q Queue) (ids map[int64]bool, more, archiving bool, err error) {
	var dls []DeadLetter
	var name string
	now := b.now()
	if err := b.store.View(ctx, func(tx Tx) error {
		dls, archiving, more = nil, false, false
		cur, err := tx.QueueByID(ctx, q.ID)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		keep := cur.Options.DeadLetterRetention()
		if keep <= 0 || !cur.Options.DeadLetterArchive {
			return nil
		}
		archiving, name = true, cur.Name
		keys, err := tx.DueDeadLetters(ctx, q.ID, now.Add(-keep), maintainChunk)
		if err != nil || len(keys) == 0 {
			return err
		}
		more = len(keys) == maintainChunk
		if b.archiver == nil {
			dls = make([]DeadLetter, 1) // something is due: the failure is said
			return nil
		}
		size := 0
		for i, k := range keys {
			d, err := tx.DeadLetter(ctx, k.ID)
			if err != nil {
				return fmt.Errorf("archive: dead letter: %w", err)
			}
			dls = append(dls, d)
			if size += len(d.Payload) + len(d.Error); size >= archiveBytes && i < len(keys)-1 {
				more = true
				break
			}
		}
		return stampExpiry(ctx, tx, dls)
	}); err != nil {
		return nil, false, archiving, fmt.Errorf("archive: read: %w", err)
	}
	if !archiving || len(dls) == 0 {
		return nil, false, archiving, nil
	}
	var werr error
	if b.archiver == nil {
		werr = ErrNoArchive
	} else {
		werr = b.archiver.Archive(ctx, name, now, dls)
	}
	if ctx.Err() != nil && werr != nil {
		return nil, false, true, werr // stopped, not failing
	}
	if b.archive.record(b.log, name, len(dls), werr, now) {
		// Told once a failure, not at each retry: archive.failed.
		err := b.update(ctx, func(tx Tx, _ func(string)) error {
			// The error itself (paths, buckets, addresses) stays in the
			// log and the dashboard: a notification goes outside.
			return b.raise(ctx, tx, Event{Kind: EventArchiveFailed, Queue: name, At: now,
				Detail: "the archive cannot be written (its error is in the log); the queue's dead letters are kept, not expired, until it can"})
		})
		if err != nil {
			b.log.Error("archive: tell the failure (told again at the next try)", "queue", name, "err", err)
		}
		b.archive.told(name, err == nil)
	}
	if werr != nil {
		return nil, false, true, fmt.Errorf("archive of %s: %w", name, werr)
	}
	ids = make(map[int64]bool, len(dls))
	for _, d := range dls {
		ids[d.ID] = true
	}
	return ids, more, true, nil
}

// ImportedDeadLetter is a dead letter read back from an archive (or an
// NDJSON export) to be filed again: its message's id as archived, where
// it was, what failed and the payload.
type ImportedDeadLetter struct {
	MessageID     string
	Queue         string
	Partition     string
	Group         string
	TransactionID string
	TraceID       string
	Payload       []byte
	Error         string
	ErrorBytes    int // the size of the error text as sent when Error was cut (0: whole)
	RetryCount    int
	FailedAt      time.Time
	CreatedAt     time.Time
	// ConsumerVersion is the version of the ack that filed it ("" none).
	ConsumerVersion string
}

// ImportSkip is a dead letter of an import that was not filed, and why.
type ImportSkip struct {
	Index  int // in the slice given to ImportDeadLetters
	Reason string
}

// ImportResult is what ImportDeadLetters did.
type ImportResult struct {
	Imported int
	Skipped  []ImportSkip
}

// AuditArchiveImport is the audit action of an import of dead letters
// from an archive (one entry a transaction of it).
const AuditArchiveImport = "archive_import"

// ArchiveTx is what the archive's import needs from storage.
type ArchiveTx interface {
	// SeqForImport says which message seq a dead letter read back from
	// an archive (i) is filed under in group i.GroupID of partition
	// i.PartitionID: dup when that group already has a dead letter of
	// the message (by i.Seq, or by i.TransactionID in the partition);
	// else i.Seq itself when it is that message's here (a message kept
	// with that seq, partition, transactionId and push time i.CreatedAt,
	// or a removed dead letter's record of that seq, partition and
	// transactionId); else a new seq, above every seq given so far, that
	// no message has nor will have (the placeholder that keeps seqs
	// growing moves above it, at i.Now). It reads dead_letters (by seq
	// and group, and by transaction_id), messages (by seq) and
	// removed_dead_letters (by seq), and may write the placeholder row
	// of messages.
	SeqForImport(ctx context.Context, i ImportSeq) (newSeq int64, dup bool, err error)
}

// ImportSeq is what ArchiveTx.SeqForImport is asked about: a dead letter
// read back from an archive, of message Seq (0: none named) of the
// partition PartitionID with TransactionID, pushed at CreatedAt, to be
// filed in group GroupID; Now is the import's time.
type ImportSeq struct {
	Seq           int64
	PartitionID   int64
	GroupID       int64
	TransactionID string
	CreatedAt     time.Time
	Now           time.Time
}

// ImportDeadLetters files ds again as dead letters, in one transaction,
// audited under actor as an import from source: each into its queue,
// partition (created if it is gone) and group, which must exist and have
// read the queue. A dead letter keeps its message id when that message
// is this database's (see ArchiveTx.SeqForImport); otherwise it gets a
// new one, pushed now. One that its group already has, or that is not
// valid (names, payload not JSON, error text too long, no failure time),
// is skipped, with the reason. The caller keeps ds to a transaction's
// worth (a thousand, a few MB).
func (b *Broker) ImportDeadLetters(ctx context.Context, actor, source string, ds []ImportedDeadLetter) (ImportResult, error) {
	var res ImportResult
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		res = ImportResult{}
		now := b.now()
		type key struct{ q, g int64 }
		depth := map[key]int64{}
		var order []key
		queues := map[string]Queue{}
		var names []string
		for i, d := range ds {
			g, why, err := b.importOne(ctx, tx, d, now, queues)
			if err != nil {
				return err
			}
			if why != "" {
				res.Skipped = append(res.Skipped, ImportSkip{Index: i, Reason: why})
				continue
			}
			q := queues[d.Queue]
			k := key{q.ID, g}
			if depth[k] == 0 {
				order = append(order, k)
				if len(names) == 0 || names[len(names)-1] != q.Name {
					names = append(names, q.Name)
				}
			}
			depth[k]++
			res.Imported++
		}
		for _, k := range order {
			if err := tx.AddStats(ctx, k.q, k.g, Stats{Depth: depth[k]}, time.Time{}); err != nil {
				return fmt.Errorf("import: stats: %w", err)
			}
		}
		for _, n := range names {
			touched(n)
		}
		detail := fmt.Sprintf("archive import of %s: %d dead letters imported, %d skipped", source, res.Imported, len(res.Skipped))
		return audit(ctx, tx, now, actor, AuditArchiveImport, strings.Join(dedupe(names), ","), "", res.Imported, detail)
	})
	if err != nil {
		return ImportResult{}, fmt.Errorf("import: %w", err)
	}
	return res, nil
}

// maxImportRetries bounds an imported dead letter's retryCount: the
// retries a queue may give (retryLimit at most 1000).
const maxImportRetries = 1000

// importTx is what importing a dead letter reads and writes: the queue,
// partition and subscription it files under, its error group, the dead
// letter and the archive's marks.
type importTx interface {
	ArchiveTx
	DeadLetterTx
	ErrorGroupStateTx
	PartitionTx
	QueueTx
	SubscriptionTx
}

// importOne files d in tx and returns its group's id, or returns why it
// is skipped.
func (b *Broker) importOne(ctx context.Context, tx importTx, d ImportedDeadLetter, now time.Time, queues map[string]Queue) (groupID int64, skip string, err error) {
	skip, err = b.fileImported(ctx, tx, d, now, queues, &groupID)
	return groupID, skip, err
}

func (b *Broker) fileImported(ctx context.Context, tx importTx, d ImportedDeadLetter, now time.Time, queues map[string]Queue, groupID *int64) (skip string, err error) {
	for _, n := range []struct{ what, v string }{{"queue", d.Queue}, {"partition", d.Partition}, {"consumer group", d.Group}} {
		if !ValidName(n.v) {
			return fmt.Sprintf("the %s name is not valid", n.what), nil
		}
	}
	// As a push checks its items (validatePush; the payload's size is
	// the caller's, which knows the push limit).
	switch {
	case !utf8.Valid(d.Payload):
		return "the payload is not valid UTF-8", nil
	case !json.Valid(d.Payload):
		return "the payload is not JSON", nil
	case len(d.TransactionID) > MaxNameLength:
		return fmt.Sprintf("transactionId is longer than %d bytes", MaxNameLength), nil
	case len(d.TraceID) > MaxNameLength:
		return fmt.Sprintf("traceId is longer than %d bytes", MaxNameLength), nil
	case !plainText(d.TransactionID):
		return "transactionId is not UTF-8 text without NUL characters", nil
	case !plainText(d.TraceID):
		return "traceId is not UTF-8 text without NUL characters", nil
	}
	if err := checkConsumerVersion(d.ConsumerVersion); err != nil {
		return err.Error(), nil
	}
	if d.TransactionID == "" {
		// As a push makes one for a message sent without: the id the line
		// names (a message id, unique where it came from), so that the
		// same line imported again is found there (SeqForImport).
		d.TransactionID = d.MessageID
	}
	if len(d.Error) > MaxErrorText+len("…") {
		return fmt.Sprintf("the error text is longer than %d bytes", MaxErrorText), nil
	}
	switch {
	case d.RetryCount < 0 || d.RetryCount > maxImportRetries:
		return fmt.Sprintf("retryCount is not between 0 and %d", maxImportRetries), nil
	case d.ErrorBytes != 0 && d.ErrorBytes < len(strings.TrimSuffix(d.Error, "…")):
		return "errorCut.sentBytes is less than the error text kept", nil
	case d.FailedAt.After(now):
		return "failedAt is in the future", nil
	case !d.CreatedAt.IsZero() && d.CreatedAt.After(d.FailedAt):
		return "createdAt is after failedAt", nil
	}
	if d.FailedAt.IsZero() || d.RetryCount < 0 || d.ErrorBytes < 0 {
		return "no failure time, or a negative count", nil
	}
	q, ok := queues[d.Queue]
	if !ok {
		if q, err = tx.QueueByName(ctx, d.Queue); isNotFound(err) {
			return fmt.Sprintf("queue %s does not exist", d.Queue), nil
		} else if err != nil {
			return "", fmt.Errorf("import: queue: %w", err)
		}
		queues[d.Queue] = q
	}
	g, err := tx.GroupID(ctx, d.Group, false)
	if isNotFound(err) {
		return fmt.Sprintf("consumer group %s does not exist", d.Group), nil
	}
	if err != nil {
		return "", fmt.Errorf("import: group: %w", err)
	}
	if sub, err := tx.Subscribed(ctx, q.ID, g); err != nil {
		return "", fmt.Errorf("import: subscription: %w", err)
	} else if !sub {
		return fmt.Sprintf("consumer group %s does not read queue %s", d.Group, d.Queue), nil
	}
	p, err := partitionOrCreate(ctx, tx, q, d.Partition, now)
	if err != nil {
		return "", fmt.Errorf("import: partition: %w", err)
	}
	_, seq, _ := ParseMessageID(d.MessageID)
	created := d.CreatedAt.Truncate(time.Millisecond)
	newSeq, dup, err := tx.SeqForImport(ctx, ImportSeq{Seq: seq, PartitionID: p.ID, GroupID: g, TransactionID: d.TransactionID, CreatedAt: created, Now: now})
	if err != nil {
		return "", fmt.Errorf("import: %w", err)
	}
	if dup {
		return "its group has this dead letter already", nil
	}
	if newSeq != seq || created.IsZero() {
		// A message of elsewhere gets a new id, pushed now: seqs stay in
		// the order of push times (the search's time windows).
		created = now
	}
	dl := DeadLetter{Seq: newSeq, QueueID: q.ID, PartitionID: p.ID, GroupID: g, Error: d.Error, ErrorBytes: d.ErrorBytes,
		RetryCount: d.RetryCount, FailedAt: d.FailedAt, Fingerprint: Fingerprint(d.Error), TransactionID: d.TransactionID,
		Payload: d.Payload, TraceID: d.TraceID, CreatedAt: created, ConsumerVersion: d.ConsumerVersion}
	if err := tx.InsertDeadLetter(ctx, &dl, false); err != nil {
		return "", fmt.Errorf("import: %w", err)
	}
	// An imported dead letter is filed into its error group's whole-life
	// funnel (not its hours, as its trend is of filings here): it changes
	// no group's state, being old news.
	if _, err := tx.AddErrorGroupFunnel(ctx, ErrorGroupKey{QueueID: q.ID, GroupID: g, Fingerprint: dl.Fingerprint}, Funnel{Filed: 1}, dl.FailedAt); err != nil {
		return "", fmt.Errorf("import: error group: %w", err)
	}
	*groupID = g
	return "", nil
}

// dedupe returns names without repeats, in order.
func dedupe(names []string) []string {
	seen := map[string]bool{}
	out := names[:0:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
