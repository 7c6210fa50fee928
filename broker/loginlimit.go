package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// The login limiter's counts live in the store, so that every process of
// one database sees the same ones: with several processes behind a load
// balancer, an attacker would otherwise get a fresh count on each. The
// web keeps the rules of timing (how long n failures make an attempt
// wait) and the answers; the broker keeps the counts, per key (a client
// address, a user name: the web's), by a SHA-256 of the key, never the
// key itself (a user name typed is often a password typed into the wrong
// field).
const (
	// LoginForget is how long a key's failures are remembered after the
	// last one was counted: an attempt after that starts a fresh count,
	// and the maintenance (TaskLogins) removes the key's row.
	LoginForget = 15 * time.Minute
	// LoginMaxKeys bounds the keys the store keeps counts of, whatever
	// a flood of made-up names makes: those counted least recently go
	// first (LoginTx.TrimLoginFailures).
	LoginMaxKeys = 100_000
)

// LoginFailure is the count of one key of the login limiter.
type LoginFailure struct {
	Key  string    // the SHA-256 of the limiter's key, in hex (loginKeyHash)
	N    int       // failures in a row counted against it
	Last time.Time // when the last of them was counted
}

// LoginTx is the storage of the login limiter (table login_failures,
// migration 0028). Each method reads or writes login_failures only, by
// its primary key (the key) or its index of seqs, and locks nothing
// beyond its transaction (Tx): BeginLogin's look and count are one write
// transaction, so that of attempts made at the same time, on any process
// of the store, only the first is let in (a write not marked Concurrent:
// it runs alone on every store).
type LoginTx interface {
	// LoginFailure reads the count of key, by the primary key
	// (ErrNotFound when the key has none).
	LoginFailure(ctx context.Context, key string) (LoginFailure, error)
	// SaveLoginFailure writes f as the count of f.Key (inserted, or in
	// place of the one it had, in one statement),
	// with a seq above every other key's: the key becomes the one counted
	// last. It reads the highest seq by its index.
	SaveLoginFailure(ctx context.Context, f LoginFailure) error
	// WithdrawLoginFailure takes back the count an attempt made at at
	// against key: one failure fewer, removing the row when none is left,
	// and, when the last count is still that attempt's (last = at), the
	// time of the last count back to prev, the one before it, so that an
	// attempt that did not fail sets no wait. Its seq stays. A key with no
	// count: nothing, no error.
	WithdrawLoginFailure(ctx context.Context, key string, at, prev time.Time) error
	// DeleteLoginFailure forgets the count of key; none: no error.
	DeleteLoginFailure(ctx context.Context, key string) error
	// TrimLoginFailures deletes the keys counted before the last keep
	// counts (a seq at or below the highest minus keep, by the seqs'
	// index), so that at most keep rows stay and the least recently
	// counted go first; a key outlives at least keep counts made after
	// its own. It returns how many it deleted.
	TrimLoginFailures(ctx context.Context, keep int) (int64, error)
	// SweepLoginFailures deletes, among the limit keys counted least
	// recently (by seq: no index on the time, seqs grow with it), those
	// last counted before before, and returns how many (a key counted
	// while the clock was behind stays until those before it are gone).
	SweepLoginFailures(ctx context.Context, before time.Time, limit int) (int64, error)
}

// loginKeyHash is the key under which the store keeps the count of the
// limiter's key k.
func loginKeyHash(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:])
}

// LoginAttempt is what BeginLogin answers: whether the attempt must
// still wait, and, let in, what its failure earns and what EndLogin needs
// to take its count back.
type LoginAttempt struct {
	// Wait > 0 is how long the attempt must still wait: it was not let in,
	// and nothing was counted.
	Wait time.Duration
	// FailWait is the wait the attempt's failure earns (delay of the
	// highest count it made).
	FailWait time.Duration
	at       time.Time            // when it was counted
	prev     map[string]time.Time // by key hash: the time of its last count before this one
}

