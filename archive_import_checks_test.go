package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// importLine is a line of an archive: a dead letter of orders/p for
// billing, with the given transactionId (none when "-") and payload.
func importLine(seq int64, txid, payload string) string {
	at := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	tx := ""
	if txid != "-" {
		b, _ := json.Marshal(txid)
		tx = `"transactionId":` + string(b) + `,`
	}
	return fmt.Sprintf(`{"id":%q,%s"partitionId":"x","queue":"orders","partition":"p","consumerGroup":"billing","errorMessage":"boom","errorCut":null,"retryCount":0,"createdAt":"2026-10-01T12:00:00.000Z","failedAt":"2026-10-01T12:00:01.000Z","traceId":null,"isReplay":false,"fingerprint":"boom","data":%s}`,
		broker.MessageID(at, seq), tx, payload)
}

// `lazarus archive import` checks each line as a push checks its item,
// skips those that fail with their reasons and files the others (on
// PostgreSQL too, where such a line once stopped its batch); imported
// twice, a file files nothing twice, lines without a transactionId
// included; a file torn at its end has its whole lines filed and the
// tear reported.
func TestArchiveImportChecksLinesAsAPush(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			dsn := filepath.Join(dir, "l.db")
			if store == "postgres" {
				dsn = pgtest.Database(t, "lazarus", db.Prepare)
			}
			d, err := db.Open(ctx, dsn, db.SyncNormal)
			if err != nil {
				t.Fatal(err)
			}
			b := broker.New(broker.Config{Store: d})
			if _, err := b.Configure(ctx, "orders", map[string]json.RawMessage{"retryLimit": json.RawMessage(`0`)}, "test"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Pop(ctx, broker.PopRequest{Queue: "orders", Group: "billing", Batch: 1}); err != nil {
				t.Fatal(err)
			}
			b.Close()
			d.Close()

			lines := []string{
				importLine(901, "g1", `{"n":1}`),
				importLine(902, "big", `"`+strings.Repeat("x", 2000)+`"`),
				importLine(903, strings.Repeat("t", 1<<20), `{"n":3}`),
				importLine(904, "a\x00b", `{"n":4}`),
				importLine(905, "bad-utf8", "\"a\xffb\""),
				importLine(906, "-", `{"n":6}`),
				importLine(907, "g2", `{"n":7}`),
			}
			file := filepath.Join(dir, "lines.ndjson")
			if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			env := envOf(map[string]string{"LAZARUS_MAX_PAYLOAD_BYTES": "1000"})
			var out bytes.Buffer
			if err := run(ctx, []string{"archive", "import", "--db", dsn, file}, env, nil, &out, io.Discard); err != nil {
				t.Fatalf("import: %v\n%s", err, out.String())
			}
			got := out.String()
			for _, want := range []string{"3 dead letters imported, 4 skipped\n", "line 2: the payload is 2002 bytes, over the limit of 1000",
				"line 3: transactionId is longer than 255 bytes", "line 4: transactionId is not UTF-8 text without NUL",
				"line 5: the payload is not valid UTF-8"} {
				if !strings.Contains(got, want) {
					t.Errorf("first import said %q, want %q in it", got, want)
				}
			}
			out.Reset()
			if err := run(ctx, []string{"archive", "import", "--db", dsn, file}, env, nil, &out, io.Discard); err != nil {
				t.Fatalf("import again: %v\n%s", err, out.String())
			}
			if got := out.String(); !strings.HasPrefix(got, "0 dead letters imported, 7 skipped\n") || strings.Count(got, "already") != 3 {
				t.Errorf("second import said %q", got)
			}

			// Torn: two whole lines, then a member cut in the middle of a
			// long line.
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			noise := make([]byte, 20000)
			if _, err := rand.Read(noise); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(zw, "%s\n%s\n%s\n", importLine(911, "t1", `{"n":11}`), importLine(912, "t2", `{"n":12}`),
				importLine(913, "t3", `"`+hex.EncodeToString(noise)[:900]+`"`))
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			torn := filepath.Join(dir, "torn.ndjson.gz")
			if err := os.WriteFile(torn, gz.Bytes()[:gz.Len()-300], 0o600); err != nil {
				t.Fatal(err)
			}
			out.Reset()
			err = run(ctx, []string{"archive", "import", "--db", dsn, torn}, env, nil, &out, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "torn") {
				t.Errorf("torn import: %v, want the tear reported", err)
			}
			if got := out.String(); !strings.HasPrefix(got, "2 dead letters imported, 0 skipped\n") || !strings.Contains(got, "torn") {
				t.Errorf("torn import said %q", got)
			}

			d, err = db.Open(ctx, dsn, db.SyncNormal)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			b = broker.New(broker.Config{Store: d})
			defer b.Close()
			page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "orders", Limit: 100, WithTotal: true})
			if err != nil || page.Total != 5 {
				t.Fatalf("dead letters: %d (%v), want 5", page.Total, err)
			}
		})
	}
}
