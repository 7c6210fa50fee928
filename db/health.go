package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Ping checks that the database answers a query.
func (d *DB) Ping(ctx context.Context) error {
	if d.pg != nil {
		return pgUnavailable(d.pg.db.PingContext(ctx))
	}
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
func (d *DB) Health(ctx context.Context) error {
	if err := d.Ping(ctx); err != nil {
		return err
	}
	if d.pg != nil {
		return nil // full is the SQLite writer's: PostgreSQL's never set it
	}
	if !d.full.Load() {
		return nil
	}
	probe := func(stmt string, args ...any) func(broker.Tx) error {
		return func(tx broker.Tx) error {
			st, ok := tx.(*storeTx)
			if !ok {
				return errors.New("health: not a db transaction")
			}
			_, err := st.exec(ctx, stmt, args...)
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
func (d *DB) DiskFull() bool { return d.full.Load() }
