package sqlcore

import (
	"context"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The login limiter's counts (broker.LoginTx, migration 0028): one row a
// key, by its primary key, and an index of seqs, which grow with each
// count (one writer draws them) and order the rows from the least
// recently counted for the bound and the sweep. The same texts run on
// both stores.

// saveLoginFailureSQL writes a key's count with a seq above every
// other: the highest seq by the index, plus one.
const saveLoginFailureSQL = `INSERT INTO login_failures (key, n, last_at, seq)
VALUES (?1, ?2, ?3, (SELECT COALESCE(MAX(seq), 0) + 1 FROM login_failures))
ON CONFLICT (key) DO UPDATE SET n = excluded.n, last_at = excluded.last_at, seq = excluded.seq`

// trimLoginFailuresSQL deletes the rows whose seq is keep or more below
// the highest: a range of the seqs' index from its start, empty but
// under a flood.
const trimLoginFailuresSQL = `DELETE FROM login_failures WHERE seq <= (SELECT MAX(seq) FROM login_failures) - ?1`

// sweepLoginFailuresSQL takes the limit rows of the lowest seqs (seqs
// grow with time: no index on last_at) and deletes those of them counted
// before the cut.
const sweepLoginFailuresSQL = `DELETE FROM login_failures WHERE key IN (SELECT key FROM (SELECT key, last_at FROM login_failures ORDER BY seq LIMIT ?2) x WHERE last_at < ?1)`

// LoginFailure reads login_failures by the primary key.
func (t *Tx) LoginFailure(ctx context.Context, key string) (broker.LoginFailure, error) {
	f := broker.LoginFailure{Key: key}
	var last int64
	err := t.QueryRow(ctx, `SELECT n, last_at FROM login_failures WHERE key = ?`, key).Scan(&f.N, &last)
	f.Last = FromMS(last)
	return f, notFound(err, "login failure")
}

// SaveLoginFailure upserts login_failures by the primary key, reading
// the highest seq by its index.
func (t *Tx) SaveLoginFailure(ctx context.Context, f broker.LoginFailure) error {
	_, err := t.Exec(ctx, saveLoginFailureSQL, f.Key, f.N, MS(f.Last))
	return err
}

// WithdrawLoginFailure deletes the key's row when it holds one failure
// or fewer, else lowers its count and, when its last count is still the
// attempt's, puts back the time of the one before, by the primary key.
func (t *Tx) WithdrawLoginFailure(ctx context.Context, key string, at, prev time.Time) error {
	if _, err := t.Exec(ctx, `DELETE FROM login_failures WHERE key = ? AND n <= 1`, key); err != nil {
		return err
	}
	_, err := t.Exec(ctx, `UPDATE login_failures SET n = n - 1, last_at = CASE WHEN last_at = ?1 THEN ?2 ELSE last_at END WHERE key = ?3`, MS(at), MS(prev), key)
	return err
}

// DeleteLoginFailure deletes login_failures by the primary key.
func (t *Tx) DeleteLoginFailure(ctx context.Context, key string) error {
	_, err := t.Exec(ctx, `DELETE FROM login_failures WHERE key = ?`, key)
	return err
}

// TrimLoginFailures deletes the rows counted before the last keep
// counts, by the seqs' index, and returns how many.
func (t *Tx) TrimLoginFailures(ctx context.Context, keep int) (int64, error) {
	res, err := t.Exec(ctx, trimLoginFailuresSQL, keep)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// SweepLoginFailures deletes the rows counted before before among the
// limit of the lowest seqs, and returns how many.
func (t *Tx) SweepLoginFailures(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := t.Exec(ctx, sweepLoginFailuresSQL, MS(before), limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
