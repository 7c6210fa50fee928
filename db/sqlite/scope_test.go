package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

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
		go func() { errs <- d.Update(ctx, broker.UpdateOptions{}, register(fmt.Sprint(i), fail)) }()
		waitQueued(d, i+1)
	}
	release()
	for range 3 {
		<-errs
	}
	// The group ran without savepoints; 1 failed having changed no row (a
	// refused ack does that), so only its effects were dropped and the
	// group went on: 0 ran once. (A failing function that wrote makes the
	// group run again with savepoints:
	// TestGroupWithAFailingFunctionRunsAgainWithSavepoints.)
	if want := []string{"0:true", "1:false", "2:true"}; !slices.Equal(ended, want) {
		t.Fatalf("ended %v, want %v", ended, want)
	}
	// Alone and failing: rolled back, not committed.
	ended = nil
	if err := d.Update(ctx, broker.UpdateOptions{}, register("alone", true)); err == nil {
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

// A group whose third function fails is rolled back and run again, each
// function in a savepoint of its own: the others' writes commit, the
// failing one's do not, the functions before it run twice and those
// after it once, and each Update returns its own function's outcome.
func TestGroupWithAFailingFunctionRunsAgainWithSavepoints(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	ctx := context.Background()
	errFails := errors.New("fails")
	runs := make([]int, 4) // by the writer, read once every Update has returned
	write := func(i int) func(broker.Tx) error {
		return func(tx broker.Tx) error {
			runs[i]++
			if err := tx.InsertAudit(ctx, &broker.AuditEntry{At: time.Now(), Actor: "test", Action: "a", Detail: fmt.Sprint(i)}); err != nil {
				return err
			}
			if i == 2 {
				return errFails
			}
			return nil
		}
	}
	release := holdWriter(d)
	errs := make([]chan error, 4)
	for i := range errs {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- d.Update(ctx, broker.UpdateOptions{}, write(i)) }()
		waitQueued(d, i+1)
	}
	release()
	for i, ch := range errs {
		err := <-ch
		if (i == 2) != errors.Is(err, errFails) {
			t.Errorf("Update %d: %v", i, err)
		}
	}
	if want := []int{2, 2, 2, 1}; !slices.Equal(runs, want) {
		t.Errorf("runs %v, want %v", runs, want)
	}
	var got []string
	if err := d.View(ctx, func(tx broker.Tx) error {
		es, err := tx.ListAudit(ctx, broker.AuditFilter{Actor: "test"}, broker.Page{Limit: 10})
		for _, e := range es {
			got = append(got, e.Detail)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"0", "1", "3"}; !slices.Equal(got, want) {
		t.Fatalf("audit entries %v, want %v", got, want)
	}
}
