package sqlcore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Error groups you own (migration 0033): error_group_states keeps each
// group's state and whole-life funnel, error_group_history its changes,
// and error_group_hours the funnel per hour beside the filings.

// markCols are the columns of an ErrorGroupMark, as RETURNING names them.
const markCols = `id, state, regressed, filed, until_at, until_filed`

func scanMark(r Row) (broker.ErrorGroupMark, error) {
	var m broker.ErrorGroupMark
	var state string
	var regressed, until int64
	if err := r.Scan(&m.ID, &state, &regressed, &m.Filed, &until, &m.UntilFiled); err != nil {
		return broker.ErrorGroupMark{}, err
	}
	m.State, m.Regressed, m.UntilAt = broker.ErrorGroupState(state), regressed != 0, FromMS(until)
	return m, nil
}

// The statements of AddErrorGroupFunnel: by key an upsert (a filing
// moves the span of filings), by id an update.
const (
	addFunnelByKeySQL = `INSERT INTO error_group_states (queue_id, group_id, fingerprint, filed, replayed, succeeded, failed_again, deleted, expired, first_filed_at, last_filed_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)
		ON CONFLICT (queue_id, group_id, fingerprint) DO UPDATE SET
			filed = error_group_states.filed + excluded.filed,
			replayed = error_group_states.replayed + excluded.replayed,
			succeeded = error_group_states.succeeded + excluded.succeeded,
			failed_again = error_group_states.failed_again + excluded.failed_again,
			deleted = error_group_states.deleted + excluded.deleted,
			expired = error_group_states.expired + excluded.expired,
			last_filed_at = CASE WHEN excluded.filed > 0 AND excluded.last_filed_at > error_group_states.last_filed_at
				THEN excluded.last_filed_at ELSE error_group_states.last_filed_at END
		RETURNING ` + markCols
	addFunnelByIDSQL = `UPDATE error_group_states SET filed = filed + ?2, replayed = replayed + ?3, succeeded = succeeded + ?4,
			failed_again = failed_again + ?5, deleted = deleted + ?6, expired = expired + ?7,
			last_filed_at = CASE WHEN ?2 > 0 AND ?8 > last_filed_at THEN ?8 ELSE last_filed_at END
		WHERE id = ?1 RETURNING ` + markCols + `, queue_id, group_id, fingerprint`
	addFunnelHourSQL = `INSERT INTO error_group_hours (queue_id, group_id, fingerprint, hour, filed, replayed, succeeded, failed_again, deleted, expired)
		VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?)
		ON CONFLICT (queue_id, group_id, fingerprint, hour) DO UPDATE SET
			replayed = error_group_hours.replayed + excluded.replayed,
			succeeded = error_group_hours.succeeded + excluded.succeeded,
			failed_again = error_group_hours.failed_again + excluded.failed_again,
			deleted = error_group_hours.deleted + excluded.deleted,
			expired = error_group_hours.expired + excluded.expired`
)

// AddErrorGroupFunnel upserts error_group_states by its key (or updates
// it by id), then error_group_hours by its key when d has counts other
// than Filed. The fingerprint is stored as fileErrorGroup stores it.
func (t *Tx) AddErrorGroupFunnel(ctx context.Context, k broker.ErrorGroupKey, d broker.Funnel, at time.Time) (broker.ErrorGroupMark, error) {
	var m broker.ErrorGroupMark
	var err error
	if k.ID != 0 {
		var fp string
		var state string
		var regressed, until int64
		err = t.QueryRow(ctx, addFunnelByIDSQL, k.ID, d.Filed, d.Replayed, d.Succeeded, d.FailedAgain, d.Deleted, d.Expired, MS(at)).
			Scan(&m.ID, &state, &regressed, &m.Filed, &until, &m.UntilFiled, &k.QueueID, &k.GroupID, &fp)
		if errors.Is(err, errNoRows) {
			return broker.ErrorGroupMark{}, nil
		}
		m.State, m.Regressed, m.UntilAt = broker.ErrorGroupState(state), regressed != 0, FromMS(until)
		k.Fingerprint = fp
	} else {
		k.Fingerprint = t.d.Text(k.Fingerprint)
		m, err = scanMark(t.QueryRow(ctx, addFunnelByKeySQL, k.QueueID, k.GroupID, k.Fingerprint,
			d.Filed, d.Replayed, d.Succeeded, d.FailedAgain, d.Deleted, d.Expired, MS(at)))
	}
	if err != nil {
		return broker.ErrorGroupMark{}, fmt.Errorf("error group funnel: %w", err)
	}
	if d.Replayed == 0 && d.Succeeded == 0 && d.FailedAgain == 0 && d.Deleted == 0 && d.Expired == 0 {
		return m, nil
	}
	if _, err := t.Exec(ctx, addFunnelHourSQL, k.QueueID, k.GroupID, k.Fingerprint, at.Unix()/3600,
		d.Replayed, d.Succeeded, d.FailedAgain, d.Deleted, d.Expired); err != nil {
		return broker.ErrorGroupMark{}, fmt.Errorf("error group funnel hour: %w", err)
	}
	return m, nil
}

