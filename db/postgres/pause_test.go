package postgres

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// A process paused (SIGSTOP, as a VM paused) in the middle of a write
// holds the writer's lock, and its rows' locks, until its session ends:
// another process ends it (fence.go), and the writes of every other
// process wait about stuckAfter, not the minute they waited before. The paused process, once
// it runs again, finds its session gone: its write was rolled back and
// runs again on another connection, and its next writes work.
//
// The paused process is this test binary run again as a child
// (envPauseChild), writing in a loop on a store of its own: each write
// inserts a message of its own (child-N) and reads it back, two round
// trips holding the lock, and the child says "ok N" once it committed.
// The test stops the child (SIGSTOP) at a moment its backend holds the
// writer's lock, found in pg_locks, and tries again when the stop came
// between two writes.

// The child's settings: the database's URL, the partition it writes to,
// and whether its writes take the writer's lock shared (a push's) or
// exclusively (every other write's).
const (
	envPauseChild     = "LAZARUS_PG_PAUSE_CHILD"
	envPausePartition = "LAZARUS_PG_PAUSE_PARTITION"
	envPauseShared    = "LAZARUS_PG_PAUSE_SHARED"
	envPauseRead      = "LAZARUS_PG_PAUSE_READ"
)

// bigMessage is the transaction id of the message a reading child reads
// back in each write: larger than the socket's buffers, so that a child
// stopped while reading it leaves the server blocked sending it.
const bigMessage = "big"

// pausedWaitBound is the longest a write of a healthy process may wait
// for a paused one: stuckAfter and some slack for a loaded machine.
const pausedWaitBound = 10 * time.Second

// pauseChild is the child's main: it writes until its stdin closes, and
// says what each write did on stdout, as the store's warnings.
func pauseChild() int {
	ctx := context.Background()
	part, err := strconv.ParseInt(os.Getenv(envPausePartition), 10, 64)
	if err != nil {
		fmt.Println("child: partition:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := OpenWith(ctx, os.Getenv(envPauseChild), Options{Sync: SyncNormal, NeverAlone: true, Logger: log})
	if err != nil {
		fmt.Println("child: open:", err)
		return 2
	}
	defer d.Close()
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	o := broker.UpdateOptions{Concurrent: os.Getenv(envPauseShared) != ""}
	for i := 1; ; i++ {
		select {
		case <-stop:
			return 0
		default:
		}
		txid := fmt.Sprintf("child-%d", i)
		err := d.Update(ctx, o, func(tx broker.Tx) error {
			m := &broker.Message{PartitionID: part, TransactionID: txid, Payload: []byte(`{}`), CreatedAt: time.Now()}
			ins, err := tx.InsertMessages(ctx, []*broker.Message{m})
			if err != nil {
				return err
			}
			if len(ins) != 1 || !ins[0] {
				// Made already: by a run of this write that was said
				// not to have committed.
				return fmt.Errorf("message %s made twice", txid)
			}
			read := txid
			if os.Getenv(envPauseRead) != "" {
				read = bigMessage
			}
			_, err = tx.MessageByTransaction(ctx, part, read)
			return err
		})
		if err != nil {
			fmt.Printf("err %d %v\n", i, err)
			continue
		}
		fmt.Printf("ok %d\n", i)
	}
}

// pauseChildProcess is a running child and what it said.
type pauseChildProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu    sync.Mutex
	lines []string
	ended chan struct{} // its stdout closed
}

// startPauseChild starts the child on dsn, writing to partition part.
func startPauseChild(t *testing.T, dsn string, part int64, shared, read bool) *pauseChildProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPauseChild+"="+dsn, envPausePartition+"="+strconv.FormatInt(part, 10))
	if shared {
		cmd.Env = append(cmd.Env, envPauseShared+"=1")
	}
	if read {
		cmd.Env = append(cmd.Env, envPauseRead+"=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &pauseChildProcess{cmd: cmd, stdin: in, ended: make(chan struct{})}
	// Whatever the test does, the child does not outlive it, nor stay stopped.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-c.ended
		_ = cmd.Wait()
	})
	go func() {
		defer close(c.ended)
		s := bufio.NewScanner(out)
		for s.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, s.Text())
			c.mu.Unlock()
		}
	}()
	return c
}

