package sqlcore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Error groups (migration 0014): kept counts of the dead letters per
// queue, consumer group and fingerprint (error_groups), and of the dead
// letters filed per hour (error_group_hours), written in the transaction
// of every filing, replay and delete.

// fileErrorGroup upserts error_groups (the sample moves when at is at or
// after the last failure), error_group_hours and, when the ack said a
// consumer version, error_group_versions by their keys. On PostgreSQL
// the fingerprint, sample and version are stored as postgres.text has them, as
// InsertDeadLetter stores them.
func (t *Tx) fileErrorGroup(ctx context.Context, queueID, groupID int64, fingerprint string, at time.Time, errText, version string) error {
	fingerprint, errText, version = t.d.Text(fingerprint), t.d.Text(errText), t.d.Text(version)
	now := MS(at)
	if _, err := t.Exec(ctx, `INSERT INTO error_groups (queue_id, group_id, fingerprint, dead_letters, first_failed_at, last_failed_at, sample_error)
		VALUES (?1, ?2, ?3, 1, ?4, ?4, ?5)
		ON CONFLICT (queue_id, group_id, fingerprint) DO UPDATE SET
			dead_letters = error_groups.dead_letters + 1,
			first_failed_at = min(error_groups.first_failed_at, excluded.first_failed_at),
			sample_error = CASE WHEN excluded.last_failed_at >= error_groups.last_failed_at THEN excluded.sample_error ELSE error_groups.sample_error END,
			last_failed_at = max(error_groups.last_failed_at, excluded.last_failed_at)`,
		queueID, groupID, fingerprint, now, errText); err != nil {
		return fmt.Errorf("error group: %w", err)
	}
	if _, err := t.Exec(ctx, `INSERT INTO error_group_hours (queue_id, group_id, fingerprint, hour, filed) VALUES (?, ?, ?, ?, 1)
		ON CONFLICT (queue_id, group_id, fingerprint, hour) DO UPDATE SET filed = error_group_hours.filed + 1`,
		queueID, groupID, fingerprint, at.Unix()/3600); err != nil {
		return fmt.Errorf("error group hour: %w", err)
	}
	if version == "" {
		return nil
	}
	// Left when the group's row goes away (migration 0034 says why).
	if _, err := t.Exec(ctx, `INSERT INTO error_group_versions (queue_id, group_id, fingerprint, version, filed, first_seen, last_seen)
		VALUES (?1, ?2, ?3, ?4, 1, ?5, ?5)
		ON CONFLICT (queue_id, group_id, fingerprint, version) DO UPDATE SET
			filed = error_group_versions.filed + 1,
			first_seen = min(error_group_versions.first_seen, excluded.first_seen),
			last_seen = max(error_group_versions.last_seen, excluded.last_seen)`,
		queueID, groupID, fingerprint, version, MS(at)); err != nil {
		return fmt.Errorf("error group version: %w", err)
	}
	return nil
}

// GroupVersionsSQL is ErrorGroupVersions' statement: a search of
// error_group_versions' primary key, its rows sorted (a group has few).
const GroupVersionsSQL = `SELECT version, filed, first_seen, last_seen FROM error_group_versions
	WHERE queue_id = ? AND group_id = ? AND fingerprint = ? ORDER BY last_seen DESC, version`

// ErrorGroupVersions reads the versions of an error group, the one last
// seen first (the fingerprint as fileErrorGroup stored it).
func (t *Tx) ErrorGroupVersions(ctx context.Context, queueID, groupID int64, fingerprint string) ([]broker.ErrorGroupVersion, error) {
	rows, err := t.Query(ctx, GroupVersionsSQL, queueID, groupID, t.d.Text(fingerprint))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.ErrorGroupVersion
	for rows.Next() {
		var v broker.ErrorGroupVersion
		var first, last int64
		if err := rows.Scan(&v.Version, &v.Filed, &first, &last); err != nil {
			return nil, err
		}
		v.FirstSeen, v.LastSeen = FromMS(first), FromMS(last)
		out = append(out, v)
	}
	return out, rows.Err()
}

// RemoveFromErrorGroup lowers error_groups' count by its key, then
// deletes the row when the count is 0 or below (the fingerprint as
// fileErrorGroup stored it).
func (t *Tx) RemoveFromErrorGroup(ctx context.Context, queueID, groupID int64, fingerprint string, n int64) error {
	fingerprint = t.d.Text(fingerprint)
	if _, err := t.Exec(ctx, `UPDATE error_groups SET dead_letters = dead_letters - ? WHERE queue_id = ? AND group_id = ? AND fingerprint = ?`,
		n, queueID, groupID, fingerprint); err != nil {
		return fmt.Errorf("error group: %w", err)
	}
	if _, err := t.Exec(ctx, `DELETE FROM error_groups WHERE queue_id = ? AND group_id = ? AND fingerprint = ? AND dead_letters <= 0`,
		queueID, groupID, fingerprint); err != nil {
		return fmt.Errorf("error group: %w", err)
	}
	return nil
}

