package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lazarus-dlq/lazarus/broker"
)

// channel is the channel of PostgreSQL's LISTEN/NOTIFY that carries the
// broker's news (broker.Notifier) between the processes of one database;
// joinChannel the one on which a process that joins the database tells
// the others (members.go), its mark (notifier.self) the payload.
const (
	channel     = "lazarus"
	joinChannel = "lazarus_join"
)

// notifier is the broker.Notifier of the PostgreSQL store: news is
// told to this process's waiters at once, and to the other processes by
// pg_notify, sent after the commit that made it (the broker calls Notify
// only then) and coalesced: the keys that gather while one is being sent
// go together in the next statement. One connection per process listens
// and tells this process's waiters what the others sent. When that
// connection breaks, news may have been lost meanwhile: once listening
// again, every waiter is woken to look again.
//
// A process that no other process listens to sends nothing: each
// pg_notify is a transaction of its own that commits (a log flush at
// FULL) and, with nobody else listening, comes back to this process's
// own listening connection only to be dropped (P1 and P5 in
// docs/performance.md: about a sixth of a message's CPU, the process's
// and the server's). Each listening connection holds listenLock shared,
// and the processes' count (members.go) counts its holders too: news is
// held while the last count found no other process and no listener but
// this process's (others), and the keys held stay pending, to be sent as
// soon as another listens (a count finds it, or it tells that it
// joined): never dropped.
type notifier struct {
	local broker.LocalNotifier
	pool  *pgxpool.Pool
	log   *slog.Logger
	self  string // this process's mark on what it sends: its own news comes back, and is not told twice
	// joined is called when another process tells that it joined the
	// database (joinChannel).
	joined func()
	// others says whether another process may be listening: false once
	// a count found no listener but this process's (heard), true again
	// when one may be (a count that finds another or fails, a process
	// that tells that it joined). News waits while it is false.
	others atomic.Bool
	// listening is set while this process's listening connection holds
	// listenLock.
	listening atomic.Bool
	// sent and unsent count the statements sent and the rounds of news
	// held (nobody else listening), for tests.
	sent, unsent atomic.Int64

	mu      sync.Mutex
	pending map[string]struct{}
	kick    chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func newNotifier(pool *pgxpool.Pool, log *slog.Logger, joined func()) *notifier {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	ctx, cancel := context.WithCancel(context.Background())
	n := &notifier{pool: pool, log: log, self: hex.EncodeToString(b), joined: joined, pending: map[string]struct{}{}, kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
	n.others.Store(true) // until counted
	listening := make(chan struct{})
	n.done.Go(func() { n.listen(listening) })
	n.done.Go(n.send)
	// The first LISTEN is in place before the store is handed out, so
	// that no news sent after Open returns is missed (a later break is
	// healed by waking every waiter).
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
	}
	return n
}

// Watch returns a channel closed at the next news of key, from this
// process or another.
func (n *notifier) Watch(key string) <-chan struct{} { return n.local.Watch(key) }

// Notify wakes this process's watchers of keys at once, and the other
// processes' soon.
func (n *notifier) Notify(keys ...string) {
	n.local.Notify(keys...)
	n.mu.Lock()
	for _, k := range keys {
		n.pending[k] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// send sends the pending keys, all in one statement, until closed.
func (n *notifier) send() {
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.kick:
		}
		if !n.others.Load() {
			// Nobody else listens: the keys stay pending (setOthers
			// sends them once someone may).
			n.unsent.Add(1)
			continue
		}
		n.mu.Lock()
		keys := make([]string, 0, len(n.pending))
		for k := range n.pending {
			// Escaped: a key may hold bytes a payload cannot (the
			// broker's job news starts with a NUL).
			keys = append(keys, n.self+":"+url.QueryEscape(k))
		}
		clear(n.pending)
		n.mu.Unlock()
		if len(keys) == 0 {
			continue
		}
		n.sent.Add(1)
		if _, err := n.pool.Exec(n.ctx, `SELECT pg_notify($1, k) FROM unnest($2::text[]) k`, channel, keys); err != nil && n.ctx.Err() == nil {
			// Once more a second later (news is only a wake-up: sent
			// twice or late, it costs a look); meanwhile the others'
			// waiters look again when their own timers end.
			n.log.Warn("send news to the other processes; trying again", "err", err)
			n.mu.Lock()
			for _, k := range keys {
				if _, esc, ok := strings.Cut(k, ":"); ok {
					if key, err := url.QueryUnescape(esc); err == nil {
						n.pending[key] = struct{}{}
					}
				}
			}
			n.mu.Unlock()
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(time.Second):
			}
			select {
			case n.kick <- struct{}{}:
			default:
			}
		}
	}
}

