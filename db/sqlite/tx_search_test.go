package sqlite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Every lookup of the header search is an index search: no scan of
// messages or dead_letters, whatever their size.
func TestSearchQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	txExact, txExactArgs := sqlcore.MessagesByTransactionQuery("ord-1", false, 51)
	txPrefix, txPrefixArgs := sqlcore.MessagesByTransactionQuery("ord", true, 51)
	dlExact, dlExactArgs := sqlcore.DeadLettersByTransactionQuery("ord-1", false, 51)
	dlPrefix, dlPrefixArgs := sqlcore.DeadLettersByTransactionQuery("ord", true, 51)
	for _, c := range []struct {
		name  string
		query string
		args  []any
		want  []string
	}{
		{"message heads", sqlcore.MessageHeadsQuery, []any{"[1,2]"}, []string{"SEARCH m USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"binary search step", sqlcore.FirstSeqQuery, []any{1}, []string{"SEARCH messages USING INTEGER PRIMARY KEY (rowid>?)"}},
		{"messages by transactionId", txExact, txExactArgs, []string{"SCAN p", "SEARCH m USING INDEX sqlite_autoindex_messages_1 (partition_id=? AND transaction_id=?)"}},
		{"messages by prefix", txPrefix, txPrefixArgs, []string{"SCAN p", "SEARCH m USING INDEX sqlite_autoindex_messages_1 (partition_id=? AND transaction_id>? AND transaction_id<?)"}},
		{"dead letters by transactionId", dlExact, dlExactArgs, []string{"SEARCH d USING INDEX dead_letters_transaction (transaction_id=?)"}},
		{"dead letters by prefix", dlPrefix, dlPrefixArgs, []string{"SEARCH d USING INDEX dead_letters_transaction (transaction_id>? AND transaction_id<?)"}},
		{"dead letters by traceId", sqlcore.DeadLettersByTraceQuery, []any{"t", 51}, []string{"SEARCH d USING INDEX dead_letters_trace (trace_id=?)"}},
		{"dead letters of messages", sqlcore.DeadLettersOfSeqsQuery, []any{"[1]", 51}, []string{"SEARCH d USING INDEX sqlite_autoindex_dead_letters_1 (seq=?)"}},
		{"dead letters' binary search step", sqlcore.FirstDeadLetterSeqQuery, []any{1}, []string{"SEARCH d USING INDEX sqlite_autoindex_dead_letters_1 (seq>?)", "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"dead letters' highest seq", sqlcore.MaxDeadLetterSeqQuery, nil, []string{"SEARCH dead_letters USING COVERING INDEX sqlite_autoindex_dead_letters_1"}},
	} {
		plan := queryPlan(t, d, c.query, c.args...)
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan\n%s\nwants %q", c.name, plan, w)
			}
		}
		for _, bad := range []string{"SCAN m", "SCAN d", "SCAN messages", "SCAN dead_letters", "TEMP B-TREE"} {
			if strings.Contains(plan, bad) {
				t.Errorf("%s: plan\n%s\nhas %q", c.name, plan, bad)
			}
		}
		// The joins to the message, queue, partition and group are by
		// primary key.
		if strings.Contains(c.query, "JOIN queues") {
			for _, w := range []string{"SEARCH m USING INTEGER PRIMARY KEY", "SEARCH q USING INTEGER PRIMARY KEY", "SEARCH p USING INTEGER PRIMARY KEY", "SEARCH g USING INTEGER PRIMARY KEY"} {
				if !strings.Contains(plan, w) {
					t.Errorf("%s: plan\n%s\nwants %q", c.name, plan, w)
				}
			}
		}
	}
	plan := queryPlan(t, d, `SELECT g.name, `+sqlcore.ConsumerCols+` FROM consumers c JOIN groups g ON g.id = c.group_id WHERE c.partition_id = ? ORDER BY g.name`, 1)
	if !strings.Contains(plan, "SEARCH c USING PRIMARY KEY (partition_id=?)") {
		t.Errorf("partition consumers: plan\n%s", plan)
	}
}

// Migration 0016 gives the dead letters of a database made before it
// their messages' traceIds, and only those with one enter the index.
func TestDeadLetterTraceIDsAreBackfilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	items := []broker.PushItem{
		{Queue: "q", Partition: "p", TransactionID: "a", TraceID: "trace-a", Payload: []byte(`{}`)},
		{Queue: "q", Partition: "p", TransactionID: "b", Payload: []byte(`{}`)},
		{Queue: "q", Partition: "p", TransactionID: "c", TraceID: "trace-c", Payload: []byte(`{}`)},
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 3})
	if err != nil || len(res.Messages) != 3 {
		t.Fatalf("pop = %+v, %v", res, err)
	}
	for _, m := range res.Messages {
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "boom", Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}
	w := d.WriteDB()
	check := func(when string) {
		t.Helper()
		var mismatched, total, indexed int
		if err := w.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(d.trace_id <> m.trace_id), 0)
			FROM dead_letters d JOIN messages m ON m.seq = d.seq`).Scan(&total, &mismatched); err != nil {
			t.Fatal(err)
		}
		if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM dead_letters INDEXED BY dead_letters_trace WHERE trace_id <> ''`).Scan(&indexed); err != nil {
			t.Fatal(err)
		}
		if total != 3 || mismatched != 0 || indexed != 2 {
			t.Fatalf("%s: %d dead letters, %d with another traceId than their message, %d in the index; want 3, 0, 2", when, total, mismatched, indexed)
		}
	}
	check("filed") // InsertDeadLetter writes it
	reapply(t, d, 16, "0016_dead_letter_trace.sql",
		`DROP INDEX dead_letters_trace`,
		`ALTER TABLE dead_letters DROP COLUMN trace_id`)
	check("migrated")
}

// A short id's 4 hex digits are the low 16 bits of the seq: messages
// 65,536 apart in the same 65.5 s share one, and both are found; one of
// another window is not.
func TestMessagesByShortIDFindsEveryMessageWithTheLowBits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	res, err := b.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: "first", Payload: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	_, seq, _ := broker.ParseMessageID(res[0].MessageID)
	var first broker.Message
	if err := d.View(ctx, func(tx broker.Tx) error {
		first, err = tx.MessageBySeq(ctx, seq)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	at := first.CreatedAt.UnixMilli()
	w := d.WriteDB()
	for _, row := range []struct {
		seq, at int64
		txid    string
	}{
		{seq + 1<<16, at + 5, "same-window"},
		{seq + 2<<16, at + 70_000, "next-window"}, // past the 65.5 s of the first's prefix
	} {
		if _, err := w.ExecContext(ctx, `INSERT INTO messages (seq, partition_id, transaction_id, payload, trace_id, created_at) VALUES (?, ?, ?, CAST('{}' AS BLOB), '', ?)`,
			row.seq, first.PartitionID, row.txid, row.at); err != nil {
			t.Fatal(err)
		}
	}
	top := at >> 16
	from, to := time.UnixMilli(top<<16).UTC(), time.UnixMilli(top<<16|0xFFFF).UTC()
	var got []string
	if err := d.View(ctx, func(tx broker.Tx) error {
		ms, err := tx.MessagesByShortID(ctx, from, to, uint16(seq&0xFFFF), 100)
		for _, m := range ms {
			got = append(got, m.TransactionID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"same-window", "first"} // newest first
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("short id: %v, want %v", got, want)
	}
}
