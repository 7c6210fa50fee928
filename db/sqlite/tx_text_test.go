package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// searchPayloads are the payloads the search tests dead-letter, by
// transactionId.
var searchPayloads = map[string]string{
	"pay-1": `{"orderId":"ord_123","amount":250,"card":{"brand":"amex","last4":"0005"},"tags":["vip","x"],"note":"Refund requested by customer"}`,
	"pay-2": `{"orderId":"ord_456","amount":99.5,"card":{"brand":"visa"},"tags":["x"],"active":true,"coupon":null}`,
	"pay-3": `{"orderId":"ord_789","amount":"250","card":{"brand":"AMEX"},"items":[{"sku":"A-1"},{"sku":"B-2"}],"note":"caf\u00e9 \u0026 cr\u00e8me"}`,
	"pay-4": `[1,2,3]`,
	"pay-5": `"just a string with ord_123 inside"`,
}

// searchErrors are their error texts.
var searchErrors = map[string]string{
	"pay-1": "card_declined: insufficient_funds",
	"pay-2": "upstream timeout after 30s: POST https://api.example/v1/charges",
	"pay-3": "Upstream Timeout",
	"pay-4": "boom",
	"pay-5": "boom",
}

// openSearch dead-letters every search payload in queue q, group g, and
// returns the broker.
func openSearch(t *testing.T) (*Store, *broker.Broker) {
	t.Helper()
	ctx := context.Background()
	d, b := openBroker(t)
	var items []broker.PushItem
	for _, id := range slices.Sorted(maps.Keys(searchPayloads)) {
		items = append(items, broker.PushItem{Queue: "q", Partition: "p", TransactionID: id, Payload: []byte(searchPayloads[id])})
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"g", "h"} {
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: g, Batch: 10})
		if err != nil || len(res.Messages) != len(items) {
			t.Fatalf("pop = %+v, %v", res, err)
		}
		for _, m := range res.Messages {
			if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: searchErrors[m.TransactionID], Group: g}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d, b
}

// found lists the transactionIds of group g's dead letters q selects.
func found(t *testing.T, b *broker.Broker, q broker.DLQQuery) []string {
	t.Helper()
	q.Queue, q.Group = "q", "g"
	page, err := b.DeadLetters(context.Background(), q)
	if err != nil {
		t.Fatalf("%+v: %v", q, err)
	}
	var out []string
	for _, d := range page.Items {
		out = append(out, d.TransactionID)
	}
	slices.Sort(out)
	return out
}

// Every field filter, on real rows: typed values, nested paths, array
// indexes, contains, and unknown paths that match nothing.
func TestFieldFilters(t *testing.T) {
	t.Parallel()
	_, b := openSearch(t)
	for _, c := range []struct {
		filter string
		want   []string
	}{
		{`orderId = ord_123`, []string{"pay-1"}},
		{`orderId = "ord_123"`, []string{"pay-1"}},
		{`orderId = ord_12`, nil},
		{`orderId != ord_123`, []string{"pay-2", "pay-3"}},
		{`amount > 100`, []string{"pay-1"}}, // pay-3's "250" is a string
		{`amount >= 99.5`, []string{"pay-1", "pay-2"}},
		{`amount < 100`, []string{"pay-2"}},
		{`amount <= 250`, []string{"pay-1", "pay-2"}},
		{`amount = 250`, []string{"pay-1"}},
		{`amount = "250"`, []string{"pay-3"}},
		{`amount = 99.5`, []string{"pay-2"}},
		{`card.brand = amex`, []string{"pay-1"}}, // values are case-sensitive
		{`card.brand = AMEX`, []string{"pay-3"}},
		{`card.brand > b`, []string{"pay-2"}}, // strings compare as strings
		{`card.last4 = "0005"`, []string{"pay-1"}},
		{`card.last4 = 5`, nil},
		{`tags contains x`, []string{"pay-1", "pay-2"}},
		{`tags contains vip`, []string{"pay-1"}},
		{`tags[0] = vip`, []string{"pay-1"}},
		{`tags[1] = x`, []string{"pay-1"}},
		{`note contains refund`, []string{"pay-1"}},
		{`note contains "café"`, []string{"pay-3"}},
		{`items[1].sku = B-2`, []string{"pay-3"}},
		{`active = true`, []string{"pay-2"}},
		{`active != true`, nil},
		{`active = false`, nil},
		{`coupon = null`, []string{"pay-2"}},
		{`coupon != null`, nil},
		{`[2] = 3`, []string{"pay-4"}},
		{`items[0].sku = a-1`, nil},
		{`items[0].sku = A-1`, []string{"pay-3"}},
		{`[2] > 2`, []string{"pay-4"}},
		{`nope = 1`, nil},
		{`nope != 1`, nil},
		{`card.nope.deeper = amex`, nil},
		{`nope contains x`, nil},
	} {
		if got := found(t, b, broker.DLQQuery{Fields: []string{c.filter}}); !slices.Equal(got, c.want) {
			t.Errorf("%s: found %v, want %v", c.filter, got, c.want)
		}
	}
	// Filters combine with each other and with the rest.
	if got := found(t, b, broker.DLQQuery{Fields: []string{"tags contains x", "amount < 100"}}); !slices.Equal(got, []string{"pay-2"}) {
		t.Errorf("two filters: %v", got)
	}
	if got := found(t, b, broker.DLQQuery{Fields: []string{"tags contains x"}, ErrorContains: "timeout"}); !slices.Equal(got, []string{"pay-2"}) {
		t.Errorf("with error: %v", got)
	}
	if got := found(t, b, broker.DLQQuery{Fields: []string{"tags contains x"}, Text: "insufficient_funds"}); !slices.Equal(got, []string{"pay-1"}) {
		t.Errorf("with text: %v", got)
	}
	if got := found(t, b, broker.DLQQuery{Fields: []string{"tags contains x"}, TransactionID: "pay-2"}); !slices.Equal(got, []string{"pay-2"}) {
		t.Errorf("with transactionId: %v", got)
	}
}

