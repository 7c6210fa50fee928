package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// Reads that hold every connection they may (twice as many as a pool
// has, each inside its snapshot) hold none a write needs: a push
// completes while they are all still held.
func TestPGReadsHoldNoConnectionOfTheWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openStore(t, pgtest.Database(t, "db", Prepare))
	b := broker.New(broker.Config{Store: d})
	defer b.Close()
	n := 2 * int(d.pool.Config().MaxConns)
	entered := make(chan struct{}, n)
	release := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()
	for range n {
		wg.Go(func() {
			_ = d.View(ctx, func(broker.Tx) error {
				entered <- struct{}{}
				<-release
				return nil
			})
		})
	}
	for range int(d.readPool.Config().MaxConns) {
		<-entered // the reads hold every read connection; the rest wait for one
	}
	// A deadline only so that a failure ends: the push must complete
	// while the reads are held, which stay held until open.
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := b.Push(pctx, []broker.PushItem{{Queue: "q", Payload: json.RawMessage(`{"n":1}`)}}); err != nil {
		t.Fatalf("push while reads hold their connections: %v", err)
	}
	select {
	case <-release:
		t.Fatal("the reads were let go before the push")
	default:
	}
	open()
}

// A statement of a read that runs past the read timeout is stopped and
// answered broker.ErrTooSlow (here the URL's statement_timeout, short).
func TestPGSlowReadIsStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.Database(t, "db", Prepare)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	d := openStore(t, dsn+sep+"statement_timeout=200")
	err := d.View(ctx, func(tx broker.Tx) error {
		_, err := tx.(*sqlcore.Tx).Exec(ctx, `SELECT pg_sleep(5)`)
		return err
	})
	if !errors.Is(err, broker.ErrTooSlow) {
		t.Fatalf("slow read: %v, want ErrTooSlow", err)
	}
}

// A list of a search window (a field filter's words, free text) reads
// each dead letter of the window once on PostgreSQL: its index matches
// are tested row by row, not joined, which the planner (unable to tell
// how many rows a match finds) made a scan of the window for each match:
// the window's size squared. The work is counted in rows the plan's
// nodes handled (EXPLAIN ANALYZE), not in time.
func TestPGSearchWindowIsReadOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openStore(t, pgtest.Database(t, "db", Prepare))
	b := broker.New(broker.Config{Store: d})
	defer b.Close()
	if _, err := b.Configure(ctx, "q", map[string]json.RawMessage{"retryLimit": json.RawMessage(`0`)}, "t"); err != nil {
		t.Fatal(err)
	}
	const n = 600
	items := make([]broker.PushItem, n)
	for i := range items {
		items[i] = broker.PushItem{Queue: "q", Payload: json.RawMessage(fmt.Sprintf(`{"a":%d,"b":"common"}`, i))}
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Batch: n})
	if err != nil || len(res.Messages) != n {
		t.Fatalf("pop: %d, %v", len(res.Messages), err)
	}
	acks := make([]broker.Ack, n)
	for i, m := range res.Messages {
		acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckDLQ, Error: "boom"}
	}
	if _, err := b.AckBatch(ctx, "", acks); err != nil {
		t.Fatal(err)
	}
	ff, err := broker.ParseFieldFilter("b = common")
	if err != nil {
		t.Fatal(err)
	}
	var qid int64
	if err := d.QueryRowUncatalogued(ctx, `SELECT id FROM queues WHERE name = 'q'`).Scan(&qid); err != nil {
		t.Fatal(err)
	}
	f := broker.Filter{QueueID: qid, Fields: []broker.FieldFilter{ff}, Text: `"common"`,
		Window: &broker.MatchWindow{Rows: n, MinID: 1, MaxID: 1 << 40, MinSeq: 1, MaxSeq: 1 << 40}}
	var where sqlcore.Stmt
	sqlcore.AddWhere(&where, f, false)
	text, args, err := textAndArgs(`SELECT d.id FROM dead_letters d`+where.SQL()+` ORDER BY d.failed_at DESC, d.id DESC LIMIT 50`, where.Args())
	if err != nil {
		t.Fatal(err)
	}
	var plan string
	if err := d.read.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+text, args...).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var nodes []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &nodes); err != nil || len(nodes) != 1 {
		t.Fatalf("plan: %v", err)
	}
	if work := nodes[0].Plan.work(); work > 30*n {
		t.Fatalf("the list handled %.0f rows for a window of %d dead letters, want it linear (at most %d)\n%s", work, n, 30*n, plan)
	}
}

// planNode is a node of EXPLAIN's JSON plan.
type planNode struct {
	Rows  float64    `json:"Actual Rows"`
	Loops float64    `json:"Actual Loops"`
	Plans []planNode `json:"Plans"`
}

// work is the rows the node and those below it handled, every loop.
func (p planNode) work() float64 {
	w := p.Rows * p.Loops
	for _, c := range p.Plans {
		w += c.work()
	}
	return w
}