// stateCols are the columns of an OwnedErrorGroup, of error_group_states
// s joined to error_groups g (its dead letters now), queues q and groups
// c.
const stateCols = `s.id, s.queue_id, q.name, s.group_id, COALESCE(c.name, ''), s.fingerprint, s.state, s.regressed, s.owner, s.note, s.link, s.version,
	s.until_at, s.until_filed, s.changed_at, s.changed_by,
	s.filed, s.replayed, s.succeeded, s.failed_again, s.deleted, s.expired, s.lost, s.since_replayed, s.since_succeeded, s.since_failed_again,
	s.first_filed_at, s.last_filed_at, COALESCE(g.dead_letters, 0), COALESCE(g.sample_error, '')`

// stateJoins joins error_group_states s to the names and the dead
// letters now.
const stateJoins = ` JOIN queues q ON q.id = s.queue_id
	LEFT JOIN groups c ON c.id = s.group_id
	LEFT JOIN error_groups g ON g.queue_id = s.queue_id AND g.group_id = s.group_id AND g.fingerprint = s.fingerprint`

// stateRank is the lists' order of states: open groups first
// (regressed first among them), then acknowledged, resolved and
// ignored; the indexes error_group_states_list and _queue_list keep it.
const stateRank = `(CASE s.state WHEN 'open' THEN 1 - s.regressed WHEN 'acknowledged' THEN 2 WHEN 'resolved' THEN 3 ELSE 4 END)`

// stateOrder sorts by stateRank, each rank newest filed first.
const stateOrder = ` ORDER BY ` + stateRank + `, s.last_filed_at DESC, s.id DESC`

// The reads of error_group_states: by id, by a queue's fingerprint, and
// by a filter whose empty fields select all (a consumer version: the
// groups that have it in error_group_versions, by its key). The
// filtered reads pick their rows from error_group_states alone, along
// error_group_states_list (or _queue_list, for a queue) in the lists'
// order, a state being a range of ranks (?8 to ?9): no sort, and the
// walk ends at the limit's row. Then they join those rows only.
const (
	StateByIDSQL = `SELECT ` + stateCols + ` FROM error_group_states s` + stateJoins + ` WHERE s.id = ?`
	// A queue's fingerprint, in one consumer group or (0) in each, by
	// the consumer groups' ids: a search of error_group_states' key (queue_id, fingerprint, group_id)
	// (a page's panel reads a few at a time).
	StateByKeySQL = `SELECT ` + stateCols + ` FROM error_group_states s` + stateJoins + `
		WHERE s.queue_id = ?1 AND s.fingerprint = ?2 AND (?3 = 0 OR s.group_id = ?3) ORDER BY s.group_id LIMIT ?4`
	stateFilters = ` AND (?2 = 0 OR s.group_id = ?2) AND (?3 = '' OR s.fingerprint = ?3)
			AND (?4 = '' OR s.state = ?4) AND (?5 = '' OR s.owner = ?5)
			AND (?7 = '' OR EXISTS (SELECT 1 FROM error_group_versions v
				WHERE v.queue_id = s.queue_id AND v.group_id = s.group_id AND v.fingerprint = s.fingerprint AND v.version = ?7))`
	StateFilteredSQL = `SELECT ` + stateCols + ` FROM (SELECT * FROM error_group_states s
		WHERE ` + stateRank + ` BETWEEN ?8 AND ?9 AND ?1 = 0` + stateFilters + stateOrder + ` LIMIT ?6) s` + stateJoins + stateOrder
	StateOfQueueSQL = `SELECT ` + stateCols + ` FROM (SELECT * FROM error_group_states s
		WHERE s.queue_id = ?1 AND ` + stateRank + ` BETWEEN ?8 AND ?9` + stateFilters + stateOrder + ` LIMIT ?6) s` + stateJoins + stateOrder
	// The queues of a queue scope (?10, a JSON array of ids), along
	// error_group_states_list like StateFilteredSQL, the other queues'
	// rows passed over.
	StateOfQueuesSQL = `SELECT ` + stateCols + ` FROM (SELECT * FROM error_group_states s
		WHERE ` + stateRank + ` BETWEEN ?8 AND ?9 AND ?1 = 0 AND s.queue_id IN (SELECT value FROM json_each(?10))` + stateFilters + stateOrder + ` LIMIT ?6) s` + stateJoins + stateOrder
)

