package archive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

var day = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// deadLetters makes n dead letters of queue orders with payloads of size
// random (incompressible) bytes, as hex.
func deadLetters(t testing.TB, n, size int) []broker.DeadLetter {
	t.Helper()
	out := make([]broker.DeadLetter, n)
	for i := range out {
		b := make([]byte, size/2)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		out[i] = broker.DeadLetter{ID: int64(i + 1), Seq: int64(i + 1), Queue: "orders", Partition: "p", Group: "billing",
			Error: "boom", FailedAt: day, CreatedAt: day, TransactionID: "t", Payload: []byte(`"` + hex.EncodeToString(b) + `"`)}
	}
	return out
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	if err := Read(f, func(_ int, l []byte) error {
		if _, err := Parse(l); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// A write that runs out of space (RLIMIT_FSIZE, as a full disk) fails and
// leaves the day's file as it was before it, so that the members written
// before still read whole, and a later write appends after them.
func TestArchiveFullDiskLeavesTheFileWhole(t *testing.T) {
	// Not parallel: the limit is the process's.
	a, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Archive(ctx, "orders", day, deadLetters(t, 3, 100)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(a.Root(), FileName("orders", day))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	limit := syscall.Rlimit{Cur: uint64(st.Size() + 4096), Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Skipf("cannot limit the file size: %v", err)
	}
	werr := a.Archive(ctx, "orders", day, deadLetters(t, 50, 1000))
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if werr == nil || !strings.Contains(werr.Error(), "file too large") {
		t.Fatalf("write past the limit: %v, want the error", werr)
	}
	if st2, err := os.Stat(path); err != nil || st2.Size() != st.Size() {
		t.Fatalf("after the failed write: size %d, want %d (%v)", st2.Size(), st.Size(), err)
	}
	if n := countLines(t, path); n != 3 {
		t.Fatalf("%d lines read after the failed write, want 3", n)
	}
	if err := a.Archive(ctx, "orders", day, deadLetters(t, 2, 100)); err != nil {
		t.Fatal(err)
	}
	if n := countLines(t, path); n != 5 {
		t.Fatalf("%d lines after the next write, want 5", n)
	}
}

// Queue names are file names; those that start with '.' get a directory
// of their own, not the root's or its parent's, nor a hidden one.
func TestArchiveDirNames(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{"orders": "orders", ".": "%2E", "..": "%2E.", ".x": "%2Ex", "a.b-c_d": "a.b-c_d"} {
		if got := DirName(name); got != want {
			t.Errorf("DirName(%q) = %q, want %q", name, got, want)
		}
	}
	a, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Archive(context.Background(), "../x", day, deadLetters(t, 1, 10)); err == nil {
		t.Error("a queue name that is no name was written")
	}
	// Every valid name has a directory of at most 255 bytes, its own: the
	// longest names starting with '.' are cut and end in a hash of the
	// name; one of 253 bytes keeps the plain form.
	long := func(n int, last string) string { return "." + strings.Repeat("q", n-1-len(last)) + last }
	seen := map[string]string{}
	for _, name := range []string{long(255, "a"), long(255, "b"), long(254, "a"), long(253, "a"), strings.Repeat("z", 255)} {
		if !broker.ValidName(name) {
			t.Fatalf("%d bytes: not a valid name", len(name))
		}
		dir := DirName(name)
		if len(dir) > 255 {
			t.Errorf("DirName of %d bytes is %d bytes", len(name), len(dir))
		}
		if other, ok := seen[dir]; ok {
			t.Errorf("names of %d and %d bytes share directory %s", len(name), len(other), dir)
		}
		seen[dir] = name
		if err := a.Archive(context.Background(), name, day, deadLetters(t, 1, 10)); err != nil {
			t.Errorf("archive of a %d-byte name: %v", len(name), err)
		}
	}
	if got := DirName(long(253, "a")); got != "%2E"+long(253, "a")[1:] {
		t.Errorf("a 253-byte name's directory changed: %s", got)
	}
}

// Parse refuses what is not a dead letter's line, saying why without
// repeating the line.
func TestParseRefusesLinesThatAreNotDeadLetters(t *testing.T) {
	t.Parallel()
	good := `{"id":"01a196fb-1600-7000-8000-000000000002","transactionId":"t2","queue":"orders","partition":"q","consumerGroup":"billing","errorMessage":"e","retryCount":1,"createdAt":"2026-11-01T12:00:00.000Z","failedAt":"2026-11-01T12:00:00.000Z","traceId":null,"data":{"n":2}}`
	d, err := Parse([]byte(good))
	if err != nil || d.Queue != "orders" || string(d.Payload) != `{"n":2}` || d.Error != "e" || d.RetryCount != 1 || !d.FailedAt.Equal(day) {
		t.Fatalf("good line: %+v, %v", d, err)
	}
	for _, c := range []struct{ line, why string }{
		{`not json secret-payload`, "not a JSON object"},
		{`[1,2]`, "not a JSON object"},
		{good + ` {}`, "more than one"},
		{strings.Replace(good, `"id":"01a196fb-1600-7000-8000-000000000002",`, "", 1), "no id"},
		{strings.Replace(good, `01a196fb-1600-7000-8000-000000000002`, "nope", 1), "not a message id"},
		{strings.Replace(good, `"queue":"orders",`, "", 1), "no queue"},
		{strings.Replace(good, `,"data":{"n":2}`, "", 1), "no data"},
		{strings.Replace(good, `"failedAt":"2026-11-01T12:00:00.000Z"`, `"failedAt":"yesterday"`, 1), "failedAt"},
	} {
		_, err := Parse([]byte(c.line))
		if err == nil || !strings.Contains(err.Error(), c.why) || strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%.40q): %v, want %q", c.line, err, c.why)
		}
	}
}

// BenchmarkArchiveChunk writes a chunk of 500 dead letters of 1 kB of
// random payload each (compressed, appended, synced).
func BenchmarkArchiveChunk(b *testing.B) {
	a, err := New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	dls := deadLetters(b, 500, 1000)
	b.ResetTimer()
	for b.Loop() {
		if err := a.Archive(context.Background(), "orders", day, dls); err != nil {
			b.Fatal(err)
		}
	}
}

// A write torn by a crash (the process killed mid-write: its dead letters
// were not expired) leaves a broken member at the end of the day's file;
// the next process's first write cuts it off, so that what it appends
// reads whole, and a whole file is left as it is.
func TestArchiveCutsATornMemberBeforeAppending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	d, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, FileName("orders", day))
	if err := d.Archive(ctx, "orders", day, deadLetters(t, 3, 100)); err != nil {
		t.Fatal(err)
	}
	whole, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Archive(ctx, "orders", day, deadLetters(t, 4, 2000)); err != nil {
		t.Fatal(err)
	}
	full, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The crash: the second member half written.
	if err := os.Truncate(path, whole.Size()+(full.Size()-whole.Size())/2); err != nil {
		t.Fatal(err)
	}
	// The next process.
	d2, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Archive(ctx, "orders", day, deadLetters(t, 5, 100)); err != nil {
		t.Fatal(err)
	}
	if n := countLines(t, path); n != 3+5 {
		t.Fatalf("%d lines read, want 8: the first write's 3 and the last one's 5", n)
	}
	// A whole file is not cut.
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	d3, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := d3.Archive(ctx, "orders", day, deadLetters(t, 1, 100)); err != nil {
		t.Fatal(err)
	}
	if n := countLines(t, path); n != 9 {
		t.Fatalf("%d lines read, want 9", n)
	}
	after, err := os.Stat(path)
	if err != nil || after.Size() <= before.Size() {
		t.Fatalf("size %d after, %d before (%v): the whole file was cut", after.Size(), before.Size(), err)
	}
}

