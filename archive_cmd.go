package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/lazarus-dlq/lazarus/archive"
	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// An import files its lines in transactions of importBatch dead letters,
// or fewer once their payloads and errors reach importBytes.
const (
	importBatch = 1000
	importBytes = 8 << 20
)

// importReasons is how many skipped lines an import names one by one; the
// rest are counted.
const importReasons = 20

// runArchive runs `lazarus archive import FILE [--db PATH]`.
func runArchive(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 2 || args[1] != "import" {
		fmt.Fprint(stderr, usage)
		return usageError{fmt.Errorf("unknown command %q", strings.Join(args[:min(2, len(args))], " "))}
	}
	var dbPath string
	fs := accountFlags("archive import FILE [--db PATH]",
		"Files the dead letters of an archive file (<dir>/<queue>/<YYYY-MM-DD>.ndjson.gz, or an NDJSON\n"+
			"export, compressed or not) again as dead letters: each in its queue, partition and consumer group,\n"+
			"which must exist and read the queue (a partition gone is made again). A dead letter keeps its\n"+
			"message id when the message is this database's, else gets a new one. Each line is checked as a push\n"+
			"is (payload within LAZARUS_MAX_PAYLOAD_BYTES, JSON and UTF-8; transactionId and traceId up to 255 bytes\n"+
			"of UTF-8 without NUL); lines that fail, and dead letters their group has already, are skipped and\n"+
			"counted, with the reasons. A line without a transactionId gets its id as one, so a file imported\n"+
			"twice files nothing twice. A file torn at its end (a gzip member cut short) has the whole lines\n"+
			"before the tear filed, and the tear is reported (exit status 1). Audited.",
		&dbPath, getenv, stderr)
	pos, err := parseInterleaved(fs, args[2:])
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return usageError{err}
	}
	if len(pos) != 1 {
		return usageError{errors.New("archive import takes one file")}
	}
	maxPayload := int64(web.DefaultMaxPayloadBytes)
	if v := getenv("LAZARUS_MAX_PAYLOAD_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > maxBodyBytes {
			return usageError{fmt.Errorf("LAZARUS_MAX_PAYLOAD_BYTES must be a whole number of bytes from 1 to %d, got %q", maxBodyBytes, v)}
		}
		maxPayload = n
	}
	return archiveImport(ctx, dbPath, pos[0], maxPayload, stdout)
}

// archiveImport imports the file at path into the database at dbPath and
// says how many dead letters were imported and skipped, and why. Each
// line is checked as a push checks its item (a payload within
// maxPayload, the push limit; the rest in the broker): a line that fails
// is skipped, with its reason. A file that ends torn has its whole lines
// before the tear filed, and then the tear is reported as the error.
func archiveImport(ctx context.Context, dbPath, path string, maxPayload int64, stdout io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("archive import: %w", err)
	}
	defer f.Close()
	b, closeAll, err := openExisting(ctx, dbPath)
	if err != nil {
		return err
	}
	defer closeAll()

	var imported, skipped int
	var reasons []string
	skip := func(n int, why string) {
		skipped++
		if len(reasons) < importReasons {
			reasons = append(reasons, fmt.Sprintf("line %d: %s", n, why))
		}
	}
	var batch []broker.ImportedDeadLetter
	var lines []int
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := b.ImportDeadLetters(ctx, cliActor, path, batch)
		if err != nil {
			return err
		}
		imported += res.Imported
		for _, s := range res.Skipped {
			skip(lines[s.Index], s.Reason)
		}
		batch, lines, size = batch[:0], lines[:0], 0
		return nil
	}
	err = archive.Read(f, func(n int, line []byte) error {
		d, err := archive.Parse(line)
		if err != nil {
			skip(n, err.Error())
			return nil
		}
		if int64(len(d.Payload)) > maxPayload {
			skip(n, fmt.Sprintf("the payload is %d bytes, over the limit of %d bytes per payload", len(d.Payload), maxPayload))
			return nil
		}
		batch, lines = append(batch, d), append(lines, n)
		if size += len(d.Payload) + len(d.Error); len(batch) >= importBatch || size >= importBytes {
			return flush()
		}
		return nil
	})
	// What was read is filed, whatever ended the read (a tear): its lines
	// are whole.
	if ferr := flush(); ferr != nil && err == nil {
		err = ferr
	}
	fmt.Fprintf(stdout, "%d dead letters imported, %d skipped\n", imported, skipped)
	for _, r := range reasons {
		fmt.Fprintf(stdout, "  skipped %s\n", r)
	}
	if skipped > len(reasons) {
		fmt.Fprintf(stdout, "  and %d more skipped\n", skipped-len(reasons))
	}
	if errors.Is(err, archive.ErrTorn) {
		fmt.Fprintf(stdout, "  the file is torn: %v; the whole lines before the tear were read\n", err)
		return fmt.Errorf("archive import: %s: %w", path, err)
	}
	if err != nil {
		return fmt.Errorf("archive import: stopped: %w", err)
	}
	return nil
}