// StateByKeysSQL is StateByKeySQL of the fingerprints of a JSON array
// (?2), by fingerprint, then consumer group.
var StateByKeysSQL = PGQuery(`SELECT `+stateCols+` FROM error_group_states s`+stateJoins+`
		WHERE s.queue_id = ?1 AND s.fingerprint IN (SELECT value FROM json_each(?2)) AND (?3 = 0 OR s.group_id = ?3)
		ORDER BY s.fingerprint, s.group_id LIMIT ?4`,
	`SELECT `+stateCols+` FROM error_group_states s`+stateJoins+`
		WHERE s.queue_id = ?1 AND s.fingerprint IN (SELECT json_array_elements_text(?2::json)) AND (?3 = 0 OR s.group_id = ?3)
		ORDER BY s.fingerprint, s.group_id LIMIT ?4`)

// stateRanks are the ranks (stateRank) of a state: "" all.
func stateRanks(s broker.ErrorGroupState) (lo, hi int) {
	switch s {
	case broker.GroupOpen:
		return 0, 1
	case broker.GroupAcknowledged:
		return 2, 2
	case broker.GroupResolved:
		return 3, 3
	case broker.GroupIgnored:
		return 4, 4
	}
	return 0, 4
}

func scanStates(rows Rows, err error) ([]broker.OwnedErrorGroup, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.OwnedErrorGroup
	for rows.Next() {
		var g broker.OwnedErrorGroup
		var state string
		var regressed, until, changed, first, last int64
		if err := rows.Scan(&g.ID, &g.QueueID, &g.Queue, &g.GroupID, &g.Group, &g.Fingerprint, &state, &regressed, &g.Owner, &g.Note, &g.Link, &g.Version,
			&until, &g.UntilFiled, &changed, &g.ChangedBy,
			&g.Life.Filed, &g.Life.Replayed, &g.Life.Succeeded, &g.Life.FailedAgain, &g.Life.Deleted, &g.Life.Expired, &g.Life.Lost,
			&g.Since.Replayed, &g.Since.Succeeded, &g.Since.FailedAgain,
			&first, &last, &g.DeadLetters, &g.SampleError); err != nil {
			return nil, err
		}
		g.State, g.Regressed = broker.ErrorGroupState(state), regressed != 0
		g.UntilAt, g.ChangedAt, g.FirstFiledAt, g.LastFiledAt = FromMS(until), FromMS(changed), FromMS(first), FromMS(last)
		out = append(out, g)
	}
	return out, rows.Err()
}

