package web_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// stream is a live page's event stream as a browser reads it: what it
// says arrives on lines, one an event ("changed") or a heartbeat
// ("heartbeat"), until it ends (closed).
type stream struct {
	t      *testing.T
	status int
	header http.Header
	lines  chan string
	closed chan struct{}
	cancel context.CancelFunc
}

// openStream opens path as b (its cookies), and reads it in the
// background; the stream is closed at the test's end.
func openStream(t *testing.T, b *browser, base, path string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := b.client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	st := &stream{t: t, status: res.StatusCode, header: res.Header, lines: make(chan string, 64), closed: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(st.closed)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "event: changed":
				st.lines <- "changed"
			case line == ": heartbeat":
				st.lines <- "heartbeat"
			}
		}
	}()
	t.Cleanup(st.close)
	return st
}

// close ends the stream as a browser leaving the page does.
func (st *stream) close() {
	st.cancel()
	<-st.closed
}

// next is the stream's next event or heartbeat; it fails the test when
// nothing comes within 10 s.
func (st *stream) next() string {
	st.t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case l := <-st.lines:
		return l
	case <-st.closed:
		select {
		case l := <-st.lines:
			return l
		default:
		}
		st.t.Fatal("the stream ended")
	case <-timer.C:
		st.t.Fatal("nothing on the stream for 10 s")
	}
	return ""
}

// wantChanged waits for the next event, past heartbeats.
func (st *stream) wantChanged() {
	st.t.Helper()
	for st.next() != "changed" {
	}
}

// The live pages' streams are for logged-in viewers, as the pages are;
// each page names its stream.
func TestLiveStreamIsAuthenticatedLikeThePages(t *testing.T) {
	t.Parallel()
	s := setupStill(t)
	fill(t, s, "q", 1)
	anon := s.browser()
	r := anon.do(http.MethodHead, "/live/queues/q", nil, nil)
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login") {
		t.Fatalf("no session: %d %q", r.status, r.header.Get("Location"))
	}
	forged := s.browser()
	forged.setCookie("lazarus_session", "MTczMzA5NjAwMHxmb3JnZWR8")
	if r := forged.do(http.MethodHead, "/live/overview", nil, nil); r.status != http.StatusSeeOther {
		t.Fatalf("forged session: %d", r.status)
	}

	viewer, _ := s.loggedIn(broker.RoleViewer)
	st := openStream(t, viewer, s.url, "/live/queues/q")
	if st.status != http.StatusOK || st.header.Get("Content-Type") != "text/event-stream" || st.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("stream: %d %v", st.status, st.header)
	}
	viewer.do(http.MethodHead, "/live/queues/absent", nil, nil).want(http.StatusNotFound)
	viewer.do(http.MethodHead, "/live/jobs/999999", nil, nil).want(http.StatusNotFound)

	list := viewer.get("/queues/q/dead-letters").want(http.StatusOK)
	if got, _ := list.doc().Find(`[data-live]`).Attr("sse-connect"); got != "/live/queues/q" {
		t.Fatalf("the list's stream is %q", got)
	}
	if trig, _ := list.doc().Find(`#dl`).Attr("hx-trigger"); !strings.Contains(trig, "sse:changed") {
		t.Fatalf("the list does not follow its stream: %q", trig)
	}
	over := viewer.get("/").want(http.StatusOK)
	if got, _ := over.doc().Find(`[data-live]`).Attr("sse-connect"); got != "/live/overview" {
		t.Fatalf("the overview's stream is %q", got)
	}
	id := startReplay(t, s, `{"filter":{"queue":"q"}}`)
	job := viewer.get(jobPath(id)).want(http.StatusOK)
	if got, _ := job.doc().Find(`[data-live]`).Attr("sse-connect"); got != "/live/jobs/"+strconv.FormatInt(id, 10) {
		t.Fatalf("the job page's stream is %q", got)
	}
}

