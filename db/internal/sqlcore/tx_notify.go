package sqlcore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Notifications (broker.NotifyTx, migrations 0035 / pg 0012): channels
// and rules by their primary keys (few: the broker bounds them), the
// outbox by its partial index of pending rows per channel (the sender),
// by (channel_id, id) and the primary key (the delivery log), and by the
// settled rows' time (the retention). The same texts run on both stores.

const channelCols = `id, name, kind, url, smtp_host, smtp_port, smtp_user, from_addr, to_addrs, secret, created_at, created_by`

func scanChannel(r interface{ Scan(...any) error }) (broker.Channel, error) {
	var c broker.Channel
	var to string
	var at int64
	if err := r.Scan(&c.ID, &c.Name, &c.Kind, &c.URL, &c.SMTPHost, &c.SMTPPort, &c.SMTPUser, &c.From, &to, &c.Secret, &at, &c.CreatedBy); err != nil {
		return c, err
	}
	if to != "" {
		c.To = strings.Split(to, "\n")
	}
	c.CreatedAt = FromMS(at)
	return c, nil
}

// InsertNotifyChannel inserts a row of notify_channels.
func (t *Tx) InsertNotifyChannel(ctx context.Context, c *broker.Channel) error {
	_, id, err := t.Insert(ctx, "id", `INSERT INTO notify_channels (name, kind, url, smtp_host, smtp_port, smtp_user, from_addr, to_addrs, secret, created_at, created_by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.Name, c.Kind, c.URL, c.SMTPHost, c.SMTPPort, c.SMTPUser, c.From, strings.Join(c.To, "\n"), c.Secret, MS(c.CreatedAt), c.CreatedBy)
	if err != nil {
		return err
	}
	c.ID = id
	return nil
}

// NotifyChannels reads notify_channels whole, by id.
func (t *Tx) NotifyChannels(ctx context.Context) ([]broker.Channel, error) {
	rows, err := t.Query(ctx, `SELECT `+channelCols+` FROM notify_channels ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.Channel
	for rows.Next() {
		c, err := scanChannel(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// NotifyChannel reads one row of notify_channels by the primary key.
func (t *Tx) NotifyChannel(ctx context.Context, id int64) (broker.Channel, error) {
	c, err := scanChannel(t.QueryRow(ctx, `SELECT `+channelCols+` FROM notify_channels WHERE id = ?`, id))
	return c, notFound(err, fmt.Sprintf("channel %d", id))
}

// DeleteNotifyChannel deletes the channel's pending outbox rows (by the
// partial index), its rules (a scan of the few rules) and its row.
func (t *Tx) DeleteNotifyChannel(ctx context.Context, id int64) (rules, pending int64, err error) {
	res, err := t.Exec(ctx, `DELETE FROM notify_channels WHERE id = ?`, id)
	if err != nil {
		return 0, 0, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, 0, err
	} else if n == 0 {
		return 0, 0, fmt.Errorf("channel %d: %w", id, broker.ErrNotFound)
	}
	if res, err = t.Exec(ctx, `DELETE FROM notify_rules WHERE channel_id = ?`, id); err != nil {
		return 0, 0, err
	}
	if rules, err = res.RowsAffected(); err != nil {
		return 0, 0, err
	}
	if res, err = t.Exec(ctx, `DELETE FROM notify_outbox WHERE channel_id = ? AND state = 'pending'`, id); err != nil {
		return 0, 0, err
	}
	pending, err = res.RowsAffected()
	return rules, pending, err
}

// InsertNotifyRule inserts a row of notify_rules, its events joined by
// commas (names of events have none).
func (t *Tx) InsertNotifyRule(ctx context.Context, r *broker.Rule) error {
	_, id, err := t.Insert(ctx, "id", `INSERT INTO notify_rules (channel_id, events, queue_pattern, group_name, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?)`,
		r.ChannelID, strings.Join(r.Events, ","), r.Queue, r.Group, MS(r.CreatedAt), r.CreatedBy)
	if err != nil {
		return err
	}
	r.ID = id
	return nil
}

// NotifyRules reads notify_rules whole, by id.
func (t *Tx) NotifyRules(ctx context.Context) ([]broker.Rule, error) {
	rows, err := t.Query(ctx, `SELECT id, channel_id, events, queue_pattern, group_name, created_at, created_by FROM notify_rules ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.Rule
	for rows.Next() {
		var r broker.Rule
		var events string
		var at int64
		if err := rows.Scan(&r.ID, &r.ChannelID, &events, &r.Queue, &r.Group, &at, &r.CreatedBy); err != nil {
			return nil, err
		}
		r.Events, r.CreatedAt = strings.Split(events, ","), FromMS(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteNotifyRule deletes a row of notify_rules by the primary key.
func (t *Tx) DeleteNotifyRule(ctx context.Context, id int64) error {
	res, err := t.Exec(ctx, `DELETE FROM notify_rules WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("rule %d: %w", id, broker.ErrNotFound)
	}
	return nil
}

// InsertNotification inserts a pending row of notify_outbox, due at once.
func (t *Tx) InsertNotification(ctx context.Context, n *broker.Notification) error {
	test := 0
	if n.Test {
		test = 1
	}
	_, id, err := t.Insert(ctx, "id", `INSERT INTO notify_outbox (channel_id, event, queue, group_name, detail, path, at, test, next_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?7)`,
		n.ChannelID, n.Event, n.Queue, n.Group, n.Detail, n.Path, MS(n.At), test)
	if err != nil {
		return err
	}
	n.ID = id
	return nil
}

const deliveryCols = `id, channel_id, event, queue, group_name, detail, path, at, test, state, attempts, next_at, sent_at, last_error`

func scanDeliveries(rows Rows) ([]broker.NotifyDelivery, error) {
	defer rows.Close()
	var out []broker.NotifyDelivery
	for rows.Next() {
		var d broker.NotifyDelivery
		var at, next, sent, test int64
		if err := rows.Scan(&d.ID, &d.ChannelID, &d.Event, &d.Queue, &d.Group, &d.Detail, &d.Path, &at, &test, &d.State, &d.Attempts, &next, &sent, &d.LastError); err != nil {
			return nil, err
		}
		d.At, d.Test = FromMS(at), test == 1
		if d.State == broker.DeliveryPending {
			d.NextAt = FromMS(next)
		}
		if sent != 0 {
			d.SentAt = FromMS(sent)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// NotifyDeliveries reads notify_outbox newest first: by the primary key,
// or by (channel_id, id) for one channel.
func (t *Tx) NotifyDeliveries(ctx context.Context, q broker.DeliveryQuery) ([]broker.NotifyDelivery, error) {
	rows, err := t.Query(ctx, `SELECT `+deliveryCols+` FROM notify_outbox
		WHERE (?1 = 0 OR channel_id = ?1) AND (?2 = '' OR state = ?2) AND (?3 = 0 OR id < ?3)
		ORDER BY id DESC LIMIT ?4`, q.ChannelID, q.State, q.Before, q.Limit)
	if err != nil {
		return nil, err
	}
	return scanDeliveries(rows)
}

// DueNotifications numbers each channel's pending rows by id (the
// partial index, per channel, in its order) and keeps the first
// perChannel of the channels whose first is due.
func (t *Tx) DueNotifications(ctx context.Context, now time.Time, perChannel, limit int) ([]broker.NotifyDelivery, error) {
	rows, err := t.Query(ctx, `SELECT `+deliveryCols+` FROM (
		SELECT `+deliveryCols+`, ROW_NUMBER() OVER w AS n, FIRST_VALUE(next_at) OVER w AS first_next
		FROM notify_outbox WHERE state = 'pending' WINDOW w AS (PARTITION BY channel_id ORDER BY id)) p
		WHERE n <= ?2 AND first_next <= ?1 ORDER BY id LIMIT ?3`, MS(now), perChannel, limit)
	if err != nil {
		return nil, err
	}
	return scanDeliveries(rows)
}

// SaveNotifyDelivery updates a pending row of notify_outbox by the
// primary key.
func (t *Tx) SaveNotifyDelivery(ctx context.Context, d broker.NotifyDelivery) error {
	var next, sent int64
	if !d.NextAt.IsZero() {
		next = MS(d.NextAt)
	}
	if !d.SentAt.IsZero() {
		sent = MS(d.SentAt)
	}
	_, err := t.Exec(ctx, `UPDATE notify_outbox SET state = ?, attempts = ?, next_at = ?, sent_at = ?, last_error = ? WHERE id = ? AND state = 'pending'`,
		d.State, d.Attempts, next, sent, d.LastError, d.ID)
	return err
}

// SweepNotifications deletes settled rows of notify_outbox by their
// partial index of times.
func (t *Tx) SweepNotifications(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := t.Exec(ctx, `DELETE FROM notify_outbox WHERE id IN (SELECT id FROM notify_outbox WHERE state <> 'pending' AND at < ? ORDER BY at LIMIT ?)`, MS(before), limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ThresholdStates reads notify_thresholds whole.
func (t *Tx) ThresholdStates(ctx context.Context) ([]broker.ThresholdState, error) {
	rows, err := t.Query(ctx, `SELECT queue, group_name, breached, detail, changed_at FROM notify_thresholds ORDER BY queue, group_name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.ThresholdState
	for rows.Next() {
		var s broker.ThresholdState
		var breached, at int64
		if err := rows.Scan(&s.Queue, &s.Group, &breached, &s.Detail, &at); err != nil {
			return nil, err
		}
		s.Breached, s.ChangedAt = breached == 1, FromMS(at)
		out = append(out, s)
	}
	return out, rows.Err()
}

// SaveThresholdState upserts a row of notify_thresholds by the primary
// key.
func (t *Tx) SaveThresholdState(ctx context.Context, s broker.ThresholdState) error {
	breached := 0
	if s.Breached {
		breached = 1
	}
	_, err := t.Exec(ctx, `INSERT INTO notify_thresholds (queue, group_name, breached, detail, changed_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (queue, group_name) DO UPDATE SET breached = excluded.breached, detail = excluded.detail, changed_at = excluded.changed_at`,
		s.Queue, s.Group, breached, s.Detail, MS(s.ChangedAt))
	return err
}

// DeleteThresholdState deletes a row of notify_thresholds by the
// primary key.
func (t *Tx) DeleteThresholdState(ctx context.Context, queue, group string) error {
	_, err := t.Exec(ctx, `DELETE FROM notify_thresholds WHERE queue = ? AND group_name = ?`, queue, group)
	return err
}
