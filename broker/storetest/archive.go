package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/archive"
	"github.com/lazarus-dlq/lazarus/broker"
)

// syncLog is a log the test reads.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// withArchive gives the bundle a broker that archives to a (nil: none),
// logging to the returned log.
func (s *bundle) withArchive(a broker.Archiver) *syncLog {
	l := &syncLog{}
	cfg := broker.Config{Store: s.db, Clock: s.clock, Logger: slog.New(slog.NewTextHandler(l, nil))}
	if a != nil {
		cfg.Archive = a
	}
	s.b = broker.New(cfg)
	return l
}

// archiving sets orders up to archive its dead letters, expiring after
// an hour, with billing reading it and three dead letters (the payloads
// and errors of the three kinds: plain, a line break, a long error).
func (s *bundle) archiving() []broker.DeadLetter {
	s.t.Helper()
	s.configure("orders", map[string]any{"deadLetterRetentionSeconds": 3600, "deadLetterArchive": true})
	s.pop("orders", "billing", 1)
	if _, err := s.b.Push(s.ctx, []broker.PushItem{
		{Queue: "orders", Partition: "p", TransactionID: "m1", Payload: json.RawMessage(`{"n":1,"html":"<b>&</b>"}`), TraceID: "trace-1"},
		{Queue: "orders", Partition: "q", TransactionID: "m2", Payload: json.RawMessage("{\n  \"n\": 2\n}")},
		{Queue: "orders", Partition: "p", TransactionID: "m3", Payload: json.RawMessage(`[3]`)},
	}); err != nil {
		s.t.Fatal(err)
	}
	s.fail("orders", "billing", 1, "zebrafish exploded")
	if r := s.ackVersion("orders", "billing", broker.AckDLQ, "quokka timeout\nat line 2", "2.4.1"); !r.DLQ { // and a consumer version
		s.t.Fatalf("not filed: %+v", r)
	}
	s.fail("orders", "billing", 1, strings.Repeat("x", broker.MaxErrorText+100))
	dls := s.dead("orders", "billing")
	if len(dls) != 3 {
		s.t.Fatalf("%d dead letters, want 3", len(dls))
	}
	return dls
}