// A queue's stream says "changed" when its dead letters change (one
// filed, one replayed), not at a push or ack that leaves them as they
// are; the overview's at any news of any queue; a job's as the job moves.
func TestLiveStreamSaysWhatChanged(t *testing.T) {
	t.Parallel()
	s := setupStill(t, func(c *web.Config) { c.LiveHeartbeat = 50 * time.Millisecond })
	s.configure("q", `{"retryLimit":0}`)
	viewer, _ := s.loggedIn(broker.RoleViewer)
	queue := openStream(t, viewer, s.url, "/live/queues/q")
	over := openStream(t, viewer, s.url, "/live/overview")
	if queue.status != http.StatusOK || over.status != http.StatusOK {
		t.Fatalf("streams: %d %d", queue.status, over.status)
	}
	for _, st := range []*stream{queue, over} {
		if got := st.next(); got != "heartbeat" {
			t.Fatalf("first on an idle stream: %q, want a heartbeat", got)
		}
	}

	// A push: news of q, which the overview shows; q's dead letters
	// are as they were.
	s.push("q", "", "t-1", `{"n":1}`)
	over.wantChanged()
	for range 3 {
		if got := queue.next(); got != "heartbeat" {
			t.Fatalf("after a push q's dead letters' stream said %q", got)
		}
	}

	// The message fails: a dead letter, which q's stream says.
	res, err := s.broker.Pop(s.ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("pop: %v %v", res, err)
	}
	m := res.Messages[0]
	if _, err := s.broker.AckBatch(s.ctx, "g", []broker.Ack{{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: m.LeaseID, Status: broker.AckFailed, Error: "bad"}}); err != nil {
		t.Fatal(err)
	}
	queue.wantChanged()

	// A job replays it: its page's stream says so.
	id := startReplay(t, s, `{"filter":{"queue":"q"}}`)
	job := openStream(t, viewer, s.url, "/live/jobs/"+strconv.FormatInt(id, 10))
	if job.status != http.StatusOK {
		t.Fatalf("job stream: %d", job.status)
	}
	if _, err := s.broker.RunJob(s.ctx, id); err != nil {
		t.Fatal(err)
	}
	job.wantChanged()
	queue.wantChanged() // replayed: gone from q's dead letters
}

// Streams are bounded per user and per process: one past a bound is
// answered 429 (the page then says it no longer updates itself), and a
// stream that ends makes room.
func TestLiveStreamsAreBounded(t *testing.T) {
	t.Parallel()
	s := setupStill(t, func(c *web.Config) { c.MaxLiveStreams, c.MaxLiveStreamsPerUser = 3, 2 })
	ann, _ := s.loggedIn(broker.RoleViewer)
	bob, _ := s.loggedIn(broker.RoleViewer)
	a1 := openStream(t, ann, s.url, "/live/overview")
	a2 := openStream(t, ann, s.url, "/live/overview")
	a3 := openStream(t, ann, s.url, "/live/overview")
	if a1.status != http.StatusOK || a2.status != http.StatusOK || a3.status != http.StatusTooManyRequests {
		t.Fatalf("ann's streams: %d %d %d, want 200 200 429", a1.status, a2.status, a3.status)
	}
	b1 := openStream(t, bob, s.url, "/live/overview")
	b2 := openStream(t, bob, s.url, "/live/overview")
	if b1.status != http.StatusOK || b2.status != http.StatusTooManyRequests {
		t.Fatalf("bob's streams past the process's bound: %d %d, want 200 429", b1.status, b2.status)
	}
	if b2.header.Get("Retry-After") == "" {
		t.Fatal("a refused stream says nothing of when to try again")
	}

	// Ann leaves a page: once the server has seen the stream end, a
	// stream of hers is let in again. Each try is a round trip, no wait.
	a1.close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		again := openStream(t, ann, s.url, "/live/overview")
		if again.status == http.StatusOK {
			break
		}
		again.close()
		if time.Now().After(deadline) {
			t.Fatalf("a stream that ended made no room: %d", again.status)
		}
	}
}

// The server's graceful shutdown ends the open streams (the broker's
// Close, which serve.go runs at Shutdown) instead of waiting for them.
func TestShutdownDoesNotWaitForLiveStreams(t *testing.T) {
	t.Parallel()
	s := setupStill(t, func(c *web.Config) { c.LiveHeartbeat = 200 * time.Millisecond })
	viewer, _ := s.loggedIn(broker.RoleViewer)

	// Served as lazarus serve serves it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s.server.Handler(), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Second}
	srv.RegisterOnShutdown(s.broker.Close)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()

	st := openStream(t, viewer, base, "/live/overview")
	if st.status != http.StatusOK {
		t.Fatalf("stream: %d", st.status)
	}
	// Past the server's WriteTimeout the stream still stands: its
	// heartbeats go on (next fails the test if it ended).
	for since := time.Now(); time.Since(since) < 1500*time.Millisecond; {
		if got := st.next(); got != "heartbeat" {
			t.Fatalf("idle stream said %q", got)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a stream open: %v after %v", err, time.Since(start))
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown took %v", took)
	}
	<-st.closed // the stream ended, cleanly
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("serve: %v", err)
	}
}

// News can be lost (PostgreSQL's, broker.Watch; and on SQLite another
// process's writes make none here): a queue's stream looks again every
// LiveRelook without news, and says a change it was not told of.
func TestLiveStreamLooksAgainWithoutNews(t *testing.T) {
	t.Parallel()
	at := storeAt(t, "l.db")
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	one := setupAt(t, at, c, func(c *web.Config) { c.LiveRelook = 50 * time.Millisecond })
	two := setupAt(t, at, c)
	two.configure("q", `{"retryLimit":0}`)
	viewer, _ := one.loggedIn(broker.RoleViewer)
	st := openStream(t, viewer, one.url, "/live/queues/q")
	if st.status != http.StatusOK {
		t.Fatalf("stream: %d", st.status)
	}
	fill(t, two, "q", 1) // a dead letter filed by the other process
	st.wantChanged()
}
