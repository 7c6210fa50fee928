package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// loginDelay is a delay of a second a failure, for the tests of the
// limiter's counts.
func loginDelay(n int) time.Duration { return time.Duration(n) * time.Second }

// loginHash is the key the store keeps the count of the limiter's key k
// under (broker.LoginFailure.Key).
func loginHash(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:])
}

// begin is BeginLogin at the test's clock; it fails the test on error.
func (s *bundle) begin(keys ...string) (wait, failWait time.Duration) {
	s.t.Helper()
	a := s.beginAttempt(keys...)
	return a.Wait, a.FailWait
}

// beginAttempt is BeginLogin at the test's clock, whole.
func (s *bundle) beginAttempt(keys ...string) broker.LoginAttempt {
	s.t.Helper()
	a, err := s.b.BeginLogin(s.ctx, s.clock.Now(), loginDelay, keys...)
	if err != nil {
		s.t.Fatalf("begin %v: %v", keys, err)
	}
	return a
}

// loginFailures reads the count of each of the limiter's keys (0: none).
func (s *bundle) loginFailures(keys ...string) []int {
	s.t.Helper()
	out := make([]int, len(keys))
	if err := s.db.View(s.ctx, func(tx broker.Tx) error {
		for i, k := range keys {
			f, err := tx.LoginFailure(s.ctx, loginHash(k))
			if err == nil {
				out[i] = f.N
			} else if !errors.Is(err, broker.ErrNotFound) {
				return err
			}
		}
		return nil
	}); err != nil {
		s.t.Fatal(err)
	}
	return out
}

// BeginLogin counts an attempt let in against every key, refuses one
// that comes too soon without counting it, and starts again from one
// past LoginForget; EndLogin takes a count back and forgets keys.
func testLoginCounts(t *testing.T, harness Harness) {
	s := setup(t, harness)
	if wait, failWait := s.begin("ip:a", "name:ann"); wait != 0 || failWait != time.Second {
		t.Fatalf("first attempt: wait %v, fail wait %v; want 0 and 1s", wait, failWait)
	}
	s.clock.Advance(400 * time.Millisecond)
	if wait, failWait := s.begin("ip:b", "name:ann"); wait != 600*time.Millisecond || failWait != 0 {
		t.Fatalf("too soon for ann: wait %v, fail wait %v; want 600ms and 0", wait, failWait)
	}
	if got := s.loginFailures("ip:a", "name:ann", "ip:b"); fmt.Sprint(got) != "[1 1 0]" {
		t.Fatalf("counts %v, want the refused attempt not counted", got)
	}
	s.clock.Advance(600 * time.Millisecond)
	if a := s.beginAttempt("ip:b", "name:ann"); a.Wait != 0 || a.FailWait != 2*time.Second {
		t.Fatalf("second attempt for ann: wait %v, fail wait %v; want 0 and 2s", a.Wait, a.FailWait)
	} else if err := s.b.EndLogin(s.ctx, a, []string{"ip:b"}, []string{"name:ann"}); err != nil {
		// It succeeded: ann's name forgets, b's address takes it back.
		t.Fatal(err)
	}
	if got := s.loginFailures("ip:a", "name:ann", "ip:b"); fmt.Sprint(got) != "[1 0 0]" {
		t.Fatalf("counts %v after the success", got)
	}
	s.clock.Advance(broker.LoginForget + time.Millisecond)
	if wait, failWait := s.begin("ip:a"); wait != 0 || failWait != time.Second {
		t.Fatalf("past LoginForget: wait %v, fail wait %v; want a fresh count", wait, failWait)
	}
}

