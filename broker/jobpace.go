package broker

import (
	"sync"
	"time"
)

// A job's chunk is bounded by time as well as by rows (SPEC 4, the job's
// pace). At the default pace it stops once it has held the writer for
// gentleChunkBudget, so that the pushes and acks queued behind it (which
// the writer takes before the next chunk) wait about that long at most,
// whatever a row costs on this machine and with these payloads. Flat out
// it is bounded by its rows: what a chunk costs whatever its size (the
// job's row, its filter, the commit, and the merges of the full-text
// indexes' segments that each commit's few new segments bring on) is
// then paid once for many rows. A budget of wall time would shrink the
// chunks on a loaded machine, where a row takes longer by the clock for
// the same work, until that fixed cost made most of a chunk (1M dead
// letters took 170 s of CPU in chunks of ~80 rows, 122 s in chunks of 250:
// docs/performance.md, D7); fullChunkBudget is only a safety.
const (
	// gentleChunkBudget is a chunk's time at the default pace: pushes
	// beside the job wait a few milliseconds more at most.
	gentleChunkBudget = 2 * time.Millisecond
	// fullChunkBudget is the longest a chunk flat out (PaceFull) holds
	// the writer, whatever its rows: a safety for a machine where a row
	// costs far more than expected, not the chunk's usual bound.
	fullChunkBudget = 2 * time.Second
	// fullChunk is the most rows a chunk takes flat out (bulkChunk and
	// deleteChunk at the default pace).
	fullChunk = 20_000
	// gentleShare: at the default pace, while traffic comes (pushes,
	// acks, pops that lease messages), the jobs rest after each chunk so
	// that their chunks take at most 1/gentleShare of the time: the
	// writer, and the core the chunks and the search index's work keep
	// busy, are the traffic's the rest of the time. On 2 cores,
	// back-to-back 2 ms chunks put a producer's push p99 10–15 ms above
	// idle, one in three 4–5 ms (docs/performance.md, D7). Alone, a
	// job's chunks follow one another.
	gentleShare = 3
	// maxGentleRest bounds a rest (a chunk held up by a slow commit
	// would otherwise rest the job for twice that stall).
	maxGentleRest = 100 * time.Millisecond
	// trafficWindow is how far back before a chunk began traffic counts
	// as beside it.
	trafficWindow = 10 * time.Millisecond
)

// noteTraffic records that traffic a gentle job gives way to is under
// way: a push or an ack (as it begins and as it ends), a pop that
// leased messages. A pop that found nothing is none: a job's own chunks
// wake the pops waiting on the queues they touch.
func (b *Broker) noteTraffic() { b.traffic.Store(int64(time.Since(b.started))) }

// restAfter is how long the jobs at pace rest after a chunk that began
// at began and held the writer for held (from its start to its commit):
// at the default pace, (gentleShare-1)·held, at most maxGentleRest,
// when traffic was under way since trafficWindow before the chunk; else
// none.
func (b *Broker) restAfter(pace string, began time.Time, held time.Duration) time.Duration {
	t := b.traffic.Load()
	if pace == PaceFull || t == 0 || time.Duration(t) < began.Sub(b.started)-trafficWindow {
		return 0
	}
	return min((gentleShare-1)*held, maxGentleRest)
}

// chunkLimits is what one chunk of a job may take: rows, and time.
type chunkLimits struct {
	rows   int
	budget time.Duration
}

// limitsOf is a chunk's limits for j, whose chunks at the default pace
// take full rows at most (bulkChunk, deleteChunk): more flat out, fewer
// under a rate limit (chunkSize).
func limitsOf(j Job, full int) chunkLimits {
	if j.Scope.Pace == PaceFull {
		return chunkLimits{rows: chunkSize(j, fullChunk), budget: fullChunkBudget}
	}
	return chunkLimits{rows: chunkSize(j, full), budget: gentleChunkBudget}
}

// rowCosts keeps what a row of each job kind cost in the latest steps
// (nanoseconds, a moving average), so that a chunk's steps are sized to
// its budget: one step fills it, and the chunk overruns it by little.
// The statements a step runs whatever its size are part of the cost a
// row: a step sized so fills the budget, fixed part included.
type rowCosts struct {
	mu sync.Mutex
	ns map[string]float64
}

// rows is how many rows of kind fit in left, at most max, at least one;
// all of max while nothing is known yet (a still clock, as in
// tests, leaves it so: the chunks are then bounded by rows only).
func (c *rowCosts) rows(kind string, left time.Duration, max int) int {
	c.mu.Lock()
	ns := c.ns[kind]
	c.mu.Unlock()
	if ns <= 0 {
		return max
	}
	return min(max, int(float64(left)/ns)+1)
}

// note counts a step of kind that took took for n rows.
func (c *rowCosts) note(kind string, n int, took time.Duration) {
	if n <= 0 || took <= 0 {
		return
	}
	ns := float64(took) / float64(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ns == nil {
		c.ns = map[string]float64{}
	}
	if old := c.ns[kind]; old > 0 {
		ns = 0.7*old + 0.3*ns
	}
	c.ns[kind] = ns
}

// chunkClock tells a chunk how much of its limits it has used.
type chunkClock struct {
	b      *Broker
	kind   string
	lim    chunkLimits
	start  time.Time // the chunk's
	stepAt time.Time // the step's under way
	rows   int       // taken so far
}

// chunkClock starts the clock of a chunk of j, whose chunks at the
// default pace take full rows at most.
func (b *Broker) chunkClock(j Job, full int) *chunkClock {
	return &chunkClock{b: b, kind: j.Kind, lim: limitsOf(j, full), start: b.clock.Now()}
}

// next is how many rows the next step takes: what fits in the budget
// left, within the rows left; 0 when the chunk is to stop (the first
// step always takes some).
func (c *chunkClock) next() int {
	left := c.lim.rows - c.rows
	if left <= 0 {
		return 0
	}
	c.stepAt = c.b.clock.Now()
	spent := c.stepAt.Sub(c.start)
	if c.rows > 0 && spent >= c.lim.budget {
		return 0
	}
	return c.b.rowCosts.rows(c.kind, max(c.lim.budget-spent, 0), left)
}

// done counts the step just made, of n rows.
func (c *chunkClock) done(n int) {
	c.rows += n
	c.b.rowCosts.note(c.kind, n, c.b.clock.Now().Sub(c.stepAt))
}