// ErrorGroupStates reads error_group_states by id, or filtered (a
// fingerprint as fileErrorGroup stored it).
func (t *Tx) ErrorGroupStates(ctx context.Context, q broker.ErrorGroupQuery) ([]broker.OwnedErrorGroup, error) {
	if q.ID != 0 {
		return scanStates(t.Query(ctx, StateByIDSQL, q.ID))
	}
	limit := q.Limit
	if limit <= 0 {
		limit = broker.MaxErrorGroups
	}
	if q.Fingerprints != nil {
		if q.QueueID == 0 || q.Fingerprint != "" || q.State != "" || q.Owner != "" || q.Version != "" {
			return nil, fmt.Errorf("error group states of fingerprints: a queue and nothing else is their filter")
		}
		list, err := t.textsJSON(q.Fingerprints)
		if err != nil {
			return nil, err
		}
		return scanStates(t.Query(ctx, StateByKeysSQL, q.QueueID, list, q.GroupID, limit))
	}
	if q.QueueID != 0 && q.Fingerprint != "" && q.State == "" && q.Owner == "" && q.Version == "" {
		return scanStates(t.Query(ctx, StateByKeySQL, q.QueueID, t.d.Text(q.Fingerprint), q.GroupID, limit))
	}
	lo, hi := stateRanks(q.State)
	if q.QueueID == 0 && q.QueueIDs != nil {
		return scanStates(t.Query(ctx, StateOfQueuesSQL, q.QueueID, q.GroupID, t.d.Text(q.Fingerprint), string(q.State), q.Owner, limit, q.Version, lo, hi, IntsJSON(q.QueueIDs)))
	}
	stmt := StateFilteredSQL
	if q.QueueID != 0 {
		stmt = StateOfQueueSQL
	}
	return scanStates(t.Query(ctx, stmt, q.QueueID, q.GroupID, t.d.Text(q.Fingerprint), string(q.State), q.Owner, limit, q.Version, lo, hi))
}

// WindowsSQL sums the funnels of the groups a JSON array of ids names,
// from weekHour (?2) on, and from dayHour (?3) on: a row a group that
// has any. On PostgreSQL the hours of each from ?2 on. On SQLite the
// days of error_group_days (0042, kept by triggers to the sums of the
// hours) from weekDaySQL, the day boundary nearest ?2, and the hours
// between that boundary and ?2, added when it is after ?2 and taken
// away when before (at most 12 rows a group, not up to 168); the day
// from the hours from ?3 on. Each part is summed a group at a time in
// ids' order, then the parts' rows (at most 3 a group) by group.
var WindowsSQL = PGQuery(`SELECT id,
		SUM(CASE WHEN w = 0 THEN f ELSE 0 END), SUM(CASE WHEN w = 0 THEN r ELSE 0 END), SUM(CASE WHEN w = 0 THEN sc ELSE 0 END),
		SUM(CASE WHEN w = 0 THEN fa ELSE 0 END), SUM(CASE WHEN w = 0 THEN de ELSE 0 END), SUM(CASE WHEN w = 0 THEN ex ELSE 0 END),
		SUM(CASE WHEN w = 1 THEN f ELSE 0 END), SUM(CASE WHEN w = 1 THEN r ELSE 0 END), SUM(CASE WHEN w = 1 THEN sc ELSE 0 END),
		SUM(CASE WHEN w = 1 THEN fa ELSE 0 END), SUM(CASE WHEN w = 1 THEN de ELSE 0 END), SUM(CASE WHEN w = 1 THEN ex ELSE 0 END)
	FROM (SELECT s.id AS id, 0 AS w, SUM(h.filed) AS f, SUM(h.replayed) AS r, SUM(h.succeeded) AS sc,
			SUM(h.failed_again) AS fa, SUM(h.deleted) AS de, SUM(h.expired) AS ex
		FROM error_group_states s JOIN error_group_hours h
			ON h.queue_id = s.queue_id AND h.group_id = s.group_id AND h.fingerprint = s.fingerprint AND h.hour >= ?3
		WHERE s.id IN (SELECT value FROM json_each(?1)) GROUP BY s.id
	UNION ALL
	SELECT s.id, 1, SUM(d.filed), SUM(d.replayed), SUM(d.succeeded), SUM(d.failed_again), SUM(d.deleted), SUM(d.expired)
		FROM error_group_states s JOIN error_group_days d
			ON d.queue_id = s.queue_id AND d.group_id = s.group_id AND d.fingerprint = s.fingerprint AND d.day >= `+weekDaySQL+`
		WHERE s.id IN (SELECT value FROM json_each(?1)) GROUP BY s.id
	UNION ALL
	SELECT s.id, 1, SUM(CASE WHEN h.hour >= ?2 THEN h.filed ELSE -h.filed END), SUM(CASE WHEN h.hour >= ?2 THEN h.replayed ELSE -h.replayed END),
			SUM(CASE WHEN h.hour >= ?2 THEN h.succeeded ELSE -h.succeeded END), SUM(CASE WHEN h.hour >= ?2 THEN h.failed_again ELSE -h.failed_again END),
			SUM(CASE WHEN h.hour >= ?2 THEN h.deleted ELSE -h.deleted END), SUM(CASE WHEN h.hour >= ?2 THEN h.expired ELSE -h.expired END)
		FROM error_group_states s JOIN error_group_hours h
			ON h.queue_id = s.queue_id AND h.group_id = s.group_id AND h.fingerprint = s.fingerprint
			AND h.hour >= MIN(?2, `+weekDaySQL+` * 24) AND h.hour < MAX(?2, `+weekDaySQL+` * 24)
		WHERE s.id IN (SELECT value FROM json_each(?1)) GROUP BY s.id)
	GROUP BY id`,
	`SELECT s.id,
		SUM(CASE WHEN h.hour >= ?3 THEN h.filed ELSE 0 END)::bigint, SUM(CASE WHEN h.hour >= ?3 THEN h.replayed ELSE 0 END)::bigint,
		SUM(CASE WHEN h.hour >= ?3 THEN h.succeeded ELSE 0 END)::bigint, SUM(CASE WHEN h.hour >= ?3 THEN h.failed_again ELSE 0 END)::bigint,
		SUM(CASE WHEN h.hour >= ?3 THEN h.deleted ELSE 0 END)::bigint, SUM(CASE WHEN h.hour >= ?3 THEN h.expired ELSE 0 END)::bigint,
		SUM(h.filed)::bigint, SUM(h.replayed)::bigint, SUM(h.succeeded)::bigint, SUM(h.failed_again)::bigint, SUM(h.deleted)::bigint, SUM(h.expired)::bigint
	FROM error_group_states s JOIN error_group_hours h
		ON h.queue_id = s.queue_id AND h.group_id = s.group_id AND h.fingerprint = s.fingerprint AND h.hour >= ?2
	WHERE s.id IN (SELECT value::bigint FROM json_array_elements_text(?1::json) AS value) GROUP BY s.id`)