const errorGroupCols = `group_id, fingerprint, dead_letters, first_failed_at, last_failed_at, sample_error`

func scanErrorGroups(rows Rows, err error) ([]broker.ErrorGroup, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.ErrorGroup
	for rows.Next() {
		var g broker.ErrorGroup
		var first, last int64
		if err := rows.Scan(&g.GroupID, &g.Fingerprint, &g.DeadLetters, &first, &last, &g.SampleError); err != nil {
			return nil, err
		}
		g.FirstFailedAt, g.LastFailedAt = FromMS(first), FromMS(last)
		out = append(out, g)
	}
	return out, rows.Err()
}

// queueGroups is the subquery of a queue's consumer groups (?1: the
// queue's id), those that have kept counts: every group with dead
// letters has them.
const queueGroups = `(SELECT group_id FROM group_stats WHERE queue_id = ?1)`

// The reads of the error groups (their plans are checked in
// tx_groups_test.go: each is a search of a key or of error_groups_top).
// A list of fingerprints is a JSON array of strings: PostgreSQL reads it
// with json_array_elements_text (postgres.translated's json_each reads integers).
const (
	GroupOneSQL = `SELECT ` + errorGroupCols + ` FROM error_groups WHERE queue_id = ? AND group_id = ? AND fingerprint = ?`
	GroupTopSQL = `SELECT ` + errorGroupCols + ` FROM error_groups
		WHERE queue_id = ? AND group_id = ? ORDER BY dead_letters DESC, fingerprint LIMIT ?`
	// The fingerprints only: error_groups_top has them, not the samples
	// (up to 8 KiB each).
	GroupTopFingerprintsSQL = `SELECT fingerprint FROM error_groups
		WHERE queue_id = ? AND group_id = ? ORDER BY dead_letters DESC, fingerprint LIMIT ?`
)

var (
	GroupAcrossSQL = PGQuery(`SELECT `+errorGroupCols+` FROM error_groups
		WHERE queue_id = ?1 AND group_id IN `+queueGroups+` AND fingerprint IN (SELECT value FROM json_each(?2))`,
		`SELECT `+errorGroupCols+` FROM error_groups
		WHERE queue_id = ?1 AND group_id IN `+queueGroups+` AND fingerprint IN (SELECT json_array_elements_text(?2::json))`)
	// The hours of each fingerprint come as one row: its hours (from ?3)
	// and counts in one text, "hour:filed,..." (hoursOf reads it). Ten
	// groups' 24 hours were 240 rows, each stepped and scanned through
	// database/sql: 215 µs a dead-letter page, 60 µs of it SQLite's.
	GroupHoursSQL = PGQuery(`SELECT fingerprint, group_concat((hour - ?3) || ':' || filed) FROM error_group_hours
		WHERE queue_id = ?1 AND group_id = ?4 AND fingerprint IN (SELECT value FROM json_each(?2)) AND hour >= ?3
		GROUP BY fingerprint`,
		`SELECT fingerprint, string_agg((hour - ?3) || ':' || filed, ',') FROM error_group_hours
		WHERE queue_id = ?1 AND group_id = ?4 AND fingerprint IN (SELECT json_array_elements_text(?2::json)) AND hour >= ?3
		GROUP BY fingerprint`)
	GroupHoursAcrossSQL = PGQuery(`SELECT fingerprint, group_concat(h || ':' || n) FROM (SELECT fingerprint, hour - ?3 AS h, SUM(filed) AS n FROM error_group_hours
		WHERE queue_id = ?1 AND group_id IN `+queueGroups+` AND fingerprint IN (SELECT value FROM json_each(?2)) AND hour >= ?3 AND ?4 = 0
		GROUP BY fingerprint, hour) GROUP BY fingerprint`,
		`SELECT fingerprint, string_agg(h || ':' || n, ',') FROM (SELECT fingerprint, hour - ?3 AS h, SUM(filed) AS n FROM error_group_hours
		WHERE queue_id = ?1 AND group_id IN `+queueGroups+` AND fingerprint IN (SELECT json_array_elements_text(?2::json)) AND hour >= ?3 AND ?4 = 0
		GROUP BY fingerprint, hour) t GROUP BY fingerprint`)
)

// textsJSON is a JSON array of ss, each as the store keeps text (a
// statement's json_each list of fingerprints).
func (t *Tx) textsJSON(ss []string) (string, error) {
	held := make([]string, len(ss))
	for i, s := range ss {
		held[i] = t.d.Text(s)
	}
	b, err := json.Marshal(held)
	return string(b), err
}

// ErrorGroups runs errorGroups and names the queue in each; a fingerprint
// is looked up as fileErrorGroup stored it.
func (t *Tx) ErrorGroups(ctx context.Context, queueID, groupID int64, fingerprint string, limit int) ([]broker.ErrorGroup, error) {
	gs, err := t.errorGroups(ctx, queueID, groupID, fingerprint, limit)
	for i := range gs {
		gs[i].QueueID = queueID
	}
	return gs, err
}