// The archive follows no link planted below its root, cuts no file it
// did not write, and makes its directories 0700 and its files 0600.
func TestArchiveFollowsNoLinkAndCutsNoForeignFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root, outside := t.TempDir(), t.TempDir()
	a, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(outside, "foreign")
	const content = "someone else's file\n"
	if err := os.WriteFile(foreign, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		if b, err := os.ReadFile(foreign); err != nil || string(b) != content {
			t.Fatalf("%s: the foreign file is now %q (%v)", what, b, err)
		}
		if es, _ := os.ReadDir(outside); len(es) != 1 {
			t.Fatalf("%s: %d entries written outside the root", what, len(es)-1)
		}
	}
	// A queue's directory that is a link to outside the root.
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := a.Archive(ctx, "linked", day, deadLetters(t, 1, 10)); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a linked queue directory: %v, want refused", err)
	}
	unchanged("linked directory")
	// The day's file a link to a foreign file.
	if err := os.Mkdir(filepath.Join(root, "orders"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(foreign, filepath.Join(root, FileName("orders", day))); err != nil {
		t.Fatal(err)
	}
	if err := a.Archive(ctx, "orders", day, deadLetters(t, 1, 10)); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a linked day's file: %v, want refused", err)
	}
	unchanged("linked file")
	// A hard link to it (same file system: the temp dirs share one).
	if err := os.Mkdir(filepath.Join(root, "hard"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(foreign, filepath.Join(root, FileName("hard", day))); err == nil {
		if err := a.Archive(ctx, "hard", day, deadLetters(t, 1, 10)); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("a hard-linked day's file: %v, want refused", err)
		}
		unchanged("hard link")
	}
	// A file of the day that the archive did not write: not cut.
	if err := os.Mkdir(filepath.Join(root, "planted"), 0o700); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(root, FileName("planted", day))
	if err := os.WriteFile(planted, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Archive(ctx, "planted", day, deadLetters(t, 1, 10)); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a foreign day's file: %v, want refused", err)
	}
	if b, err := os.ReadFile(planted); err != nil || string(b) != content {
		t.Fatalf("the planted file is now %q (%v)", b, err)
	}
	// What the archive makes is its own.
	if err := a.Archive(ctx, "fresh", day, deadLetters(t, 1, 10)); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{filepath.Join(root, "fresh"): 0o700, filepath.Join(root, FileName("fresh", day)): 0o600} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, st.Mode().Perm(), err, want)
		}
	}
}

// A dead letter's consumer version goes into its line, and back out of
// it; a line without one (an older archive) has none.
func TestLineKeepsTheConsumerVersion(t *testing.T) {
	t.Parallel()
	d := deadLetters(t, 2, 8)
	d[0].ConsumerVersion = "2.4.1"
	for i, want := range []string{"2.4.1", ""} {
		b, err := Line(d[i])
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(string(b), `"consumerVersion"`); has != (want != "") {
			t.Errorf("line %d: %s", i, b)
		}
		got, err := Parse(b)
		if err != nil || got.ConsumerVersion != want {
			t.Errorf("line %d parsed: %q %v, want %q", i, got.ConsumerVersion, err, want)
		}
	}
}
