package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The live pages (the dead letters of a queue, the overview, a job's
// page) follow server-sent events: a stream per open page that says
// "changed" when what the page shows may have changed, upon which the
// page asks for itself again (htmx's SSE extension), or, while its
// person is selecting rows or has a dialog open, shows a marker instead.
//
// A stream costs nothing while nothing happens: no timer but its
// heartbeat, no query. The news comes from the broker's notifier (what
// wakes waiting pops), through one goroutine a topic (a queue, a job, the
// overview) however many streams follow it; that goroutine reads a cheap
// version of what the topic's pages show (the queue's maintained dead
// letter counters, the job's counts) once a news, at most once every
// liveEvery, and tells the streams only when it moved: acks that change
// no dead letter wake no page of dead letters.

// Defaults of the live streams' bounds (Config.MaxLiveStreams,
// Config.MaxLiveStreamsPerUser, Config.LiveHeartbeat).
const (
	DefaultMaxLiveStreams        = 256
	DefaultMaxLiveStreamsPerUser = 4
	DefaultLiveHeartbeat         = 25 * time.Second
)

const (
	// liveEvery is how often a topic tells its streams at most: a busy
	// queue makes a page ask for itself once a second, not at every
	// dead letter.
	liveEvery = time.Second
	// liveOverviewEvery is the overview's: any news of any queue moves
	// it, and it is the dearest page to make.
	liveOverviewEvery = 5 * time.Second
	// liveLifetime ends a stream after a while: the browser opens it
	// again, and its session is checked again then (a logged-out person
	// stops getting news).
	liveLifetime = 15 * time.Minute
	// liveWrite bounds one write to a stream: a reader that stopped
	// reading is cut off.
	liveWrite = 10 * time.Second
	// DefaultLiveRelook is how often a topic with a version looks again
	// without news (Config.LiveRelook): news can be lost (PostgreSQL's,
	// broker.Watch), and a page must not stay still for it.
	DefaultLiveRelook = 30 * time.Second
)

// liveTopic is what one goroutine follows for every stream of it.
type liveTopic struct {
	key   string                                    // broker.Watch's key
	every time.Duration                             // at most one event this often
	look  func(ctx context.Context) (string, error) // the version; nil: every news is a change
}

// liveHub fans the broker's news out to the streams, and bounds them.
type liveHub struct {
	broker       *broker.Broker
	max, perUser int
	heartbeat    time.Duration
	relook       time.Duration // a topic with a version looks again this often without news

	mu      sync.Mutex
	streams int
	users   map[int64]int
	topics  map[string]*liveFollow
}

// liveFollow is a topic with streams: its goroutine runs until the last
// stream leaves (stop) or the broker closes.
type liveFollow struct {
	subs  map[chan struct{}]struct{}
	stop  context.CancelFunc
	ready chan struct{} // closed once it has looked a first time: a change from then on is told
}

func newLiveHub(b *broker.Broker, max, perUser int, heartbeat, relook time.Duration) *liveHub {
	if max <= 0 {
		max = DefaultMaxLiveStreams
	}
	if perUser <= 0 {
		perUser = DefaultMaxLiveStreamsPerUser
	}
	if heartbeat <= 0 {
		heartbeat = DefaultLiveHeartbeat
	}
	if relook <= 0 {
		relook = DefaultLiveRelook
	}
	return &liveHub{broker: b, max: max, perUser: perUser, heartbeat: heartbeat, relook: relook, users: map[int64]int{}, topics: map[string]*liveFollow{}}
}

// errLiveFull is a stream refused by a bound.
var errLiveFull = errors.New("too many live streams")

// join admits a stream of user to topic: its channel gets a value at each
// change after join returns (a buffer of one: changes while the stream
// writes merge), and leave must be called once it ends.
func (h *liveHub) join(user int64, name string, t liveTopic) (ch chan struct{}, leave func(), err error) {
	ch, f, leave, err := h.admit(user, name, t)
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-f.ready:
	case <-h.broker.Closed():
	}
	return ch, leave, nil
}

// admit is join but for its wait for the topic's first look.
func (h *liveHub) admit(user int64, name string, t liveTopic) (ch chan struct{}, f *liveFollow, leave func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams >= h.max || h.users[user] >= h.perUser {
		return nil, nil, nil, errLiveFull
	}
	h.streams++
	h.users[user]++
	ch = make(chan struct{}, 1)
	f = h.topics[name]
	if f == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f = &liveFollow{subs: map[chan struct{}]struct{}{}, stop: cancel, ready: make(chan struct{})}
		h.topics[name] = f
		go h.follow(ctx, f, t)
	}
	f.subs[ch] = struct{}{}
	return ch, f, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.streams--
		if h.users[user]--; h.users[user] == 0 {
			delete(h.users, user)
		}
		delete(f.subs, ch)
		if len(f.subs) == 0 && h.topics[name] == f {
			delete(h.topics, name)
			f.stop()
		}
	}, nil
}

// follow waits for the topic's news and tells its streams of each change.
// A topic with a version also looks again every relook without news: news
// lost (PostgreSQL's can be) delays a change, it does not hide it.
func (h *liveHub) follow(ctx context.Context, f *liveFollow, t liveTopic) {
	news := h.broker.Watch(t.key) // before the first look: nothing between is missed
	last, _ := h.look(ctx, t)
	close(f.ready)
	var relook <-chan time.Time
	if t.look != nil {
		tick := time.NewTicker(h.relook)
		defer tick.Stop()
		relook = tick.C
	}
	var told time.Time
	for {
		select {
		case <-news:
		case <-relook:
		case <-ctx.Done():
			return
		case <-h.broker.Closed():
			return
		}
		if wait := time.Until(told.Add(t.every)); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return
			case <-h.broker.Closed():
				timer.Stop()
				return
			}
		}
		news = h.broker.Watch(t.key)
		v, err := h.look(ctx, t)
		if err == nil && v == last && t.look != nil {
			continue
		}
		last = v
		told = time.Now()
		h.mu.Lock()
		for ch := range f.subs {
			select {
			case ch <- struct{}{}:
			default: // a change is waiting to be written already
			}
		}
		h.mu.Unlock()
	}
}

