package storetest

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/lazarus-dlq/lazarus/broker"
)

// retryStore is a store on which every function given to Update runs
// twice, as on a store that retries a transaction that failed to
// serialize: the first run goes through the real Update and is rolled
// back (it returns errRetry after fn returned nil), the second commits.
// The broker's rule tests run on it (setup, the model test): what a run
// rolled back did to memory must leave no trace, or the counts double.
type retryStore struct {
	broker.Store
	retried atomic.Int64 // the first runs rolled back
}

var errRetry = errors.New("retry: the first run is rolled back")

func (s *retryStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	err := s.Store.Update(ctx, o, func(tx broker.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errRetry
	})
	if !errors.Is(err, errRetry) {
		return err
	}
	s.retried.Add(1)
	return s.Store.Update(ctx, o, fn)
}

// pairStore runs the next two Updates in one transaction, one function
// after the other, as group commit does: the first waits for the second
// (armed by hold, told on held), and between runs between the two.
type pairStore struct {
	broker.Store
	hold    atomic.Bool
	held    chan struct{}
	waiting chan pairReq
	between func()
}

type pairReq struct {
	fn   func(broker.Tx) error
	done chan error
}

func newPairStore(s broker.Store, between func()) *pairStore {
	return &pairStore{Store: s, held: make(chan struct{}, 1), waiting: make(chan pairReq, 1), between: between}
}

func (s *pairStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	if s.hold.CompareAndSwap(true, false) {
		r := pairReq{fn, make(chan error, 1)}
		s.waiting <- r
		s.held <- struct{}{}
		return <-r.done
	}
	select {
	case first := <-s.waiting:
		var firstErr, err error
		uerr := s.Store.Update(ctx, o, func(tx broker.Tx) error {
			if firstErr = first.fn(tx); firstErr != nil {
				return firstErr
			}
			s.between()
			err = fn(tx)
			return err
		})
		if firstErr == nil {
			firstErr = uerr
		}
		first.done <- firstErr
		if err == nil {
			err = uerr
		}
		return err
	default:
		return s.Store.Update(ctx, o, fn)
	}
}
