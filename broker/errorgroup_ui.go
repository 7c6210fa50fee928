package broker

import (
	"context"
)

// What the dashboard's pages need of error groups you own beyond
// errorgroup_owned.go's calls: the states of the few groups a page
// shows beside something else (the dead-letter list's error groups
// panel, a dead letter's known-issue banner), in one read.

// MaxGroupStatesOf is the most fingerprints ErrorGroupStatesOf reads at
// once: a page's panel of error groups.
const MaxGroupStatesOf = MaxErrorGroups

// ErrorGroupStatesOf returns the error groups of queue whose fingerprint
// is among fps, by fingerprint: of consumer group group, or with group
// "" of each consumer group of the queue that has it (a fingerprint can
// be the error of several). A fingerprint no group has is absent, and so
// is an unknown queue or group. It reads their state, owner, note, link
// and whole-life funnel, in one snapshot with a look-up by key a
// fingerprint; not the Day and Week funnels, versions, trend or history
// (ErrorGroup reads those for a group's page).
func (b *Broker) ErrorGroupStatesOf(ctx context.Context, queue, group string, fps []string) (map[string][]OwnedErrorGroup, error) {
	if len(fps) > MaxGroupStatesOf {
		return nil, errorf(ErrInvalid, "at most %d fingerprints at once", MaxGroupStatesOf)
	}
	out := make(map[string][]OwnedErrorGroup, len(fps))
	err := b.store.View(ctx, func(tx Tx) error {
		q, err := tx.QueueByName(ctx, queue)
		if isNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		var gid int64
		if group != "" {
			if gid, err = tx.GroupID(ctx, group, false); isNotFound(err) {
				return nil
			} else if err != nil {
				return err
			}
		}
		for _, fp := range fps {
			if fp == "" {
				continue
			}
			gs, err := tx.ErrorGroupStates(ctx, ErrorGroupQuery{QueueID: q.ID, GroupID: gid, Fingerprint: fp, Limit: MaxErrorGroups})
			if err != nil {
				return err
			}
			if len(gs) > 0 {
				out[fp] = gs
			}
		}
		return nil
	})
	return out, err
}