// Free text: case-insensitive whole words and phrases, in payloads
// (keys and values, decoded) and in error texts; what a user types is
// never an operator.
func TestFreeText(t *testing.T) {
	t.Parallel()
	_, b := openSearch(t)
	for _, c := range []struct {
		text string
		want []string
	}{
		{`ord_123`, []string{"pay-1", "pay-5"}},
		{`ORD_123`, []string{"pay-1", "pay-5"}},
		{`ord`, nil}, // whole words: ord_123 is one
		{`insufficient_funds`, []string{"pay-1"}},
		{`timeout`, []string{"pay-2", "pay-3"}},
		{`"upstream timeout"`, []string{"pay-2", "pay-3"}},
		{`"timeout upstream"`, nil},
		{`upstream charges`, []string{"pay-2"}},
		{`"refund requested"`, []string{"pay-1"}},
		{`"requested refund"`, nil},
		{`orderid`, []string{"pay-1", "pay-2", "pay-3"}}, // keys are words
		{`cafe`, []string{"pay-3"}},                      // decoded, diacritics folded
		{`crème`, []string{"pay-3"}},
		{`u0026`, nil}, // an escape is no word
		{`250`, []string{"pay-1", "pay-3"}},
		{`amex visa`, nil}, // every word, in one text
		// Hostile input: operators are words or separators.
		{`amex OR visa`, nil},
		{`amex NEAR visa`, nil},
		{`am*`, nil},
		{`-amex`, nil}, // "-" is a letter: the word -amex
		{`pay-1`, nil},
		{`a-1`, []string{"pay-3"}},
		{`text:amex`, nil},
		{`error:boom`, nil},
		{`(amex`, []string{"pay-1", "pay-3"}},
		{`"amex`, []string{"pay-1", "pay-3"}},
		{`amex"`, []string{"pay-1", "pay-3"}},
		{`'; DROP TABLE dead_letters; --`, nil},
		{`^amex`, []string{"pay-1", "pay-3"}},
	} {
		if got := found(t, b, broker.DLQQuery{Text: c.text}); !slices.Equal(got, c.want) {
			t.Errorf("%q: found %v, want %v", c.text, got, c.want)
		}
	}
	for _, text := range []string{`***`, `""`, `-`, strings.Repeat("a ", 200)} {
		if _, err := b.DeadLetters(context.Background(), broker.DLQQuery{Text: text}); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%q: err = %v, want invalid", text, err)
		}
	}
}

