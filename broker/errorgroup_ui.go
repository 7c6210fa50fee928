package broker

import (
	"context"
	"errors"
)

// What the dashboard's pages need of error groups you own beyond
// errorgroup_owned.go's calls: the states of the few groups a page
// shows beside something else (the dead-letter list's error groups
// panel, a dead letter's known-issue banner).

// MaxGroupStatesOf is the most fingerprints ErrorGroupStatesOf reads at
// once: a page's panel of error groups.
const MaxGroupStatesOf = MaxErrorGroups

// ErrorGroupStatesOf returns the error groups of queue whose fingerprint
// is among fps, by fingerprint: of consumer group group, or with group
// "" of each consumer group of the queue that has it (a fingerprint can
// be the error of several). A fingerprint no group has is absent. It
// reads the state, owner, note, link and funnels (not versions, trend
// or history: ErrorGroup reads those).
func (b *Broker) ErrorGroupStatesOf(ctx context.Context, queue, group string, fps []string) (map[string][]OwnedErrorGroup, error) {
	if len(fps) > MaxGroupStatesOf {
		return nil, errorf(ErrInvalid, "at most %d fingerprints at once", MaxGroupStatesOf)
	}
	groups := []string{group}
	if group == "" {
		var err error
		if groups, err = b.Readers(ctx, queue); err != nil {
			return nil, err
		}
	}
	out := make(map[string][]OwnedErrorGroup, len(fps))
	for _, fp := range fps {
		for _, g := range groups {
			og, _, err := b.ErrorGroupByKey(ctx, queue, g, fp)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[fp] = append(out[fp], og)
		}
	}
	return out, nil
}