// weekDaySQL is the day (of error_group_days) whose start is the day
// boundary nearest the hour ?2.
const weekDaySQL = `((?2 + 12) / 24)`

// WindowSQL sums the hours of the groups a JSON array of ids names from
// ?2 on: WindowsSQL when both windows start at one hour (the page's list
// of 24 h funnels only).
var WindowSQL = PGQuery(`SELECT s.id, SUM(h.filed), SUM(h.replayed), SUM(h.succeeded), SUM(h.failed_again), SUM(h.deleted), SUM(h.expired)
	FROM error_group_states s JOIN error_group_hours h
		ON h.queue_id = s.queue_id AND h.group_id = s.group_id AND h.fingerprint = s.fingerprint AND h.hour >= ?2
	WHERE s.id IN (SELECT value FROM json_each(?1)) GROUP BY s.id`,
	`SELECT s.id, SUM(h.filed)::bigint, SUM(h.replayed)::bigint, SUM(h.succeeded)::bigint, SUM(h.failed_again)::bigint, SUM(h.deleted)::bigint, SUM(h.expired)::bigint
	FROM error_group_states s JOIN error_group_hours h
		ON h.queue_id = s.queue_id AND h.group_id = s.group_id AND h.fingerprint = s.fingerprint AND h.hour >= ?2
	WHERE s.id IN (SELECT value::bigint FROM json_array_elements_text(?1::json) AS value) GROUP BY s.id`)

