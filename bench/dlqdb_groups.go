package main

import (
	"database/sql"
	"fmt"
)

// fillErrorGroups gives the generated dead letters their fingerprints
// and their error groups the kept counts filing them would have left
// (migration 0014's backfill: lazarus_fingerprint is broker.Fingerprint,
// registered by package db on every connection), their hours over the
// retention of those hours (broker.ErrorGroupHourRetention: the 7 d
// funnel sums them), and their states (migration 0033's backfill: open,
// the funnel filed from the dead letters they hold). Without them S2 and
// D10 would read empty groups.
func fillErrorGroups(exec func(string, ...any) (sql.Result, error)) error {
	for _, stmt := range []string{
		`UPDATE dead_letters SET fingerprint = lazarus_fingerprint(error)`,
		`INSERT INTO error_groups (queue_id, group_id, fingerprint, dead_letters, first_failed_at, last_failed_at, sample_error)
		SELECT d.queue_id, d.group_id, d.fingerprint, COUNT(*), MIN(d.failed_at), MAX(d.failed_at),
			(SELECT x.error FROM dead_letters x WHERE x.queue_id = d.queue_id AND x.fingerprint = d.fingerprint AND x.group_id = d.group_id
				ORDER BY x.failed_at DESC, x.id DESC LIMIT 1)
		FROM dead_letters d GROUP BY d.queue_id, d.group_id, d.fingerprint`,
		`INSERT INTO error_group_hours (queue_id, group_id, fingerprint, hour, filed)
		SELECT queue_id, group_id, fingerprint, failed_at / 3600000 AS hour, COUNT(*)
		FROM dead_letters
		WHERE failed_at >= (SELECT MAX(failed_at) FROM dead_letters) - 8 * 24 * 3600000
		GROUP BY queue_id, group_id, fingerprint, hour`,
		`INSERT INTO error_group_states (queue_id, group_id, fingerprint, filed, first_filed_at, last_filed_at)
		SELECT queue_id, group_id, fingerprint, dead_letters, first_failed_at, last_failed_at FROM error_groups`,
	} {
		if _, err := exec(stmt); err != nil {
			return fmt.Errorf("error groups: %w", err)
		}
	}
	return nil
}