// said is what the child said so far.
func (c *pauseChildProcess) said() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// waitSaid polls what the child said until cond holds of it, for at
// most 30 s.
func (c *pauseChildProcess) waitSaid(t *testing.T, what string, cond func([]string) bool) []string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		lines := c.said()
		if cond(lines) {
			return lines
		}
		select {
		case <-c.ended:
			t.Fatalf("the child ended before %s; it said:\n%s", what, strings.Join(lines, "\n"))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child did not come to %s; it said:\n%s", what, strings.Join(last(lines, 20), "\n"))
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

func last(lines []string, n int) []string { return lines[max(len(lines)-n, 0):] }

// oks counts the child's "ok" lines in lines.
func oks(lines []string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "ok ") {
			n++
		}
	}
	return n
}

// writerLockHolder is the backend holding the writer's lock in mode
// (pg_locks' ExclusiveLock or ShareLock), and its state (with its
// wait_event when it waits: "active ClientWrite"); pid 0 when none does.
func writerLockHolder(t *testing.T, d *Store, mode string) (pid int, state string) {
	pid, state, _ = writerLockHolderSince(t, d, mode)
	return pid, state
}

// writerLockHolderSince is writerLockHolder with the moment the backend
// came to its state (pg_stat_activity's state_change).
func writerLockHolderSince(t *testing.T, d *Store, mode string) (pid int, state string, since time.Time) {
	t.Helper()
	// A bigint key is two oids: its high and low 32 bits.
	err := d.QueryRowUncatalogued(context.Background(), `SELECT l.pid, concat_ws(' ', a.state, a.wait_event), a.state_change FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.mode = ?
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid::bigint = ? AND l.objid::bigint = ? AND l.objsubid = 1
		LIMIT 1`, mode, int64(writerLock>>32), int64(writerLock&0xffffffff)).Scan(&pid, &state, &since)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", time.Time{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return pid, state, since
}