// ErrorGroupWindows runs WindowsSQL over gs's ids; WindowSQL when the
// windows start at one hour (both are then its sums).
func (t *Tx) ErrorGroupWindows(ctx context.Context, gs []broker.OwnedErrorGroup, dayHour, weekHour int64) error {
	if len(gs) == 0 {
		return nil
	}
	ids := make([]int64, len(gs))
	at := make(map[int64]int, len(gs))
	for i, g := range gs {
		ids[i], at[g.ID] = g.ID, i
	}
	one := dayHour == weekHour
	var rows Rows
	var err error
	if one {
		rows, err = t.Query(ctx, WindowSQL, IntsJSON(ids), dayHour)
	} else {
		rows, err = t.Query(ctx, WindowsSQL, IntsJSON(ids), weekHour, dayHour)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var d, w broker.Funnel
		if one {
			err = rows.Scan(&id, &d.Filed, &d.Replayed, &d.Succeeded, &d.FailedAgain, &d.Deleted, &d.Expired)
			w = d
		} else {
			err = rows.Scan(&id, &d.Filed, &d.Replayed, &d.Succeeded, &d.FailedAgain, &d.Deleted, &d.Expired,
				&w.Filed, &w.Replayed, &w.Succeeded, &w.FailedAgain, &w.Deleted, &w.Expired)
		}
		if err != nil {
			return err
		}
		if i, ok := at[id]; ok {
			gs[i].Day, gs[i].Week = d, w
		}
	}
	return rows.Err()
}

// The statements of SetErrorGroupState: a change of state, and an edit.
const (
	setStateSQL = `UPDATE error_group_states SET state = ?1, regressed = ?2, owner = ?3, note = ?4, link = ?5, version = ?6,
			until_at = ?7, until_filed = ?8, changed_at = ?9, changed_by = ?10,
			since_replayed = replayed, since_succeeded = succeeded, since_failed_again = failed_again
		WHERE id = ?11`
	editStateSQL = `UPDATE error_group_states SET state = ?1, regressed = ?2, owner = ?3, note = ?4, link = ?5, version = ?6,
			until_at = ?7, until_filed = ?8
		WHERE id = ?9`
)

// SetErrorGroupState updates error_group_states by id and inserts the
// history row.
func (t *Tx) SetErrorGroupState(ctx context.Context, g broker.OwnedErrorGroup, c broker.ErrorGroupChange) error {
	regressed := 0
	if g.Regressed {
		regressed = 1
	}
	// An edit (the state stays) keeps when the state began, and so the
	// evidence's start.
	args := []any{string(g.State), regressed, t.d.Text(g.Owner), t.d.Text(g.Note), t.d.Text(g.Link), t.d.Text(g.Version), MS(g.UntilAt), g.UntilFiled}
	stmt := setStateSQL
	if c.From == c.To {
		stmt, args = editStateSQL, append(args, g.ID)
	} else {
		args = append(args, MS(c.At), t.d.Text(c.Actor), g.ID)
	}
	if _, err := t.Exec(ctx, stmt, args...); err != nil {
		return fmt.Errorf("error group state: %w", err)
	}
	if _, err := t.Exec(ctx, `INSERT INTO error_group_history (state_id, at, actor, from_state, to_state, why) VALUES (?, ?, ?, ?, ?, ?)`,
		g.ID, MS(c.At), t.d.Text(c.Actor), string(c.From), string(c.To), t.d.Text(c.Why)); err != nil {
		return fmt.Errorf("error group history: %w", err)
	}
	return nil
}

