package db

// StepSeriesSQL is Series' query of a step of several buckets, summed by
// SQLite over that range, each step's depth and oldest_at from its last
// bucket (the row of MAX).
func (sqliteDialect) StepSeriesSQL(u, table string) string {
	return `SELECT b.queue_id, b.group_id, ?3 + (` + u + ` - ?3) / ?5 * ?5 AS step,
			SUM(b.dead_lettered), SUM(b.replayed), SUM(b.deleted), SUM(b.dropped), SUM(b.completed), SUM(b.failed), SUM(b.replay_completed), SUM(b.replay_failed),
			SUM(b.expired), SUM(b.dead_letters_expired), MAX(` + u + `), b.depth, b.oldest_at FROM ` + table + ` b
			WHERE b.queue_id = ?1 AND b.group_id = ?2 AND ` + u + ` >= ?3 AND ` + u + ` < ?4 GROUP BY step`
}

// StepSeriesSQL is Series' query of a step of several buckets on
// PostgreSQL, which has no bare columns beside an aggregate: the last
// bucket's depth and oldest_at are the first of each step's buckets
// newest first; its sums are numeric, cast back.
func (pgDialect) StepSeriesSQL(u, table string) string {
	return `SELECT b.queue_id, b.group_id, ?3 + (` + u + ` - ?3) / ?5 * ?5 AS step,
			SUM(b.dead_lettered)::bigint, SUM(b.replayed)::bigint, SUM(b.deleted)::bigint, SUM(b.dropped)::bigint, SUM(b.completed)::bigint,
			SUM(b.failed)::bigint, SUM(b.replay_completed)::bigint, SUM(b.replay_failed)::bigint, SUM(b.expired)::bigint, SUM(b.dead_letters_expired)::bigint,
			MAX(` + u + `), (array_agg(b.depth ORDER BY ` + u + ` DESC))[1], (array_agg(b.oldest_at ORDER BY ` + u + ` DESC))[1] FROM ` + table + ` b
			WHERE b.queue_id = ?1 AND b.group_id = ?2 AND ` + u + ` >= ?3 AND ` + u + ` < ?4 GROUP BY b.queue_id, b.group_id, step`
}