// archiveLines reads every line of the queue's archive file of the day.
func archiveLines(t *testing.T, dir, queue string, day time.Time) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, archive.FileName(queue, day)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	if err := archive.Read(f, func(_ int, l []byte) error {
		lines = append(lines, bytes.Clone(l))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return lines
}

// asJSON decodes a line for comparison.
func asJSON(t *testing.T, line []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(line, &v); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return v
}

// A queue with deadLetterArchive writes its dead letters, as the export
// writes them, to its day's file before they expire: the file's lines
// are the expired dead letters; a later run of the same day appends a
// gzip member that the file's reader reads with the first.
func testArchiveHoldsTheExpiredDeadLetters(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	dir := t.TempDir()
	a, err := archive.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.withArchive(a)
	before := s.archiving()
	s.clock.Advance(2 * time.Hour)
	if r := s.maintain(); r.Removed != 3 {
		t.Fatalf("expired %d, want 3", r.Removed)
	}
	if n := len(s.dead("orders", "billing")); n != 0 {
		t.Fatalf("%d dead letters left", n)
	}
	lines := archiveLines(t, dir, "orders", s.clock.Now())
	if len(lines) != 3 {
		t.Fatalf("%d lines archived, want 3", len(lines))
	}
	want := map[string]map[string]any{}
	for _, d := range before {
		l, err := archive.Line(d)
		if err != nil {
			t.Fatal(err)
		}
		want[d.MessageID()] = asJSON(t, l)
	}
	for _, l := range lines {
		got := asJSON(t, l)
		w, ok := want[got["id"].(string)]
		if !ok {
			t.Fatalf("archived %v, not one of the dead letters", got["id"])
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("archived\n%v\nwant\n%v", got, w)
		}
		delete(want, got["id"].(string))
	}
	if st, ok := s.b.ArchiveStatusOf("orders"); !ok || st.Written != 3 || st.Failures != 0 || !st.FailingSince.IsZero() {
		t.Errorf("status %+v", st)
	}

	// Later the same day: a second member of the same file.
	s.push("orders", "p", "m4")
	s.fail("orders", "billing", 1, "again")
	s.clock.Advance(2 * time.Hour)
	if r := s.maintain(); r.Removed != 1 {
		t.Fatalf("expired %d, want 1", r.Removed)
	}
	if lines := archiveLines(t, dir, "orders", s.clock.Now()); len(lines) != 4 || asJSON(t, lines[3])["transactionId"] != "m4" {
		t.Fatalf("the day's file has %d lines, want 4 ending with m4", len(lines))
	}
}

// An archive that cannot be written (its queue's directory is a file)
// expires nothing: the dead letters stay, counted as they were; the
// failure is counted at each run, logged once, and the queue's status
// says since when and why; once the archive can be written, the next
// run archives and expires them.
func testArchiveThatCannotWriteExpiresNothing(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	dir := t.TempDir()
	a, err := archive.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := s.withArchive(a)
	s.archiving()
	blocker := filepath.Join(dir, "orders")
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(2 * time.Hour)
	failedAt := s.clock.Now()
	for run := 1; run <= 2; run++ {
		rep, err := s.b.Maintain(s.ctx)
		if err == nil {
			t.Fatalf("run %d: no error", run)
		}
		if r := rep.Task(broker.TaskDeadLetters); r.Removed != 0 || r.Err == nil {
			t.Fatalf("run %d: %+v, want nothing expired and the error", run, r)
		}
		if n := len(s.dead("orders", "billing")); n != 3 {
			t.Fatalf("run %d: %d dead letters kept, want 3", run, n)
		}
		st, _ := s.b.ArchiveStatusOf("orders")
		if st.Failures != int64(run) || !st.FailingSince.Equal(failedAt) || !strings.Contains(st.Err, "not a directory") || st.Written != 0 {
			t.Fatalf("run %d: status %+v", run, st)
		}
		s.clock.Advance(time.Minute)
	}
	if st := s.stats("orders", "billing"); st.Depth != 3 || st.DeadLettersExpired != 0 {
		t.Errorf("stats %+v", st)
	}
	if n := log.count("archive: cannot write"); n != 1 {
		t.Errorf("logged %d times, want once", n)
	}
	if n := log.count("zebrafish"); n != 0 {
		t.Errorf("an error text was logged")
	}

	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if r := s.maintain(); r.Removed != 3 {
		t.Fatalf("expired %d once writable, want 3", r.Removed)
	}
	st, _ := s.b.ArchiveStatusOf("orders")
	if st.Written != 3 || !st.FailingSince.IsZero() || st.Err != "" || st.Failures != 2 {
		t.Errorf("status %+v", st)
	}
	if n := log.count("archive: writing again"); n != 1 {
		t.Errorf("recovery logged %d times", n)
	}
	if n := len(archiveLines(t, dir, "orders", s.clock.Now())); n != 3 {
		t.Errorf("%d lines archived", n)
	}
}

// failingArchive fails every write, as a full disk does.
type failingArchive struct{ calls int }

func (f *failingArchive) Archive(_ context.Context, _ string, _ time.Time, dls []broker.DeadLetter) error {
	f.calls++
	return errors.New("write /archive/orders/2026-11-01.ndjson.gz: no space left on device")
}

// A full disk and no archive directory at all keep the dead letters too;
// a queue that does not archive expires as before, beside them.
func testArchiveFullOrMissingKeepsTheDeadLetters(t *testing.T, harness Harness) {
	t.Parallel()
	for _, c := range []struct {
		name string
		a    broker.Archiver
		want string
	}{
		{"full", &failingArchive{}, "no space left"},
		{"none", nil, "no archive directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			s.withArchive(c.a)
			s.archiving()
			s.configure("plain", map[string]any{"deadLetterRetentionSeconds": 3600})
			s.pop("plain", "billing", 1)
			s.push("plain", "p", "x1")
			s.fail("plain", "billing", 1, "boom")
			s.clock.Advance(2 * time.Hour)
			_, err := s.b.Maintain(s.ctx)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("maintain: %v, want %q", err, c.want)
			}
			if c.name == "none" && !errors.Is(err, broker.ErrNoArchive) {
				t.Errorf("not ErrNoArchive: %v", err)
			}
			if n := len(s.dead("orders", "billing")); n != 3 {
				t.Fatalf("%d dead letters kept, want 3", n)
			}
			if n := len(s.dead("plain", "billing")); n != 0 {
				t.Errorf("the queue that does not archive kept %d", n)
			}
			if st, _ := s.b.ArchiveStatusOf("orders"); st.Failures != 1 || !strings.Contains(st.Err, c.want) {
				t.Errorf("status %+v", st)
			}
			if _, ok := s.b.ArchiveStatusOf("plain"); ok {
				t.Errorf("a status for a queue that does not archive")
			}
		})
	}
}