// look reads a topic's version; an error counts as a change (the page
// asks for itself, and says what went wrong, if anything).
func (h *liveHub) look(ctx context.Context, t liveTopic) (string, error) {
	if t.look == nil {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := t.look(ctx)
	if err != nil {
		return "error " + strconv.FormatInt(time.Now().UnixNano(), 10), err
	}
	return v, nil
}

// queueTopic follows a queue's dead letters: their maintained counters
// per group (filed, replayed, deleted, expired, restored show in the
// depth).
func (s *Server) queueTopic(queue string) liveTopic {
	return liveTopic{key: queue, every: liveEvery, look: func(ctx context.Context) (string, error) {
		q, err := s.broker.Brief(ctx, queue)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		for _, g := range q.Stats {
			fmt.Fprintf(&b, "%d:%d/%d/%d/%d/%d/%d;", g.GroupID, g.Depth, g.DeadLettered, g.Replayed, g.Deleted, g.DeadLettersExpired, g.Dropped)
		}
		return b.String(), nil
	}}
}

// jobTopic follows one job: its state and counts, and a replay's copies
// as they settle. A chunk done is news of its queue, not of the jobs, and
// a copy settles in an ack of its queue: any news is looked at.
func (s *Server) jobTopic(id int64) liveTopic {
	return liveTopic{key: broker.AnyNews, every: liveEvery, look: func(ctx context.Context) (string, error) {
		j, err := s.broker.JobDetail(ctx, id)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %d %d %d %d %d %d %d %s %v", j.State, j.Done, j.Skipped, j.Failed, j.Position, j.ArrivedSince, j.Restorable, j.UndoneBy, j.UpdatedAt, j.Outcomes), nil
	}}
}

// overviewTopic follows every queue: any news may move the overview's
// totals (an ack moves the failure rate).
func overviewTopic() liveTopic {
	return liveTopic{key: broker.AnyNews, every: liveOverviewEvery}
}

// liveQueue streams the changes of a queue's dead letters.
func (s *Server) liveQueue(c echo.Context) error {
	queue, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(c, 10*time.Second)
	defer cancel()
	if _, err := s.broker.Brief(ctx, queue); err != nil {
		return err
	}
	return s.stream(c, "queue\x00"+queue, s.queueTopic(queue))
}

// liveJob streams the changes of a job.
func (s *Server) liveJob(c echo.Context) error {
	id, err := pathJobID(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(c, 10*time.Second)
	defer cancel()
	if _, err := s.broker.JobDetail(ctx, id); err != nil {
		return err
	}
	return s.stream(c, "job\x00"+strconv.FormatInt(id, 10), s.jobTopic(id))
}

// liveOverview streams the changes of the overview.
func (s *Server) liveOverview(c echo.Context) error {
	return s.stream(c, "overview", overviewTopic())
}

// stream writes a topic's changes as server-sent events (event
// "changed"), with a comment as heartbeat, until the client goes, the
// stream's lifetime ends or the server stops (Broker.Close, which the
// server's graceful shutdown calls: no stream holds it up).
func (s *Server) stream(c echo.Context, name string, t liveTopic) error {
	v, ok := visitorFrom(c)
	if !ok {
		return toLogin(c)
	}
	ch, leave, err := s.live.join(v.user.ID, name, t)
	if err != nil {
		// EventSource does not open a stream that answers other than 200,
		// and htmx's extension tries again later, less and less often.
		c.Response().Header().Set("Retry-After", "30")
		return &apiError{status: http.StatusTooManyRequests, message: "too many live pages open: this one is no longer updated by itself; reload it to see what changed"}
	}
	defer leave()

	w := c.Response()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not hold the events back
	w.WriteHeader(http.StatusOK)
	if isHead(c.Request()) {
		return nil // the headers only: no stream to hold open
	}
	rc := http.NewResponseController(w)
	send := func(text string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(liveWrite)) // lifts the server's WriteTimeout
		if _, err := w.Write([]byte(text)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// retry: how long the browser waits before it opens a stream again
	// that ended (the lifetime, a restart).
	if !send("retry: 3000\n: live\n\n") {
		return nil
	}
	beat := time.NewTicker(s.live.heartbeat)
	defer beat.Stop()
	end := time.NewTimer(liveLifetime)
	defer end.Stop()
	ctx := c.Request().Context()
	for {
		select {
		case <-ch:
			if !send("event: changed\ndata: " + strconv.FormatInt(time.Now().UnixMilli(), 10) + "\n\n") {
				return nil
			}
		case <-beat.C:
			if !send(": heartbeat\n\n") {
				return nil
			}
		case <-end.C:
			return nil
		case <-ctx.Done():
			return nil
		case <-s.broker.Closed():
			return nil
		}
	}
}

// liveRoutes lists the live pages' event streams, for viewers as the
// pages are.
func (s *Server) liveRoutes(viewer echo.MiddlewareFunc) {
	s.echo.GET("/live/overview", s.liveOverview, viewer)
	s.echo.GET("/live/queues/:queue", s.liveQueue, viewer)
	s.echo.GET("/live/jobs/:id", s.liveJob, viewer)
}
