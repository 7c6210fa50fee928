package broker

import (
	"context"
	"slices"
)

// What the dashboard's pages need of error groups you own beyond
// errorgroup_owned.go's calls: the states of the few groups a page
// shows beside something else (the dead-letter list's error groups
// panel, a dead letter's known-issue banner), in one read.

// MaxGroupStatesOf is the most fingerprints ErrorGroupStatesOf reads at
// once: a page's panel of error groups.
const MaxGroupStatesOf = MaxErrorGroups

// ErrorGroupStatesOf returns the error groups of queue whose fingerprint
// is among fps, by fingerprint as stored (fingerprints read from the
// store, as pages pass, are their own keys): of consumer group group, or
// with group "" of each consumer group of the queue that has it (a
// fingerprint can be the error of several; MaxErrorGroups of them at
// most, the lowest ids). A fingerprint no group has is absent, and so
// is an unknown queue or group. It reads their state, owner, note, link
// and whole-life funnel, in one snapshot (statesOf); not the Day and
// Week funnels, versions, trend or history (ErrorGroup reads those for
// a group's page).
func (b *Broker) ErrorGroupStatesOf(ctx context.Context, queue, group string, fps []string) (map[string][]OwnedErrorGroup, error) {
	if len(fps) > MaxGroupStatesOf {
		return nil, errorf(ErrInvalid, "at most %d fingerprints at once", MaxGroupStatesOf)
	}
	var out map[string][]OwnedErrorGroup
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
		out, err = statesOf(ctx, tx, q.ID, gid, fps)
		return err
	})
	if out == nil {
		out = map[string][]OwnedErrorGroup{}
	}
	return out, err
}

// statesOf reads the error groups of queue queueID whose fingerprint is
// among fps (of consumer group groupID, or of each with 0), by
// fingerprint as stored: at most MaxErrorGroups consumer groups a
// fingerprint (of the lowest ids). One statement by error_group_states'
// key reads them all, unless some fingerprint is the error of more
// consumer groups than that: then one a fingerprint.
func statesOf(ctx context.Context, tx ErrorGroupStateTx, queueID, groupID int64, fps []string) (map[string][]OwnedErrorGroup, error) {
	keys := make([]string, 0, len(fps))
	for _, fp := range fps {
		if fp != "" && !slices.Contains(keys, fp) {
			keys = append(keys, fp)
		}
	}
	out := make(map[string][]OwnedErrorGroup, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	limit := len(keys) * MaxErrorGroups
	gs, err := tx.ErrorGroupStates(ctx, ErrorGroupQuery{QueueID: queueID, GroupID: groupID, Fingerprints: keys, Limit: limit})
	if err != nil {
		return nil, err
	}
	for _, g := range gs {
		if len(out[g.Fingerprint]) < MaxErrorGroups {
			out[g.Fingerprint] = append(out[g.Fingerprint], g)
		}
	}
	if len(gs) < limit {
		return out, nil
	}
	clear(out) // the limit may have cut a fingerprint's groups short
	for _, fp := range keys {
		if gs, err = tx.ErrorGroupStates(ctx, ErrorGroupQuery{QueueID: queueID, GroupID: groupID, Fingerprint: fp, Limit: MaxErrorGroups}); err != nil {
			return nil, err
		}
		for _, g := range gs {
			out[g.Fingerprint] = append(out[g.Fingerprint], g)
		}
	}
	return out, nil
}