// advisoryWaited reports whether a backend of d's database waits for an
// advisory lock (the writer's) now.
func advisoryWaited(t *testing.T, d *Store) bool {
	t.Helper()
	var n int
	err := d.QueryRowUncatalogued(context.Background(), `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()
		AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// stopHolding stops the child (SIGSTOP) at a moment its backend holds
// the writer's lock in mode, and returns that backend's pid once it
// is in state, waiting for the stopped child: "idle in transaction"
// (stopped between two statements), or "active ClientWrite" (stopped
// while the server sends it rows, blocked once the socket's buffers are
// full). A stop that came between two of the child's writes, or at
// another moment of one, is undone (SIGCONT) and tried again.
func stopHolding(t *testing.T, d *Store, c *pauseChildProcess, mode, state string) (int, time.Time) {
	t.Helper()
	// Three minutes: under the whole suite's load (-race, two cores) one
	// minute of tries once missed every moment (the moments are short).
	tries := 0
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		// Stopped while reading, it must be stopped once the server
		// sends faster than it reads: when its backend waits to send.
		if pid, now := writerLockHolder(t, d, mode); pid == 0 || state == "active ClientWrite" && now != state {
			continue // polling a condition: the child writes without pause
		}
		if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		tries++
		if pid, since, ok := heldStopped(t, d, mode, state); ok {
			return pid, since
		}
		if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("the child was never stopped holding the writer's lock (%s) %s, in %d stops", mode, state, tries)
	return 0, time.Time{}
}

// inState reports whether a backend's state and wait event (now, as
// writerLockHolder gives them) is state. Idle in its transaction, a
// backend waits for its client's next statement: "idle in transaction
// ClientRead" (with no wait event only for a moment).
func inState(now, state string) bool {
	return now == state || state == "idle in transaction" && now == state+" ClientRead"
}

// heldStopped watches the writer's lock once the child is stopped: it
// reports the backend holding it in mode, and since when, once that
// backend has stood in state, holding the lock, for a second unchanged.
// Stopped, the child sends nothing more; but what it sent before (a
// pipeline's later statements, a COMMIT pipelined behind its last one)
// may still reach a server short of CPU, so the backend's state may move
// on after the stop: the second starts again at each change, and a
// backend that lets the lock go (that COMMIT), or comes to another
// state to stay, was stopped at another moment (false).
func heldStopped(t *testing.T, d *Store, mode, state string) (int, time.Time, bool) {
	t.Helper()
	var pid int
	var since, steady time.Time
	for settle := time.Now().Add(10 * time.Second); time.Now().Before(settle); time.Sleep(10 * time.Millisecond) { // polling a condition
		p, now, s := writerLockHolderSince(t, d, mode)
		switch {
		case p == 0:
			t.Logf("the lock went after the stop (its COMMIT had been sent): once more")
			return 0, time.Time{}, false
		case !inState(now, state):
			pid, steady = 0, time.Time{} // running what it sent, or stopped at another moment
		case p != pid || !s.Equal(since):
			pid, since, steady = p, s, time.Now()
		case time.Since(steady) >= time.Second:
			var query string
			_ = d.QueryRowUncatalogued(context.Background(), `SELECT query FROM pg_stat_activity WHERE pid = ?`, pid).Scan(&query)
			t.Logf("stopped holding the lock: backend %d, %s since %s, its last statement %q", pid, now, since, query)
			return pid, since, true
		}
	}
	t.Logf("no backend stood %s holding the lock for a second after the stop: once more", state)
	return 0, time.Time{}, false
}

func TestPGAPausedProcessHoldsUpTheOthersWritesOnlyBriefly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shared bool
		mode   string
		state  string
	}{
		// Paused in a write that runs alone (a job's chunk, a dead letter
		// filed, maintenance), between two statements: another process
		// ends its session (fence.go).
		{"Exclusive", false, "ExclusiveLock", "idle in transaction"},
		// Paused in a push: an exclusive write waits for it, and every
		// later write, pushes too, queues behind that one.
		{"Shared", true, "ShareLock", "idle in transaction"},
		// Paused while reading a write's rows (a pop's messages, a replay
		// chunk's payloads): the same.
		{"Reading", false, "ExclusiveLock", "active ClientWrite"},
	} {
		t.Run(tc.name, func(t *testing.T) { pausedWriter(t, tc.shared, tc.mode, tc.state) })
	}
}

func pausedWriter(t *testing.T, shared bool, mode, state string) {
	ctx := context.Background()
	a, _, _, p1, p2, _ := concurrentSetup(t, Options{Sync: SyncNormal})
	read := state == "active ClientWrite"
	if read {
		err := a.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			_, err := tx.InsertMessages(ctx, []*broker.Message{{PartitionID: p1, TransactionID: bigMessage, Payload: make([]byte, 8<<20), CreatedAt: time.Now()}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	c := startPauseChild(t, a.Path(), p1, shared, read)
	c.waitSaid(t, "its first writes", func(l []string) bool { return oks(l) >= 3 })

	pid, since := stopHolding(t, a, c, mode, state)
	stoppedAt := time.Now()
	before := oks(c.said())

	// Two writes of this process, as a worker's would be: one that runs
	// alone, then a push beside the others' (on another partition than
	// the child's: only the writer's lock is in its way). Each gives up
	// past twice the bound, so that the old setting fails rather than
	// waits its minute.
	type outcome struct {
		took time.Duration
		end  time.Time
		err  error
	}
	write := func(o broker.UpdateOptions, txid string) <-chan outcome {
		done := make(chan outcome, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 2*pausedWaitBound)
			defer cancel()
			start := time.Now()
			err := a.Update(wctx, o, func(tx broker.Tx) error {
				m := &broker.Message{PartitionID: p2, TransactionID: txid, Payload: []byte(`{}`), CreatedAt: time.Now()}
				_, err := tx.InsertMessages(wctx, []*broker.Message{m})
				return err
			})
			done <- outcome{time.Since(start), time.Now(), err}
		}()
		return done
	}
	alone := write(broker.UpdateOptions{}, "parent-alone")
	// The push once the write that runs alone waits (or, on a machine
	// too slow to see it wait, has ended).
	var aloneDone *outcome
	for deadline := time.Now().Add(20 * time.Second); aloneDone == nil && !advisoryWaited(t, a); {
		select {
		case r := <-alone:
			aloneDone = &r
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the write that runs alone neither waited for the writer's lock nor ended")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	push := write(broker.UpdateOptions{Concurrent: true}, "parent-push")
	for _, w := range []struct {
		name string
		ch   <-chan outcome
	}{{"a write that runs alone", alone}, {"a push", push}} {
		name := w.name
		var r outcome
		if w.ch == alone && aloneDone != nil {
			r = *aloneDone
		} else {
			r = <-w.ch
		}
		if r.err != nil || r.took > pausedWaitBound {
			t.Errorf("%s of a healthy process, while another was paused holding the writer's lock (%s): took %s, %v; want done within %s",
				name, mode, r.took.Round(time.Millisecond), r.err, pausedWaitBound)
		}
		t.Logf("%s waited %s (%s held by the paused process, %s)", name, r.took.Round(time.Millisecond), mode, state)
		if w.ch == alone {
			// Measured from the server's clock, the machine's.
			t.Logf("the paused process held the lock %s from the moment it stood %s", r.end.Sub(since).Round(time.Millisecond), state)
		}
	}
	// The paused process's session ended (that is what freed the lock).
	var gone bool
	if err := a.QueryRowUncatalogued(ctx, `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = ?)`, pid).Scan(&gone); err != nil {
		t.Fatal(err)
	}
	if !gone {
		t.Errorf("the paused process's backend %d still runs", pid)
	}
	if n := oks(c.said()); n != before {
		t.Fatalf("the stopped child said %d writes more", n-before)
	}

	// Awake, its write finds its session gone, runs again, and its next
	// writes work.
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("the child was stopped for %s", time.Since(stoppedAt).Round(time.Millisecond))
	c.waitSaid(t, "writes after its pause", func(l []string) bool { return oks(l) >= before+3 })
	if err := c.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	<-c.ended
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("the child: %v", err)
	}
	lines := c.said()
	lost := false
	ok := map[string]bool{}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "ok "):
			ok["child-"+strings.TrimPrefix(l, "ok ")] = true
		case strings.Contains(l, "level=WARN") && strings.Contains(l, "session ended before its commit"):
			lost = true
		case strings.HasPrefix(l, "err ") && strings.Contains(l, "unavailable: "+errSessionLost.Error()):
			// Starved of CPU once more after its pause (a loaded
			// machine), its write lost its session each time it ran:
			// a 503, rolled back (below), and the next writes work.
		default:
			t.Errorf("the child said: %s", l)
		}
	}
	if !lost {
		t.Errorf("the child's write held across the pause did not find its session gone; it said:\n%s", strings.Join(last(lines, 20), "\n"))
	}
	// Every write the child said committed is there, once (the partition's
	// transaction ids are unique), and nothing of any other.
	rows, err := a.WriteDB().QueryContext(ctx, `SELECT transaction_id FROM messages WHERE partition_id = $1 AND transaction_id LIKE 'child-%'`, p1)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	found := 0
	for rows.Next() {
		var txid string
		if err := rows.Scan(&txid); err != nil {
			t.Fatal(err)
		}
		if !ok[txid] {
			t.Errorf("message %s is there, but its write was not said to have committed", txid)
		}
		found++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if found != len(ok) {
		t.Errorf("%d of the child's messages are there, %d writes committed", found, len(ok))
	}
}

// A write that stands idle in its transaction longer than stuckAfter
// while nobody waits for its locks keeps its session and commits, run
// once: the server's time receiving a statement counts as idle (a large
// push sent slowly, by a process starved of CPU, under -race at load 30,
// lost its session at every try when the server's own limit was 5 s),
// and a write that holds up nobody is no one's to end. The other
// process's fence looks at it all along (concurrentSetup: never alone).
func TestPGAWriteIdleWhileNobodyWaitsKeepsItsSession(t *testing.T) {
	ctx := context.Background()
	a, b, _, p1, _, _ := concurrentSetup(t, Options{Sync: SyncNormal})
	runs := 0
	err := a.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		runs++
		m := &broker.Message{PartitionID: p1, TransactionID: "slow-write", Payload: []byte(`{}`), CreatedAt: time.Now()}
		if _, err := tx.InsertMessages(ctx, []*broker.Message{m}); err != nil {
			return err
		}
		// Idle in its transaction, holding the writer's lock, until the
		// server has seen it so past stuckAfter and two more of the
		// fence's looks.
		pid, _, since := writerLockHolderSince(t, b, "ExclusiveLock")
		if pid == 0 {
			return errors.New("the write holds no writer's lock")
		}
		for deadline := time.Now().Add(time.Minute); ; {
			var idle float64
			var state string
			if err := b.QueryRowUncatalogued(ctx, `SELECT COALESCE(state, ''), EXTRACT(EPOCH FROM now() - state_change) FROM pg_stat_activity WHERE pid = ?`, pid).Scan(&state, &idle); err != nil {
				return err
			}
			if state != "idle in transaction" {
				return fmt.Errorf("the write's backend is %q, want idle in transaction (since %s)", state, since)
			}
			if time.Duration(idle*float64(time.Second)) > stuckAfter+2*memberEvery {
				break
			}
			if time.Now().After(deadline) {
				return errors.New("the write's backend never stood idle long enough")
			}
			time.Sleep(50 * time.Millisecond) // polling a condition
		}
		_, err := tx.MessageByTransaction(ctx, p1, "slow-write")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs != 1 {
		t.Errorf("the write ran %d times, want once: its session was ended though nobody waited for it", runs)
	}
}

// A write whose session the server ended while it stood idle (another
// process's fence, an administrator) learns it from the first answer of
// its COMMIT's round trip: a FATAL answer to a statement before the
// COMMIT means the COMMIT never ran, so the write was rolled back and
// runs again on another connection, rather than being answered 503
// (the pause test's child once said so when its pause ended before the
// fence's kill was read).
func TestPGAWriteWhoseSessionEndedBeforeItsCommitRunsAgain(t *testing.T) {
	ctx := context.Background()
	// Over TCP (a relay), where a write to a connection whose server
	// has gone succeeds and the server's last words are read after it;
	// over a Unix socket the write fails at once (broken pipe), which
	// was always a session lost.
	relay := pgtest.CutCommits(t, pgtest.Database(t, "db", Prepare))
	a, err := OpenWith(ctx, relay.URL, Options{Sync: SyncNormal, FoldEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	br := broker.New(broker.Config{Store: a})
	t.Cleanup(br.Close)
	// A first push makes the partition and folds the counts, so that the
	// next write's tail goes with its COMMIT.
	if _, err := br.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p1", TransactionID: "first", Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	var p1 int64
	if err := a.QueryRowUncatalogued(ctx, `SELECT id FROM partitions WHERE name = 'p1'`).Scan(&p1); err != nil {
		t.Fatal(err)
	}
	runs := 0
	err = a.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		runs++
		if _, err := tx.InsertMessages(ctx, []*broker.Message{{PartitionID: p1, TransactionID: "ended", Payload: []byte(`{}`), CreatedAt: time.Now()}}); err != nil {
			return err
		}
		if runs > 1 {
			return nil
		}
		st := tx.(*sqlcore.Tx)
		var pid int
		if err := st.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		var ended bool
		if err := a.QueryRowUncatalogued(ctx, `SELECT pg_terminate_backend(?, 10000)`, pid).Scan(&ended); err != nil || !ended {
			return fmt.Errorf("end the write's session %d: %v %v", pid, ended, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the write whose session ended: %v", err)
	}
	if runs != 2 {
		t.Errorf("the write ran %d times, want 2", runs)
	}
	var n int
	if err := a.QueryRowUncatalogued(ctx, `SELECT COUNT(*) FROM messages WHERE transaction_id = 'ended'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("messages of the write: %d (%v), want 1", n, err)
	}
}