// readArchive parses an archive file's lines for import.
func readArchive(t *testing.T, dir, queue string, day time.Time) []broker.ImportedDeadLetter {
	t.Helper()
	var out []broker.ImportedDeadLetter
	for _, l := range archiveLines(t, dir, queue, day) {
		d, err := archive.Parse(l)
		if err != nil {
			t.Fatalf("parse %q: %v", l, err)
		}
		out = append(out, d)
	}
	return out
}

// Archived, expired, imported: the dead letters are back as they were
// (message id, partition, payload, error text and its cut, retries, the
// failure's time, the consumer version), counted in depth and their error groups; imported
// again, each is skipped (its group has it). Into another database, the
// dead letters get new message ids above every seq, which no push takes
// afterwards.
func testArchiveImportRoundTrips(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	dir := t.TempDir()
	a, err := archive.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.withArchive(a)
	before := s.archiving()
	s.clock.Advance(2 * time.Hour)
	if r := s.maintain(); r.Removed != 3 {
		t.Fatalf("expired %d", r.Removed)
	}
	ds := readArchive(t, dir, "orders", s.clock.Now())
	s.configure("orders", map[string]any{"deadLetterRetentionSeconds": 0}) // not expired again at once

	res, err := s.b.ImportDeadLetters(s.ctx, "cli", "orders.ndjson.gz", ds)
	if err != nil || res.Imported != 3 || len(res.Skipped) != 0 {
		t.Fatalf("import: %+v, %v", res, err)
	}
	after := s.dead("orders", "billing")
	if len(after) != 3 {
		t.Fatalf("%d dead letters back", len(after))
	}
	for i, d := range after {
		b := before[i]
		if d.MessageID() != b.MessageID() || d.Partition != b.Partition || !bytes.Equal(d.Payload, b.Payload) || d.Error != b.Error ||
			d.ErrorBytes != b.ErrorBytes || d.RetryCount != b.RetryCount || !d.FailedAt.Equal(b.FailedAt) || d.TraceID != b.TraceID ||
			d.TransactionID != b.TransactionID || d.Fingerprint != b.Fingerprint || d.ConsumerVersion != b.ConsumerVersion {
			t.Errorf("back\n%+v\nwas\n%+v", d, b)
		}
	}
	if st := s.stats("orders", "billing"); st.Depth != 3 {
		t.Errorf("depth %d, want 3", st.Depth)
	}
	au, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditArchiveImport}, broker.Page{Limit: 10})
	if err != nil || len(au) != 1 || au[0].Count != 3 || au[0].Actor != "cli" || !strings.Contains(au[0].Detail, "orders.ndjson.gz") {
		t.Errorf("audit %+v, %v", au, err)
	}

	res, err = s.b.ImportDeadLetters(s.ctx, "cli", "again", ds)
	if err != nil || res.Imported != 0 || len(res.Skipped) != 3 || !strings.Contains(res.Skipped[0].Reason, "already") {
		t.Fatalf("import again: %+v, %v", res, err)
	}

	// Another database: the queue and group exist, the partitions not.
	o := setup(t, harness)
	o.push("orders", "z", "elsewhere-1")
	o.pop("orders", "billing", 1)
	o.clock.Advance(5 * time.Hour)
	bad := append([]broker.ImportedDeadLetter{}, ds...)
	bad = append(bad, broker.ImportedDeadLetter{MessageID: ds[0].MessageID, Queue: "nope", Partition: "p", Group: "billing", Payload: []byte(`{}`), FailedAt: s.clock.Now()})
	res, err = o.b.ImportDeadLetters(o.ctx, "cli", "f", bad)
	if err != nil || res.Imported != 3 || len(res.Skipped) != 1 || res.Skipped[0].Index != 3 || !strings.Contains(res.Skipped[0].Reason, "queue nope does not exist") {
		t.Fatalf("import elsewhere: %+v, %v", res, err)
	}
	got := o.dead("orders", "billing")
	var top int64
	for _, d := range got {
		if !d.CreatedAt.Equal(o.clock.Now()) || d.Seq <= 1 {
			t.Errorf("imported elsewhere as seq %d pushed at %v, want a new seq pushed now", d.Seq, d.CreatedAt)
		}
		top = max(top, d.Seq)
	}
	pushed := o.push("orders", "z", "after-import")
	if _, seq, _ := broker.ParseMessageID(pushed[0].MessageID); seq <= top {
		t.Errorf("a push after the import took seq %d, not above the imported %d", seq, top)
	}
	if n := len(o.dead("orders", "billing")); n != 3 {
		t.Errorf("%d dead letters after the push", n)
	}
}

// countingArchive counts the dead letters of each write, keeping nothing.
type countingArchive struct {
	mu     sync.Mutex
	writes []int
	ids    map[int64]int
}

