// Package archive keeps dead letters before they expire
// (deadLetterArchive, issue 19) in compressed NDJSON files, one a queue a
// day: <dir>/<queue>/<YYYY-MM-DD>.ndjson.gz (the day in UTC of the
// maintenance run that expired them). Each write appends a gzip member
// to the day's file, which zcat and gzip readers read whole, and syncs
// it before it returns. Each line is a dead letter as the dashboard's
// NDJSON export writes it (the API's dead letter object, data last), so
// one format serves both, and `lazarus archive import` reads either.
// Directories are made 0700 and files 0600 (dead letters hold personal
// data); no link below the root is followed, and no file the archive did
// not write is cut (openDay, repair).
package archive

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Dir is an archive directory; it implements broker.Archiver.
type Dir struct {
	root string
	mu   sync.Mutex // one write at a time: appends to a file never interleave
	// checked are the files this process has checked end in a whole
	// member (a crash may have left a torn one: Repair), under mu.
	checked map[string]bool
}

// New returns the archive in directory root, creating it if missing.
func New(root string) (*Dir, error) {
	if root == "" {
		return nil, errors.New("archive: no directory given")
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	return &Dir{root: root, checked: map[string]bool{}}, nil
}

// Root is the archive's directory.
func (d *Dir) Root() string { return d.root }

// DirName is the directory of queue's files under the archive's root:
// the name itself (ValidName names are file names), a leading '.'
// written %2E so that "." and ".." name a directory of their own and no
// queue's is hidden ('%' is in no queue's name). A name that this makes
// longer than a file name may be (maxDirName: the 254- and 255-byte
// names that start with '.') keeps its first bytes and ends in '%' and
// 16 hex digits of the name's SHA-256, so that every valid name has a
// directory and two names never share one; every other name's directory
// is the one it always was. The import reads the queue from each line,
// not from the directory: any archive file reads the same wherever it is.
func DirName(queue string) string {
	name := queue
	if strings.HasPrefix(queue, ".") {
		name = "%2E" + queue[1:]
	}
	if len(name) <= maxDirName {
		return name
	}
	sum := sha256.Sum256([]byte(queue))
	tail := "%" + hex.EncodeToString(sum[:8])
	return name[:maxDirName-len(tail)] + tail
}

// maxDirName is the longest file name of Linux's file systems (NAME_MAX),
// in bytes.
const maxDirName = 255

// FileName is the file of a day's dead letters of a queue, relative to
// the root: <queue>/<YYYY-MM-DD>.ndjson.gz, the day of at in UTC.
func FileName(queue string, at time.Time) string {
	return filepath.Join(DirName(queue), at.UTC().Format("2006-01-02")+".ndjson.gz")
}

// Archive appends dls to the day's file of queue as one gzip member and
// syncs the file (and, for a new file, its directory) before it returns
// nil. On an error the file is cut back to its size before the write, so
// that a failed write (a full disk) leaves no broken member that would
// hide the later ones from a reader.
func (d *Dir) Archive(ctx context.Context, queue string, at time.Time, dls []broker.DeadLetter) error {
	if !broker.ValidName(queue) {
		return fmt.Errorf("archive: queue name %q is not a valid name", queue)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for _, dl := range dls {
		line, err := Line(dl)
		if err != nil {
			return err
		}
		if _, err := zw.Write(line); err != nil {
			return fmt.Errorf("archive: compress: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("archive: compress: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	name := FileName(queue, at)
	path := filepath.Join(d.root, name)
	f, dir, newDir, newFile, err := openDay(d.root, DirName(queue), filepath.Base(name))
	if err != nil {
		return err
	}
	defer dir.Close()
	if !d.checked[path] && !newFile {
		// The first write of this process to the file: a crash in an
		// earlier one's write may have left a torn member at its end,
		// which would hide from readers every member appended after it.
		if err := repair(f, path); err != nil {
			f.Close()
			return err
		}
	}
	d.checked[path] = true
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("archive: %w", err)
	}
	size := st.Size()
	if _, err = f.Write(buf.Bytes()); err == nil {
		err = f.Sync()
	}
	if err != nil {
		// Cut back what was written of the member (best effort: a disk
		// that is full still lets a file shrink): only what this write
		// added.
		_ = f.Truncate(size)
		_ = f.Sync()
		f.Close()
		return fmt.Errorf("archive: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("archive: write %s: %w", path, err)
	}
	if newFile {
		if err := dir.Sync(); err != nil {
			return fmt.Errorf("archive: sync %s: %w", dir.Name(), err)
		}
		if newDir {
			if err := syncDir(d.root); err != nil {
				return err
			}
		}
	}
	return nil
}

// repair cuts the file f (opened to read and append) back to the end of
// its last whole gzip member: what a write torn by a crash left after it
// (the dead letters of that write were not expired: their transaction
// came after the sync) goes, so that the members appended next stay
// readable. A file that ends in a whole member is left as it is; so is
// one whose bytes past its whole members do not start a gzip member (as
// every write of the archive does): not a torn write of the archive's,
// it is refused, never cut.
func repair(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("archive: check %s: %w", path, err)
	}
	good, err := wholeMembers(io.NewSectionReader(f, 0, st.Size()))
	if err != nil {
		return fmt.Errorf("archive: check %s: %w", path, err)
	}
	if good == st.Size() {
		return nil
	}
	magic := []byte{0x1f, 0x8b, 8} // gzip, deflate: how every member of the archive starts
	head := make([]byte, len(magic))
	if n, _ := f.ReadAt(head, good); n == 0 || !bytes.Equal(head[:n], magic[:n]) {
		return fmt.Errorf("archive: %s holds what the archive did not write (no gzip member at byte %d): left alone, refused", path, good)
	}
	if err := f.Truncate(good); err != nil {
		return fmt.Errorf("archive: cut the torn end of %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("archive: cut the torn end of %s: %w", path, err)
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// wholeMembers returns how many bytes of r, from its start, are whole
// gzip members: each read to its end and its checksum checked. A member
// that does not decode or ends early ends the count. Only an error of
// reading r itself is returned.
func wholeMembers(r io.Reader) (int64, error) {
	cr := &countingReader{r: r}
	// A bufio.Reader is an io.ByteReader: the decompressor then reads
	// no further than each member's end, so the offset of a member's end
	// is what was read less what is buffered.
	br := bufio.NewReader(cr)
	var good int64
	zr, err := gzip.NewReader(br)
	for err == nil {
		zr.Multistream(false)
		if _, err = io.Copy(io.Discard, zr); err != nil {
			break
		}
		good = cr.n - int64(br.Buffered())
		err = zr.Reset(br)
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return 0, err
	}
	return good, nil
}

// syncDir makes a new entry of dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("archive: sync %s: %w", dir, err)
	}
	return nil
}

// timeFormat is the API's time format (milliseconds, UTC).
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// stamp is a time written as the API writes it (null when zero).
type stamp time.Time

// MarshalJSON implements json.Marshaler.
func (t stamp) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + time.Time(t).UTC().Format(timeFormat) + `"`), nil
}

// errorCut says that an error text was cut to be kept.
type errorCut struct {
	KeptBytes int `json:"keptBytes"`
	SentBytes int `json:"sentBytes"`
}

// record is the API's dead letter object without its data, in the
// order of its fields (web's deadLetterView: the export's line).
type record struct {
	ID            string    `json:"id"`
	TransactionID string    `json:"transactionId"`
	PartitionID   string    `json:"partitionId"`
	Queue         string    `json:"queue"`
	Partition     string    `json:"partition"`
	ConsumerGroup string    `json:"consumerGroup"`
	ErrorMessage  *string   `json:"errorMessage"`
	ErrorCut      *errorCut `json:"errorCut"`
	RetryCount    int       `json:"retryCount"`
	CreatedAt     stamp     `json:"createdAt"`
	FailedAt      stamp     `json:"failedAt"`
	TraceID       *string   `json:"traceId"`
	IsReplay      bool      `json:"isReplay"`
	Fingerprint   string    `json:"fingerprint"`
	// ConsumerVersion: the version of the ack that filed it, when any.
	ConsumerVersion string `json:"consumerVersion,omitempty"`
	ExpiresAt       *stamp `json:"expiresAt,omitempty"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Line is d as a line of NDJSON, as the dashboard's export writes it:
// the payload (data) last, byte for byte as pushed unless it holds a
// line break (then compacted).
func Line(d broker.DeadLetter) ([]byte, error) {
	r := record{ID: d.MessageID(), TransactionID: d.TransactionID, PartitionID: d.PartitionKey, Queue: d.Queue,
		Partition: d.Partition, ConsumerGroup: d.Group, ErrorMessage: optional(d.Error), RetryCount: d.RetryCount,
		CreatedAt: stamp(d.CreatedAt), FailedAt: stamp(d.FailedAt), TraceID: optional(d.TraceID), IsReplay: d.IsReplay(),
		Fingerprint: d.Fingerprint, ConsumerVersion: d.ConsumerVersion}
	if kept, sent, ok := d.ErrorCut(); ok {
		r.ErrorCut = &errorCut{KeptBytes: kept, SentBytes: sent}
	}
	if !d.ExpiresAt.IsZero() {
		e := stamp(d.ExpiresAt)
		r.ExpiresAt = &e
	}
	// As the export writes it: <, > and & in strings escaped (\u003c),
	// which keeps a line safe to paste into HTML.
	head, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	var buf bytes.Buffer
	buf.Write(head[:len(head)-1]) // {...} → {...,"data":<payload>}\n
	buf.WriteString(`,"data":`)
	if bytes.ContainsAny(d.Payload, "\r\n") {
		if err := json.Compact(&buf, d.Payload); err != nil {
			return nil, fmt.Errorf("archive: payload of %s: %w", d.MessageID(), err)
		}
	} else {
		buf.Write(d.Payload)
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// MaxLine is the longest line Read takes: the largest payload a push may
// carry (8 MiB), escaped error text and fields besides.
const MaxLine = 16 << 20

// line is a line as Parse reads it.
type line struct {
	ID            *string   `json:"id"`
	TransactionID string    `json:"transactionId"`
	Queue         *string   `json:"queue"`
	Partition     *string   `json:"partition"`
	ConsumerGroup *string   `json:"consumerGroup"`
	ErrorMessage  *string   `json:"errorMessage"`
	ErrorCut      *errorCut `json:"errorCut"`
	RetryCount    int       `json:"retryCount"`
	CreatedAt     string    `json:"createdAt"`
	FailedAt      string    `json:"failedAt"`
	TraceID       *string   `json:"traceId"`
	// ConsumerVersion is kept as the line has it; the broker checks it
	// as an ack's.
	ConsumerVersion string          `json:"consumerVersion"`
	Data            json.RawMessage `json:"data"`
}

// Parse reads a line of an archive (or of an NDJSON export) back as a
// dead letter to import. A line that is not such an object, or lacks
// its id, queue, partition, consumerGroup, failedAt or data, is refused
// with the reason (which names no value of the line).
func Parse(b []byte) (broker.ImportedDeadLetter, error) {
	var l line
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&l); err != nil {
		return broker.ImportedDeadLetter{}, errors.New("not a JSON object of a dead letter")
	}
	if dec.More() {
		return broker.ImportedDeadLetter{}, errors.New("more than one JSON value on the line")
	}
	switch {
	case l.ID == nil:
		return broker.ImportedDeadLetter{}, errors.New("no id")
	case l.Queue == nil || l.Partition == nil || l.ConsumerGroup == nil:
		return broker.ImportedDeadLetter{}, errors.New("no queue, partition or consumerGroup")
	case len(l.Data) == 0 || string(l.Data) == "null":
		return broker.ImportedDeadLetter{}, errors.New("no data")
	}
	if _, _, ok := broker.ParseMessageID(*l.ID); !ok {
		return broker.ImportedDeadLetter{}, errors.New("the id is not a message id")
	}
	failed, err := time.Parse(time.RFC3339Nano, l.FailedAt)
	if err != nil {
		return broker.ImportedDeadLetter{}, errors.New("failedAt is not a time")
	}
	var created time.Time
	if l.CreatedAt != "" {
		if created, err = time.Parse(time.RFC3339Nano, l.CreatedAt); err != nil {
			return broker.ImportedDeadLetter{}, errors.New("createdAt is not a time")
		}
	}
	d := broker.ImportedDeadLetter{MessageID: *l.ID, Queue: *l.Queue, Partition: *l.Partition, Group: *l.ConsumerGroup,
		TransactionID: l.TransactionID, Payload: []byte(l.Data), RetryCount: l.RetryCount, FailedAt: failed.UTC(), CreatedAt: created.UTC(),
		ConsumerVersion: l.ConsumerVersion}
	if l.ErrorMessage != nil {
		d.Error = *l.ErrorMessage
	}
	if l.ErrorCut != nil {
		d.ErrorBytes = l.ErrorCut.SentBytes
	}
	if l.TraceID != nil {
		d.TraceID = *l.TraceID
	}
	return d, nil
}

// Read calls fn with each line of an archive file (gzip, all its
// members; or plain NDJSON, as an export writes it), numbered from 1,
// without its line break; empty lines are passed over. fn must not keep
// the slice. A line longer than MaxLine ends the read with an error. A
// file that ends torn (a gzip member cut short or broken) has each whole
// line before the tear read, and then an error wrapping ErrTorn that says
// at which line; the torn line itself is not passed.
func Read(r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var src io.Reader = br
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("archive: %w: %w", ErrTorn, err)
		}
		defer zr.Close()
		src = zr
	}
	lr := bufio.NewReaderSize(src, 64<<10)
	for n := 1; ; n++ {
		l, err := readLine(lr)
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("archive: line %d: %w", n, err)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			// Cut short or broken: what was read of this line is not a
			// whole line.
			return fmt.Errorf("archive: line %d: %w: %w", n, ErrTorn, err)
		}
		if len(l) == 0 {
			return nil // the end
		}
		b := bytes.TrimRight(bytes.TrimSuffix(l, []byte("\n")), "\r")
		if len(bytes.TrimSpace(b)) > 0 {
			if err := fn(n, b); err != nil {
				return err
			}
		}
		if err != nil {
			return nil // a last line without its break
		}
	}
}

// readLine reads the next line of r, its break included (the last line
// of a file may have none), up to MaxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var long []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if long == nil && !errors.Is(err, bufio.ErrBufferFull) {
			return chunk, err
		}
		if len(long)+len(chunk) > MaxLine {
			return nil, bufio.ErrTooLong
		}
		long = append(long, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return long, err
		}
	}
}

// ErrTorn is the error of Read for a file that ends torn: cut short, or a
// gzip member broken.
var ErrTorn = errors.New("the file is torn")
