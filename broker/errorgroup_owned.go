package broker

import (
	"context"
	"errors"
)

var errNotYet = errors.New("error group states: not built yet")

// ErrorGroupList returns up to f.Limit error groups across queues that
// f selects, open ones first (regressed first among them), then
// acknowledged, resolved and ignored, each newest filed first; with
// their Life, Day and Week funnels.
func (b *Broker) ErrorGroupList(ctx context.Context, f ErrorGroupFilter) ([]OwnedErrorGroup, error) {
	return nil, errNotYet
}

// ErrorGroup returns the error group id names, with its funnels,
// versions, trend, and its history (newest first, at most
// MaxErrorGroupHistory). Unknown: ErrNotFound.
func (b *Broker) ErrorGroup(ctx context.Context, id int64) (OwnedErrorGroup, []ErrorGroupChange, error) {
	return OwnedErrorGroup{}, nil, errNotYet
}

// ErrorGroupByKey is ErrorGroup for a queue, consumer group and
// fingerprint. With group "", the queue's one consumer group that has
// the fingerprint; when several have it, ErrInvalid names them.
func (b *Broker) ErrorGroupByKey(ctx context.Context, queue, group, fingerprint string) (OwnedErrorGroup, []ErrorGroupChange, error) {
	return OwnedErrorGroup{}, nil, errNotYet
}

// SetErrorGroupState changes the state of the error groups c names (c.ID,
// or c.Queue, c.Group and c.Fingerprint: with c.Group "", in every
// consumer group of the queue that has it), audited and kept in each
// one's history, and returns them as they are after. A resolve while
// copies are pending or failed again since the state began is ErrConflict
// unless c.Force. Bad input is ErrInvalid and changes nothing.
func (b *Broker) SetErrorGroupState(ctx context.Context, c StateChange) ([]OwnedErrorGroup, error) {
	return nil, errNotYet
}

// ErrorGroupCounts returns, per queue with any, how many of its error
// groups are open and regressed.
func (b *Broker) ErrorGroupCounts(ctx context.Context) ([]ErrorGroupCount, error) {
	return nil, errNotYet
}