// ErrorGroupHistory reads error_group_history by its group index.
func (t *Tx) ErrorGroupHistory(ctx context.Context, id int64, limit int) ([]broker.ErrorGroupChange, error) {
	rows, err := t.Query(ctx, `SELECT at, actor, from_state, to_state, why FROM error_group_history WHERE state_id = ? ORDER BY id DESC LIMIT ?`, id, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.ErrorGroupChange
	for rows.Next() {
		var c broker.ErrorGroupChange
		var at int64
		var from, to string
		if err := rows.Scan(&at, &c.Actor, &from, &to, &c.Why); err != nil {
			return nil, err
		}
		c.At, c.From, c.To = FromMS(at), broker.ErrorGroupState(from), broker.ErrorGroupState(to)
		out = append(out, c)
	}
	return out, rows.Err()
}

// IgnoresEnded reads error_group_states_until.
func (t *Tx) IgnoresEnded(ctx context.Context, now time.Time, limit int) ([]int64, error) {
	return t.QueryIDs(ctx, `SELECT id FROM error_group_states WHERE state = 'ignored' AND until_at > 0 AND until_at <= ? ORDER BY until_at LIMIT ?`, MS(now), limit)
}

// errorGroupCountsSQL reads each queue's open and regressed groups: on
// SQLite from error_group_open_counts, kept by triggers (migration 0041);
// on PostgreSQL counted from the partial index error_group_states_open
// (a kept row a queue would be a point where filing processes queue).
var errorGroupCountsSQL = PGQuery(`SELECT queue_id, open, regressed FROM error_group_open_counts WHERE open > 0`,
	`SELECT queue_id, COUNT(*), SUM(regressed)::bigint FROM error_group_states WHERE state = 'open' GROUP BY queue_id`)

// ErrorGroupCounts runs errorGroupCountsSQL.
func (t *Tx) ErrorGroupCounts(ctx context.Context) (map[int64][2]int64, error) {
	rows, err := t.Query(ctx, errorGroupCountsSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64][2]int64{}
	for rows.Next() {
		var q, open, regressed int64
		if err := rows.Scan(&q, &open, &regressed); err != nil {
			return nil, err
		}
		if open > 0 {
			out[q] = [2]int64{open, regressed}
		}
	}
	return out, rows.Err()
}

// LoseOutcomesSQL counts into their error groups' lost the pending
// outcomes of the copies of a JSON array of seqs (?1), before they are
// deleted (their records swept): they will never settle.
const LoseOutcomesSQL = `UPDATE error_group_states SET lost = lost + x.n
	FROM (SELECT o.error_group, COUNT(*) AS n FROM replay_outcomes o
		WHERE o.copy_seq IN (SELECT value FROM json_each(?1)) AND o.outcome = 0 AND o.error_group > 0 GROUP BY o.error_group) x
	WHERE error_group_states.id = x.error_group`

// loseInErrorGroups adds counts (n a group id) to the groups' lost.
func (t *Tx) loseInErrorGroups(ctx context.Context, counts map[int64]int64) error {
	for id, n := range counts {
		if _, err := t.Exec(ctx, `UPDATE error_group_states SET lost = lost + ? WHERE id = ?`, n, id); err != nil {
			return fmt.Errorf("error group lost: %w", err)
		}
	}
	return nil
}

// VersionsOfSQL reads the versions of the groups a JSON array of ids
// names, each group's by its key in error_group_versions.
var VersionsOfSQL = PGQuery(`SELECT s.id, v.version, v.filed, v.first_seen, v.last_seen
	FROM error_group_states s JOIN error_group_versions v ON v.queue_id = s.queue_id AND v.group_id = s.group_id AND v.fingerprint = s.fingerprint
	WHERE s.id IN (SELECT value FROM json_each(?1)) ORDER BY s.id, v.last_seen DESC, v.version`,
	`SELECT s.id, v.version, v.filed, v.first_seen, v.last_seen
	FROM error_group_states s JOIN error_group_versions v ON v.queue_id = s.queue_id AND v.group_id = s.group_id AND v.fingerprint = s.fingerprint
	WHERE s.id IN (SELECT value::bigint FROM json_array_elements_text(?1::json) AS value) ORDER BY s.id, v.last_seen DESC, v.version`)

// FillErrorGroupVersions runs VersionsOfSQL over gs's ids.
func (t *Tx) FillErrorGroupVersions(ctx context.Context, gs []broker.OwnedErrorGroup) error {
	if len(gs) == 0 {
		return nil
	}
	ids := make([]int64, len(gs))
	at := make(map[int64]int, len(gs))
	for i, g := range gs {
		ids[i], at[g.ID] = g.ID, i
		gs[i].Versions = nil
	}
	rows, err := t.Query(ctx, VersionsOfSQL, IntsJSON(ids))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, first, last int64
		var v broker.ErrorGroupVersion
		if err := rows.Scan(&id, &v.Version, &v.Filed, &first, &last); err != nil {
			return err
		}
		v.FirstSeen, v.LastSeen = FromMS(first), FromMS(last)
		if i, ok := at[id]; ok {
			gs[i].Versions = append(gs[i].Versions, v)
		}
	}
	return rows.Err()
}
