package db

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// Reads that hold every connection they may (twice as many as a pool
// has, each inside its snapshot) hold none a write needs: a push
// completes while they are all still held.
func TestPGReadsHoldNoConnectionOfTheWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openPG(t, pgtest.Database(t, "db", Prepare))
	b := broker.New(broker.Config{Store: d})
	defer b.Close()
	n := 2 * int(d.pg.pool.Config().MaxConns)
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
	for range int(d.pg.readPool.Config().MaxConns) {
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
	d := openPG(t, dsn+sep+"statement_timeout=200")
	err := d.View(ctx, func(tx broker.Tx) error {
		_, err := tx.(*storeTx).exec(ctx, `SELECT pg_sleep(5)`)
		return err
	})
	if !errors.Is(err, broker.ErrTooSlow) {
		t.Fatalf("slow read: %v, want ErrTooSlow", err)
	}
}