// The indexes live and die with the dead letters: replay, delete (one
// and bulk) and queue deletion take their rows along; a message's payload
// is indexed once while any group's dead letter of it is left.
func TestTextIndexFollowsDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openSearch(t)
	rows := func() (errs, payloads int) {
		t.Helper()
		synced(t, d)
		onSearch(t, d, func(c *sql.Conn) {
			if err := c.QueryRowContext(ctx, `SELECT COUNT(*) FROM main.dead_letter_errors_docsize`).Scan(&errs); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRowContext(ctx, `SELECT COUNT(*) FROM main.dead_letter_payloads_docsize`).Scan(&payloads); err != nil {
				t.Fatal(err)
			}
		})
		return errs, payloads
	}
	integrity := func() {
		t.Helper()
		synced(t, d)
		onSearch(t, d, func(c *sql.Conn) {
			for _, ix := range []string{"dead_letter_errors", "dead_letter_payloads"} {
				if _, err := c.ExecContext(ctx, fmt.Sprintf(`INSERT INTO main.%s (%s) VALUES ('integrity-check')`, ix, ix)); err != nil {
					t.Fatalf("%s: %v", ix, err)
				}
			}
		})
	}
	if e, p := rows(); e != 10 || p != 5 {
		t.Fatalf("indexed %d error texts, %d payloads; want 10, 5", e, p)
	}
	integrity()
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g", TransactionID: "pay-1"})
	if err != nil || len(page.Items) != 1 {
		t.Fatal(page, err)
	}
	// One group's dead letter goes: the payload stays for the other's.
	if _, err := b.Delete(ctx, page.Items[0].MessageID(), "g", "test"); err != nil {
		t.Fatal(err)
	}
	if e, p := rows(); e != 9 || p != 5 {
		t.Fatalf("after one delete: %d, %d; want 9, 5", e, p)
	}
	if got := found(t, b, broker.DLQQuery{Text: "ord_123"}); !slices.Equal(got, []string{"pay-5"}) {
		t.Fatalf("g's ord_123 after its delete: %v", got)
	}
	q := broker.DLQQuery{Queue: "q", Group: "h", Text: "ord_123"}
	if page, err := b.DeadLetters(ctx, q); err != nil || len(page.Items) != 2 {
		t.Fatalf("h's ord_123: %+v, %v; want 2", page, err)
	}
	// Replay of the message: its last dead letter goes, and the payload.
	if _, err := b.Replay(ctx, page.Items[0].MessageID(), "test"); err != nil {
		t.Fatal(err)
	}
	if e, p := rows(); e != 8 || p != 4 {
		t.Fatalf("after the replay: %d, %d; want 8, 4", e, p)
	}
	integrity()
	// Bulk by filter.
	if _, err := b.DeleteMatching(ctx, broker.DLQQuery{Queue: "q", Fields: []string{"tags contains x"}}, "test"); err != nil {
		t.Fatal(err)
	}
	if e, p := rows(); e != 6 || p != 3 {
		t.Fatalf("after the bulk delete: %d, %d; want 6, 3", e, p)
	}
	integrity()
	if err := b.DeleteQueue(ctx, "q", "test"); err != nil {
		t.Fatal(err)
	}
	if e, p := rows(); e != 0 || p != 0 {
		t.Fatalf("after the queue's deletion: %d, %d; want 0, 0", e, p)
	}
	integrity()
}

// Bad filters are refused with a message naming them.
func TestBadFieldFiltersAreRefused(t *testing.T) {
	t.Parallel()
	_, b := openSearch(t)
	for _, s := range []string{"orderId", "orderId ~ x", "a..b = 1", "a[x] = 1", `a"b = 1`, "active > true", "= 1", "orderId ="} {
		_, err := b.DeadLetters(context.Background(), broker.DLQQuery{Fields: []string{s}})
		if !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), "field filter") {
			t.Errorf("%q: err = %v, want invalid naming the filter", s, err)
		}
	}
}

