package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Ping checks that the database answers a query.
func (d *Store) Ping(ctx context.Context) error {
	var one int
	return d.read.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// spaceProbeBytes is what Health writes to see whether the disk has room
// again: as much as a few pushes, so that one small write squeezed into
// the last free page does not pass for space come back.
const spaceProbeBytes = 256 << 10

// Health checks that the database answers a query and, once a write has
// failed for want of space, whether it can be written again: it commits
// spaceProbeBytes into the settings and then removes them. It fails with
// broker.ErrNoSpace while that does not commit, and clears the state
// when it does, so that a health check (or a scrape of the metrics) sees
// the space come back without waiting for traffic. Only Health clears
// it: a small write that still fits is no sign of space.
func (d *Store) Health(ctx context.Context) error {
	if err := d.Ping(ctx); err != nil {
		return err
	}
	if !d.full.Load() {
		return nil
	}
	probe := func(stmt string, args ...any) func(broker.Tx) error {
		return func(tx broker.Tx) error {
			st, ok := tx.(*sqlcore.Tx)
			if !ok {
				return errors.New("health: not a db transaction")
			}
			_, err := st.Exec(ctx, stmt, args...)
			return err
		}
	}
	if err := d.Update(ctx, broker.UpdateOptions{}, probe(`INSERT INTO settings (key, value) VALUES ('space_probe', printf('%.*c', ?, 'x'))
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, spaceProbeBytes)); err != nil {
		return fmt.Errorf("health: write probe: %w", err)
	}
	if err := d.Update(ctx, broker.UpdateOptions{}, probe(`DELETE FROM settings WHERE key = 'space_probe'`)); err != nil {
		return fmt.Errorf("health: remove probe: %w", err)
	}
	if d.full.Swap(false) {
		d.log.Info("writes go on: there is space for the database again")
	}
	return nil
}

// DiskFull reports whether a write failed for want of space, and Health
// has not found space again since.
func (d *Store) DiskFull() bool { return d.full.Load() }