func (t *Tx) errorGroups(ctx context.Context, queueID, groupID int64, fingerprint string, limit int) ([]broker.ErrorGroup, error) {
	fingerprint = t.d.Text(fingerprint)
	switch {
	case groupID != 0 && fingerprint != "":
		return scanErrorGroups(t.Query(ctx, GroupOneSQL, queueID, groupID, fingerprint))
	case groupID != 0:
		return scanErrorGroups(t.Query(ctx, GroupTopSQL, queueID, groupID, limit))
	}
	// Summed over the consumer groups: the fingerprints that are among the
	// biggest of some group, then all their rows.
	fps := []string{fingerprint}
	if fingerprint == "" {
		gids, err := t.queueGroupIDs(ctx, queueID)
		if err != nil {
			return nil, err
		}
		fps = fps[:0]
		seen := map[string]bool{}
		for _, g := range gids {
			rows, err := t.Query(ctx, GroupTopFingerprintsSQL, queueID, g, limit)
			if err != nil {
				return nil, err
			}
			for rows.Next() {
				var fp string
				if err := rows.Scan(&fp); err != nil {
					rows.Close()
					return nil, err
				}
				if !seen[fp] {
					seen[fp] = true
					fps = append(fps, fp)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, err
			}
		}
		if len(fps) == 0 {
			return nil, nil
		}
	}
	list, err := json.Marshal(fps)
	if err != nil {
		return nil, err
	}
	rows, err := scanErrorGroups(t.Query(ctx, GroupAcrossSQL, queueID, string(list)))
	if err != nil {
		return nil, err
	}
	return sumErrorGroups(rows, limit), nil
}

// queueGroupIDs lists the ids of a queue's consumer groups that have
// counts (group_stats): every one with dead letters.
func (t *Tx) queueGroupIDs(ctx context.Context, queueID int64) ([]int64, error) {
	return t.QueryIDs(ctx, `SELECT group_id FROM group_stats WHERE queue_id = ?`, queueID)
}

// sumErrorGroups adds up the rows of the same fingerprint in several
// consumer groups (GroupID 0; the newest sample, the lowest group's of
// those filed at the same millisecond, on either store whatever order
// its rows come in), biggest first, and keeps limit of them.
func sumErrorGroups(rows []broker.ErrorGroup, limit int) []broker.ErrorGroup {
	slices.SortStableFunc(rows, func(a, b broker.ErrorGroup) int { return cmp.Compare(a.GroupID, b.GroupID) })
	at := map[string]int{}
	var out []broker.ErrorGroup
	for _, r := range rows {
		i, ok := at[r.Fingerprint]
		if !ok {
			r.GroupID = 0
			at[r.Fingerprint] = len(out)
			out = append(out, r)
			continue
		}
		g := &out[i]
		g.DeadLetters += r.DeadLetters
		if r.FirstFailedAt.Before(g.FirstFailedAt) {
			g.FirstFailedAt = r.FirstFailedAt
		}
		if r.LastFailedAt.After(g.LastFailedAt) {
			g.LastFailedAt, g.SampleError = r.LastFailedAt, r.SampleError
		}
	}
	slices.SortFunc(out, func(a, b broker.ErrorGroup) int {
		return cmp.Or(cmp.Compare(b.DeadLetters, a.DeadLetters), cmp.Compare(a.Fingerprint, b.Fingerprint))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// ErrorGroupHours reads error_group_hours by its key (the queue's groups
// by queueGroups when groupID is 0), summed per fingerprint and hour;
// the fingerprints are looked up as fileErrorGroup stored them.
func (t *Tx) ErrorGroupHours(ctx context.Context, queueID, groupID int64, fingerprints []string, fromHour int64) ([]broker.ErrorGroupHour, error) {
	if len(fingerprints) == 0 {
		return nil, nil
	}
	list, err := t.textsJSON(fingerprints)
	if err != nil {
		return nil, err
	}
	query := GroupHoursSQL
	if groupID == 0 {
		query = GroupHoursAcrossSQL
	}
	rows, err := t.Query(ctx, query, queueID, list, fromHour, groupID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.ErrorGroupHour
	for rows.Next() {
		var fp, hours string
		if err := rows.Scan(&fp, &hours); err != nil {
			return nil, err
		}
		if out, err = hoursOf(out, fp, hours, fromHour); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}

// hoursOf appends to out the hours of fingerprint fp that list holds:
// "hour:filed,...", each hour counted from fromHour.
func hoursOf(out []broker.ErrorGroupHour, fp, list string, fromHour int64) ([]broker.ErrorGroupHour, error) {
	for item := range strings.SplitSeq(list, ",") {
		h, n, ok := strings.Cut(item, ":")
		hour, herr := strconv.ParseInt(h, 10, 64)
		filed, ferr := strconv.ParseInt(n, 10, 64)
		if !ok || herr != nil || ferr != nil {
			return nil, fmt.Errorf("error group hours of %q: %q is not hour:filed", fp, item)
		}
		out = append(out, broker.ErrorGroupHour{Fingerprint: fp, Hour: fromHour + hour, Filed: filed})
	}
	return out, nil
}