// Every search uses its index: free text and a field filter with words
// look their candidates up in the full-text indexes (by id, by seq),
// never walk a queue's or a group's dead letters in order; a field filter
// with no words reads a bounded window of the queue's index.
func TestSearchPlans(t *testing.T) {
	t.Parallel()
	d, _ := openSearch(t)
	field := func(s string) broker.FieldFilter {
		f, err := broker.ParseFieldFilter(s)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	walks := []string{"SCAN d\n", "SCAN d USING", "INDEX dead_letters_queue", "INDEX dead_letters_group", "INDEX dead_letters_failed", "SCAN dead_letters\n"}
	for name, f := range map[string]broker.Filter{
		"TextEverywhere": {Text: `"ord_123"`, MatchCap: broker.MatchCap},
		"TextQueue":      {QueueID: 1, Text: `"ord_123"`, MatchCap: broker.MatchCap},
		"TextGroupTime":  {QueueID: 1, GroupID: 2, Text: `"timeout"`, From: time.UnixMilli(1), MatchCap: broker.MatchCap},
		"FieldQueue":     {QueueID: 1, Fields: []broker.FieldFilter{field("orderId = ord_123")}, MatchCap: broker.MatchCap},
		"FieldGroup":     {QueueID: 1, GroupID: 2, Fields: []broker.FieldFilter{field("tags contains x"), field("amount > 1")}, MatchCap: broker.MatchCap},
		// Error contains with words it bounds (broker.ErrorWords), in a
		// group and in an error group of a queue.
		"ErrorWordsGroup":       {QueueID: 1, GroupID: 2, ErrorContains: ": timeout,", ErrorWords: `"timeout"`, MatchCap: broker.MatchCap},
		"ErrorWordsFingerprint": {QueueID: 1, Fingerprint: "x", ErrorContains: ": timeout,", ErrorWords: `"timeout"`, MatchCap: broker.MatchCap},
		"TextFingerprint":       {QueueID: 1, GroupID: 2, Fingerprint: "x", Text: `"ord_123"`, MatchCap: broker.MatchCap},
	} {
		w, args := whereOf(f)
		for _, q := range []string{
			sqlcore.DeadLetterSelect + andWhere(w, "(d.failed_at, d.id) < (?, ?)") + ` ORDER BY d.failed_at DESC, d.id DESC LIMIT 51`,
			`SELECT COUNT(*) FROM (SELECT 1 FROM dead_letters d` + w + ` LIMIT 10001)`,
		} {
			plan := queryPlan(t, d, q, append(args, 1, 2)...) + "\n"
			ok := strings.Contains(plan, "VIRTUAL TABLE INDEX 3:DESC")
			for _, bad := range walks {
				ok = ok && !strings.Contains(plan, bad)
			}
			if !ok {
				t.Errorf("%s: plan\n%s\nwants the full-text index and no walk of dead letters", name, plan)
			}
		}
	}
	// A window (a field with no words, or common words): the queue's
	// index from the page's position down to the window's floor, in
	// order; common words are a membership test: their matches within
	// the window's ids and seqs (Window), all of them.
	floor := &broker.Cursor{At: time.UnixMilli(5), ID: 3}
	for name, f := range map[string]broker.Filter{
		"FieldScan":   {QueueID: 1, Fields: []broker.FieldFilter{field("amount > 100")}, Floor: floor},
		"ErrorScan":   {QueueID: 1, GroupID: 2, ErrorContains: "needle", Floor: floor},
		"CommonWords": {QueueID: 1, Text: `"timeout"`, MatchCap: broker.MatchCap, Floor: floor},
		"WindowText": {QueueID: 1, Text: `"timeout"`, MatchCap: broker.MatchCap, Floor: floor,
			Window: &broker.MatchWindow{Above: &broker.Cursor{At: time.UnixMilli(9), ID: 30}, MinID: 3, MaxID: 30, MinSeq: 5, MaxSeq: 50}},
		"WindowField": {QueueID: 1, GroupID: 2, Fields: []broker.FieldFilter{field("brand contains visa")}, Floor: floor,
			Window: &broker.MatchWindow{MinID: 3, MaxID: 30, MinSeq: 5, MaxSeq: 50}},
	} {
		w, args := whereOf(f)
		plan := queryPlan(t, d, sqlcore.DeadLetterSelect+andWhere(w, "(d.failed_at, d.id) < (?, ?)")+` ORDER BY d.failed_at DESC, d.id DESC LIMIT 51`, append(args, 10, 20)...)
		if f.Window != nil && !strings.Contains(plan, "VIRTUAL TABLE INDEX 393219:") { // 3 | docid >= | docid <=
			t.Errorf("%s: plan\n%s\nwants the full-text match within the window's docid range", name, plan)
		}
		if !strings.Contains(plan, "USING INDEX dead_letters_queue (queue_id=? AND failed_at>? AND failed_at<?)") && !strings.Contains(plan, "USING INDEX dead_letters_group (queue_id=? AND group_id=? AND failed_at>? AND failed_at<?)") || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: plan\n%s\nwants the window of the queue's index, in order", name, plan)
		}
	}
	// The window's ranges: the group's index over the window, no sort.
	w, args := whereOf(broker.Filter{QueueID: 1, GroupID: 2})
	wq, wargs := stmtText(sqlcore.WindowStmt(broker.Filter{QueueID: 1, GroupID: 2}, &broker.Cursor{At: time.UnixMilli(9), ID: 30}, floor))
	wplan := queryPlan(t, d, wq, wargs...)
	if !strings.Contains(wplan, "USING INDEX dead_letters_group (queue_id=? AND group_id=? AND failed_at>? AND failed_at<?)") || strings.Contains(wplan, "TEMP B-TREE") {
		t.Errorf("the window's ranges: plan\n%s\nwants the group's index over the window", wplan)
	}
	plan := queryPlan(t, d, `SELECT d.failed_at, d.id FROM dead_letters d`+w+` ORDER BY d.failed_at DESC, d.id DESC LIMIT 1 OFFSET ?`, append(args, 5)...)
	if !strings.Contains(plan, "USING COVERING INDEX dead_letters_group") {
		t.Errorf("the window's position: plan\n%s\nwants the group's index only", plan)
	}
}