// The maintenance sweeps the counts LoginForget has forgotten, in chunks,
// and keeps the others; the store keeps at most the last counts' keys.
func testMaintainLoginFailures(t *testing.T, harness Harness) {
	s := setup(t, harness)
	const old = 700
	if err := s.db.Update(s.ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		for i := range old {
			f := broker.LoginFailure{Key: loginHash(fmt.Sprint("name:old-", i)), N: 1, Last: s.clock.Now().Add(-broker.LoginForget - time.Minute)}
			if err := tx.SaveLoginFailure(s.ctx, f); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.begin("ip:kept", "name:kept")
	rep, err := s.b.Maintain(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskLogins); r.Removed != old || r.Chunks != 2 {
		t.Errorf("logins task %+v, want %d removed in 2 chunks", r, old)
	}
	if got := s.loginFailures("ip:kept", "name:kept", "name:old-0"); fmt.Sprint(got) != "[1 1 0]" {
		t.Errorf("counts %v, want the kept keys only", got)
	}
	s.clock.Advance(broker.LoginForget)
	if rep, err := s.b.Maintain(s.ctx); err != nil || rep.Task(broker.TaskLogins).Removed != 0 {
		t.Errorf("at LoginForget: %+v %v, want the kept keys still kept", rep.Task(broker.TaskLogins), err)
	}
	s.clock.Advance(time.Millisecond)
	if rep, err := s.b.Maintain(s.ctx); err != nil || rep.Task(broker.TaskLogins).Removed != 2 {
		t.Errorf("past LoginForget: %+v %v, want the kept keys removed", rep.Task(broker.TaskLogins), err)
	}

	// The bound: the keys of the last keep counts stay, the others go,
	// the least recently counted first; a key counted again moves up.
	var trimmed int64
	if err := s.db.Update(s.ctx, broker.UpdateOptions{}, func(tx broker.Tx) (err error) {
		for _, k := range []string{"a", "b", "c", "d", "a", "e"} {
			if err := tx.SaveLoginFailure(s.ctx, broker.LoginFailure{Key: loginHash(k), N: 1, Last: s.clock.Now()}); err != nil {
				return err
			}
		}
		trimmed, err = tx.TrimLoginFailures(s.ctx, 3)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := s.loginFailures("a", "b", "c", "d", "e"); trimmed != 2 || fmt.Sprint(got) != "[1 0 0 1 1]" {
		t.Errorf("trimmed %d, counts %v; want b and c gone", trimmed, got)
	}
}

// LoginWait reads what BeginLogin would answer, without counting: the
// wait a key's failures earn, none for other keys, none once it is over.
func testLoginWaitLooksWithoutCounting(t *testing.T, harness Harness) {
	s := setup(t, harness)
	s.begin("ip:a", "name:ann") // one failure each: a second to wait
	wait := func(keys ...string) time.Duration {
		t.Helper()
		w, err := s.b.LoginWait(s.ctx, s.clock.Now(), loginDelay, keys...)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := wait("ip:a", "name:bob"); w != time.Second {
		t.Fatalf("the address's wait: %v, want 1s", w)
	}
	if w := wait("ip:b", "name:bob"); w != 0 {
		t.Fatalf("other keys' wait: %v, want none", w)
	}
	if got := s.loginFailures("ip:a", "name:ann", "name:bob"); got[0] != 1 || got[1] != 1 || got[2] != 0 {
		t.Fatalf("counts after the looks: %v, want 1 1 0 (a look counts nothing)", got)
	}
	s.clock.Advance(time.Second)
	if w := wait("ip:a", "name:ann"); w != 0 {
		t.Fatalf("the wait once over: %v", w)
	}
	if w, _ := s.begin("ip:a", "name:ann"); w != 0 {
		t.Fatalf("BeginLogin disagrees with LoginWait: %v", w)
	}
}

// An attempt that did not fail sets no wait: EndLogin takes back its
// time with its count, so a success after failures from an address lets
// the next attempt from it in at once, and that one's failure still
// counts the failures before the success.
func testLoginSuccessSetsNoWait(t *testing.T, harness Harness) {
	s := setup(t, harness)
	s.begin("ip:x", "name:a") // fails: 1 s
	s.clock.Advance(time.Second)
	s.begin("ip:x", "name:b") // fails: 2 s
	s.clock.Advance(2 * time.Second)
	for _, name := range []string{"name:c", "name:d", "name:e"} {
		a := s.beginAttempt("ip:x", name)
		if a.Wait != 0 {
			t.Fatalf("%s after the successes before it: wait %v, want 0", name, a.Wait)
		}
		if err := s.b.EndLogin(s.ctx, a, []string{"ip:x"}, []string{name}); err != nil {
			t.Fatal(err)
		}
	}
	if w, err := s.b.LoginWait(s.ctx, s.clock.Now(), loginDelay, "ip:x", "name:f"); err != nil || w != 0 {
		t.Fatalf("after the successes: wait %v (%v), want 0", w, err)
	}
	if got := s.loginFailures("ip:x"); got[0] != 2 {
		t.Fatalf("address count %v after the successes, want its 2 failures", got)
	}
	if wait, failWait := s.begin("ip:x", "name:f"); wait != 0 || failWait != 3*time.Second {
		t.Fatalf("next attempt: wait %v, fail wait %v; want 0 and 3s", wait, failWait)
	}
}