func (c *countingArchive) Archive(_ context.Context, _ string, _ time.Time, dls []broker.DeadLetter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, len(dls))
	if c.ids == nil {
		c.ids = map[int64]int{}
	}
	for _, d := range dls {
		c.ids[d.ID]++
	}
	return nil
}

// The archive writes a chunk of 500 dead letters at most, or fewer once
// their payloads reach 4 MB, and each chunk's transaction expires those
// it wrote: every dead letter is archived once and expires.
func testArchiveWritesInChunks(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	c := &countingArchive{}
	s.withArchive(c)
	s.configure("orders", map[string]any{"deadLetterRetentionSeconds": 3600, "deadLetterArchive": true})
	s.pop("orders", "billing", 1)
	s.deadLettered("orders", "billing", 1010)
	s.clock.Advance(2 * time.Hour)
	if r := s.maintain(); r.Removed != 1010 || r.Chunks != 3 {
		t.Fatalf("%+v, want 1010 expired in 3 chunks", r)
	}
	if !reflect.DeepEqual(c.writes, []int{500, 500, 10}) || len(c.ids) != 1010 {
		t.Fatalf("writes %v of %d dead letters", c.writes, len(c.ids))
	}

	// Big payloads: 700 kB each, 6 reach 4 MB.
	big := `"` + strings.Repeat("x", 700<<10) + `"`
	var items []broker.PushItem
	for i := range 8 {
		items = append(items, broker.PushItem{Queue: "orders", Partition: "p", TransactionID: "big-" + string(rune('a'+i)), Payload: json.RawMessage(big)})
	}
	if _, err := s.b.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	s.fail("orders", "billing", 8, "too big")
	s.clock.Advance(2 * time.Hour)
	c.writes = nil
	if r := s.maintain(); r.Removed != 8 || r.Chunks != 2 {
		t.Fatalf("%+v, want 8 expired in 2 chunks", r)
	}
	if !reflect.DeepEqual(c.writes, []int{6, 2}) {
		t.Fatalf("writes %v, want [6 2]", c.writes)
	}
	for id, n := range c.ids {
		if n != 1 {
			t.Fatalf("dead letter %d archived %d times", id, n)
		}
	}
}

// An import trusts no value of the file: a retry count out of range, an
// error cut shorter than the text kept, a failure in the future or a
// push after the failure is skipped with its reason, and nothing of it
// is filed.
func testArchiveImportRefusesValuesOutOfRange(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	res, err := s.b.Push(s.ctx, []broker.PushItem{{Queue: "orders", Partition: "p", TransactionID: "t1", Payload: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	s.pop("orders", "billing", 1)
	now := s.clock.Now()
	ok := broker.ImportedDeadLetter{MessageID: res[0].MessageID, Queue: "orders", Partition: "p", Group: "billing", Payload: []byte(`{}`),
		Error: "boom", FailedAt: now.Add(-time.Minute), CreatedAt: now.Add(-time.Hour)}
	var bad []broker.ImportedDeadLetter
	for _, f := range []func(d *broker.ImportedDeadLetter){
		func(d *broker.ImportedDeadLetter) { d.RetryCount = -1 },
		func(d *broker.ImportedDeadLetter) { d.RetryCount = 1001 },
		func(d *broker.ImportedDeadLetter) { d.Error, d.ErrorBytes = "a longer error text", 3 },
		func(d *broker.ImportedDeadLetter) { d.FailedAt = now.Add(time.Hour) },
		func(d *broker.ImportedDeadLetter) { d.CreatedAt = d.FailedAt.Add(time.Second) },
		func(d *broker.ImportedDeadLetter) { d.ConsumerVersion = "v1\n<script>" },
	} {
		d := ok
		f(&d)
		bad = append(bad, d)
	}
	out, err := s.b.ImportDeadLetters(s.ctx, "cli", "bad", bad)
	if err != nil {
		t.Fatal(err)
	}
	if out.Imported != 0 || len(out.Skipped) != len(bad) {
		t.Fatalf("import: %+v, want all %d skipped", out, len(bad))
	}
	for i, want := range []string{"retryCount", "retryCount", "sentBytes", "future", "createdAt", "consumerVersion"} {
		if !strings.Contains(out.Skipped[i].Reason, want) {
			t.Errorf("line %d skipped for %q, want it to say %s", i, out.Skipped[i].Reason, want)
		}
	}
	if n := len(s.dead("orders", "billing")); n != 0 {
		t.Errorf("%d dead letters filed", n)
	}
}
