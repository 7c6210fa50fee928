package main

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/lazarus-dlq/lazarus/db"
)

// Callers who arrive while a group commits share the next transaction:
// one commits alone, the five who queued behind it commit together, and
// each gets its own result.
func TestGroupCommitGroupsTheCallersWhoWaited(t *testing.T) {
	var mu sync.Mutex
	var groups []int
	release := make(chan struct{})
	allQueued := make(chan struct{})
	first := true
	g := &groupCommit{commit: func(_ context.Context, work []func(*sql.Tx) error) []error {
		mu.Lock()
		groups = append(groups, len(work))
		wait := first
		first = false
		mu.Unlock()
		if wait {
			<-release
		}
		errs := make([]error, len(work))
		for i, fn := range work {
			errs[i] = fn(nil)
		}
		return errs
	}}
	g.queued = func(n int) {
		if n == 5 {
			close(allQueued)
		}
	}
	bad := errors.New("bad")
	ctx := context.Background()
	leaderDone := make(chan error, 1)
	go func() { leaderDone <- g.do(ctx, func(*sql.Tx) error { return nil }) }()
	// The leader is in its commit once the next caller finds it leading;
	// wait for the five to queue.
	results := make([]error, 5)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = g.do(ctx, func(*sql.Tx) error {
				if i == 2 {
					return bad
				}
				return nil
			})
		}()
	}
	<-allQueued
	close(release)
	wg.Wait()
	if err := <-leaderDone; err != nil {
		t.Errorf("leader: %v", err)
	}
	if !slices.Equal(groups, []int{1, 5}) {
		t.Errorf("groups committed: %v, want [1 5]", groups)
	}
	for i, err := range results {
		if want := error(nil); i == 2 {
			if !errors.Is(err, bad) {
				t.Errorf("caller %d: %v, want its own error", i, err)
			}
		} else if err != want {
			t.Errorf("caller %d: %v, want nil", i, err)
		}
	}
	if g.leading || len(g.pending) != 0 {
		t.Errorf("after the last group: leading %v, %d pending", g.leading, len(g.pending))
	}
}

// On SQLite: a group's work is one transaction; when one of it fails,
// the others are still committed and only the failing caller sees an
// error.
func TestGroupCommitIsolatesAFailure(t *testing.T) {
	ctx := context.Background()
	e := testEnv(t)
	r, err := e.openRaw(ctx, "gc", db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	g := newGroupCommit(r.db)
	ins := func(body []byte) func(*sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := tx.StmtContext(ctx, r.ins).ExecContext(ctx, body)
			return err
		}
	}
	errs := g.commit(ctx, []func(*sql.Tx) error{ins([]byte("a")), ins(nil), ins([]byte("c"))}) // body NOT NULL
	if errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Errorf("errors %v, want only the second", errs)
	}
	var n int
	if err := r.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM q").Scan(&n); err != nil || n != 2 {
		t.Errorf("rows %d (%v), want 2", n, err)
	}
	if err := g.do(ctx, ins([]byte("d"))); err != nil {
		t.Errorf("do: %v", err)
	}
}