// setOthers records whether another process may be listening; news
// held while none did is sent once one may.
func (n *notifier) setOthers(v bool) {
	if n.others.Swap(v) || !v {
		return
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// heard records a count of the processes (members) and of the
// connections holding listenLock, taken between two reads of this
// process's own listening (before, after). Another process may listen
// when there is another member (whatever it holds: one of a version
// before listenLock listens without it), or a listener but this
// process's own, held all along (a count that may have missed this
// process's, or found it while it went, is taken for another's).
func (n *notifier) heard(members, listeners int64, before, after bool) {
	mine := before && after
	n.setOthers(members > 1 || !(listeners == 0 || listeners == 1 && mine))
}

// listenLock is the key of the lock each process's listening connection
// holds shared while it listens: the processes' count counts its holders
// (heard).
const listenLock = 0x4c617a61_72757306 // "Lazarus" 6

// listenCheck is how long the listening connection waits for news before
// it checks that the server still answers: a connection cut without a
// word (a half-open TCP connection) would otherwise leave this process
// deaf until the operating system's keepalive gave up.
const listenCheck = 15 * time.Second

// listen tells this process's waiters the news of the others, listening
// again (and waking every waiter: news may have been lost meanwhile) when
// its connection breaks or stops answering.
func (n *notifier) listen(listening chan struct{}) {
	first := true
	for n.ctx.Err() == nil {
		err := n.listenOnce(func() {
			if first {
				close(listening)
				first = false
			}
		})
		if n.ctx.Err() != nil {
			return
		}
		n.log.Warn("listen for the other processes' news; trying again", "err", err)
		select {
		case <-n.ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// listenOnce takes a connection of its own (out of the pool for good),
// LISTENs on it and hands the news on (deliver) until the connection
// breaks or stops answering; it returns why it stopped. Once listening,
// it wakes every waiter, then calls listening: news sent before this
// LISTEN (while the connection was down, or before Open's wait for the
// first one gave up) is not delivered; and Open is let go only after,
// so that no waiter it hands out is woken by the first (a watcher of no
// news woken: a flaky test).
func (n *notifier) listenOnce(listening func()) error {
	conn, err := n.pool.Acquire(n.ctx)
	if err != nil {
		return err
	}
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	for _, ch := range []string{joinChannel, channel} {
		if _, err := pc.Exec(n.ctx, "LISTEN "+ch); err != nil {
			return err
		}
	}
	// Counted as a listener from here (heard) to the connection's end.
	if _, err := pc.Exec(n.ctx, `SELECT pg_advisory_lock_shared($1)`, int64(listenLock)); err != nil {
		return err
	}
	n.listening.Store(true)
	defer n.listening.Store(false)
	n.local.NotifyAll()
	listening()
	return n.deliver(pc)
}

// deliver wakes this process's waiters of the key of each notification
// another process sends on pc, and tells joined of each process that
// joins, until pc fails: one quiet for listenCheck is pinged, and has
// failed when it does not answer (a half-open connection).
func (n *notifier) deliver(pc *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(n.ctx, listenCheck)
		note, err := pc.WaitForNotification(wctx)
		cancel()
		if err != nil && n.ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			pctx, cancel := context.WithTimeout(n.ctx, listenCheck)
			err = pc.Ping(pctx)
			cancel()
			if err == nil {
				continue // quiet, and alive
			}
		}
		if err != nil {
			return err
		}
		if note.Channel == joinChannel {
			if note.Payload != n.self {
				n.setOthers(true) // it listens already: it listened before it joined
				if n.joined != nil {
					n.joined()
				}
			}
			continue
		}
		from, esc, ok := strings.Cut(note.Payload, ":")
		if key, err := url.QueryUnescape(esc); ok && err == nil && from != n.self {
			n.local.Notify(key)
		}
	}
}

func (n *notifier) close() {
	n.cancel()
	n.done.Wait()
}