// BeginLogin lets a login attempt with the keys, made at now (the web's
// clock, kept to the millisecond), in or not, in one write transaction:
// Wait > 0 is how long it must still wait (the longest any
// key's count makes it: delay(n) after the last of n failures), and
// nothing is counted. An attempt let in is counted against every key at
// once, in the same transaction as the look, so that of attempts made at
// the same time, on this process or another of the store, only the first
// is let in; a key whose last failure is older than LoginForget starts
// again from one. FailWait is delay of the highest count it made: the
// wait the attempt's failure earns. The attempt must then end with
// EndLogin unless it failed.
func (b *Broker) BeginLogin(ctx context.Context, now time.Time, delay func(n int) time.Duration, keys ...string) (LoginAttempt, error) {
	now = now.UTC().Truncate(time.Millisecond)
	hashes := make([]string, len(keys))
	for i, k := range keys {
		hashes[i] = loginKeyHash(k)
	}
	var a LoginAttempt
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		a = LoginAttempt{at: now, prev: make(map[string]time.Time, len(hashes))}
		counts := make([]LoginFailure, len(hashes))
		for i, h := range hashes {
			f, err := tx.LoginFailure(ctx, h)
			switch {
			case isNotFound(err):
				f = LoginFailure{Key: h}
			case err != nil:
				return err
			default:
				a.Wait = max(a.Wait, f.waitAt(now, delay))
			}
			counts[i] = f
		}
		if a.Wait > 0 {
			return nil
		}
		for _, f := range counts {
			a.prev[f.Key] = f.Last
			if now.Sub(f.Last) > LoginForget {
				f.N = 0
			}
			f.N++
			f.Last = now
			if err := tx.SaveLoginFailure(ctx, f); err != nil {
				return err
			}
			a.FailWait = max(a.FailWait, delay(f.N))
		}
		_, err := tx.TrimLoginFailures(ctx, LoginMaxKeys)
		return err
	})
	if err != nil {
		return LoginAttempt{}, err
	}
	return a, nil
}

// waitAt is how long after now an attempt with f's key must still wait
// (0 or less: none), its count making the delay.
func (f LoginFailure) waitAt(now time.Time, delay func(n int) time.Duration) time.Duration {
	return f.Last.Add(delay(f.N)).Sub(now)
}

// LoginWait is how long an attempt with keys must still wait (0: none),
// as BeginLogin would find it, read in a snapshot (View): no write, so
// that a flood of attempts refused while they wait costs the store no
// write transaction (each would take a turn of the writes, on a store
// shared by several processes that of every process). BeginLogin looks again when it counts.
func (b *Broker) LoginWait(ctx context.Context, now time.Time, delay func(n int) time.Duration, keys ...string) (time.Duration, error) {
	now = now.UTC().Truncate(time.Millisecond)
	var wait time.Duration
	err := b.store.View(ctx, func(tx Tx) error {
		wait = 0
		for _, k := range keys {
			f, err := tx.LoginFailure(ctx, loginKeyHash(k))
			switch {
			case isNotFound(err):
			case err != nil:
				return err
			default:
				wait = max(wait, f.waitAt(now, delay))
			}
		}
		return nil
	})
	return wait, err
}

// EndLogin ends an attempt a of BeginLogin's that did not fail (it
// succeeded, or its password was never checked), in one write
// transaction: the count it made is taken back from the keys of
// withdraw, time included (their other failures stay, and so does the
// wait they set: a success sets none, so that one user's login does not
// delay the next of another from the same address), and the keys of
// forget lose every failure.
func (b *Broker) EndLogin(ctx context.Context, a LoginAttempt, withdraw, forget []string) error {
	return b.update(ctx, func(tx Tx, _ func(string)) error {
		for _, k := range withdraw {
			h := loginKeyHash(k)
			prev, ok := a.prev[h]
			if !ok {
				continue // not counted by a
			}
			if err := tx.WithdrawLoginFailure(ctx, h, a.at, prev); err != nil {
				return err
			}
		}
		for _, k := range forget {
			if err := tx.DeleteLoginFailure(ctx, loginKeyHash(k)); err != nil {
				return err
			}
		}
		return nil
	})
}

// maintainLogins deletes the login limiter's counts that LoginForget has
// forgotten.
func (b *Broker) maintainLogins(ctx context.Context, r *TaskReport) error {
	return b.chunks(ctx, r, func(tx Tx, _ MaintainTx, now time.Time) (int64, error) {
		return tx.SweepLoginFailures(ctx, now.Add(-LoginForget), maintainChunk)
	})
}
