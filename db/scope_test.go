package db

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The effects a group's functions register on the transaction's scope
// run once it has ended, in the order registered, before any Update of
// the group returns: committed for the functions that committed, not for
// one rolled back to its savepoint, nor for any when the group rolled
// back.
func TestScopeEndsInCommitOrderBeforeUpdateReturns(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	ctx := context.Background()
	var ended []string // written by the writer, read once every Update has returned
	register := func(name string, fail bool) func(broker.Tx) error {
		return func(tx broker.Tx) error {
			tx.Scope().OnEnd(func(committed bool) { ended = append(ended, fmt.Sprintf("%s:%v", name, committed)) })
			if fail {
				return errors.New("fails")
			}
			return nil
		}
	}
	release := holdWriter(d)
	errs := make(chan error, 3)
	for i, fail := range []bool{false, true, false} {
		go func() { errs <- d.Update(ctx, register(fmt.Sprint(i), fail)) }()
		waitQueued(d, i+1)
	}
	release()
	for range 3 {
		<-errs
	}
	if want := []string{"0:true", "1:false", "2:true"}; !slices.Equal(ended, want) {
		t.Fatalf("ended %v, want %v", ended, want)
	}
	// Alone and failing: rolled back, not committed.
	ended = nil
	if err := d.Update(ctx, register("alone", true)); err == nil {
		t.Fatal("the failing Update succeeded")
	}
	if want := []string{"alone:false"}; !slices.Equal(ended, want) {
		t.Fatalf("ended %v, want %v", ended, want)
	}
	// A View has no scope.
	if err := d.View(ctx, func(tx broker.Tx) error {
		if tx.Scope() != nil {
			return errors.New("a View with a scope")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A group's effects run before any of its Updates is answered: when an
// effect runs, no answer has been sent.
func TestScopeEndsBeforeTheGroupIsAnswered(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	reqs := make([]writeRequest, 2)
	answered := -1
	for i := range reqs {
		reqs[i] = writeRequest{ctx: context.Background(), done: make(chan error, 1), fn: func(tx broker.Tx) error {
			tx.Scope().OnEnd(func(bool) {
				if answered < 0 {
					answered = 0
					for _, r := range reqs {
						answered += len(r.done)
					}
				}
			})
			return nil
		}}
	}
	// The writer's turn, taken as Update takes it, so that nothing else
	// writes meanwhile.
	d.wmu.Lock()
	for d.busy {
		d.changed.Wait()
	}
	d.busy = true
	d.wmu.Unlock()
	d.commit(reqs)
	d.release(false)
	for i, r := range reqs {
		if err := <-r.done; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if answered != 0 {
		t.Fatalf("%d answers were sent before the effects ran", answered)
	}
}
