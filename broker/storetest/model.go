package storetest

// A model-based test of SPEC.md sections 3 and 4: random sequences of
// pushes, pops, acks of every status, clock moves (lease expiry, retry
// delays), replays (to every group, and to one group only: the other
// groups pass the copy by) and deletes run against the broker on a real
// store (a SQLite file, a PostgreSQL database) and against a small
// in-memory model written from the SPEC, and the two must agree after
// every step.
//
// The model keeps, per (partition, group), the index of the first message
// not yet settled, the live lease (its last message and the acks received
// for messages behind an unacknowledged one), the retries spent on the
// head and the time the head's retry delay ends; and per group its dead
// letters and counters. Where the SPEC is silent it follows what the
// broker documents (late acks of a batch that a failure ended are answered
// and change nothing; "any partition" may pick any ready partition).
//
// LAZARUS_MODEL_SEEDS (default 16), LAZARUS_MODEL_STEPS (default 200) and
// LAZARUS_MODEL_SEED (one seed only) tune it. A disagreement is shrunk to a
// short sequence, printed step by step with the seed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

const modelQueue = "q"

var (
	modelPartitions = []string{"p0", "p1", "p2"}
	modelGroups     = []string{"g0", "g1", "g2"}
)

// ---- the model ----

type mMessage struct {
	txid, id, payload string
	only              string    // a copy replayed to one group: that group; "" every group
	at                time.Time // pushed at
	// settled is when each group's lane went past it (zero: not yet):
	// completedRetentionSeconds deletes it no earlier than that long
	// after the last of them.
	settled [3]time.Time
}

type mPartition struct {
	uuid string // the partitionId, learnt from the first push; "" until then
	msgs []mMessage
	byTx map[string]int
	gone int // msgs[:gone] were deleted by retention
}

type mAck struct{ status, err string }

// mLease is a lease of messages [lane.next, last] of a partition to a group.
type mLease struct {
	id    string
	until time.Time
	last  int
	acks  map[int]mAck // received for messages behind an unsettled one
}

// mLane is one (partition, group).
type mLane struct {
	next    int       // index of the first message the group has not settled
	retries int       // retries spent on msgs[next]
	readyAt time.Time // msgs[next] waits out its retry delay until then
	lease   *mLease   // nil: none (one that ran out stays until the next pop)
	// The lease a failure (or a retry) ended, and its last message: late
	// acks of its batch are answered and change nothing.
	voidID   string
	voidLast int
}

type mDead struct {
	part, idx int
	group     string
	err       string
	retries   int
	failedAt  time.Time
	order     int // filing order: the tie-breaker of "newest first"
}

type model struct {
	opts       broker.Options
	parts      []*mPartition
	subscribed map[string]bool
	lanes      map[[2]int]*mLane // [partition, group]
	dead       []*mDead
	filed      int
	stats      map[string]*broker.Stats
	// The groups whose dead letters a replay removed, by the copy's
	// transactionId: the copy's first outcome there (completed, or given
	// up on again) is counted as the replay's outcome in that group.
	expect map[string]map[string]bool
	now    func() time.Time
	// holds: the hold id of each group held (by its index), and of the
	// whole queue (index len(modelGroups)). A held group's pops hand
	// nothing out and pass nothing by; acks go on as ever.
	holds map[int]int64
}

// held reports whether group g's pops are held.
func (m *model) held(g int) bool {
	_, ok := m.holds[g]
	_, all := m.holds[len(modelGroups)]
	return ok || all
}

func newModel(o broker.Options) *model {
	m := &model{opts: o, subscribed: map[string]bool{}, lanes: map[[2]int]*mLane{}, stats: map[string]*broker.Stats{}, expect: map[string]map[string]bool{}, holds: map[int]int64{}}
	for range modelPartitions {
		m.parts = append(m.parts, &mPartition{byTx: map[string]int{}})
	}
	return m
}

func (m *model) lane(p, g int) *mLane {
	k := [2]int{p, g}
	l, ok := m.lanes[k]
	if !ok {
		l = &mLane{}
		m.lanes[k] = l
	}
	return l
}

func (m *model) stat(g string) *broker.Stats {
	s, ok := m.stats[g]
	if !ok {
		s = &broker.Stats{}
		m.stats[g] = s
	}
	return s
}

func groupIndex(g string) int { return slices.Index(modelGroups, g) }

// outcome counts how a replayed copy ended in a group, once, and only in
// a group that had given up on the original.
func (m *model) outcome(txid, group string, completed bool) {
	if !m.expect[txid][group] {
		return
	}
	delete(m.expect[txid], group)
	if completed {
		m.stat(group).ReplayCompleted++
	} else {
		m.stat(group).ReplayFailed++
	}
}

// forOther: message i of partition p is a copy replayed to a group other
// than g, which g passes by (SPEC 4, replay to one group).
func (m *model) forOther(p, i, g int) bool {
	o := m.parts[p].msgs[i].only
	return o != "" && o != modelGroups[g]
}

// head is the first message of the partition past the lane's next that
// is not a copy for another group: where the group's reading resumes.
func (m *model) head(p, g int) int {
	i := m.lane(p, g).next
	for i < len(m.parts[p].msgs) && m.forOther(p, i, g) {
		i++
	}
	return i
}

// ready: the group may be handed messages of the partition now.
func (m *model) ready(p, g int, now time.Time) bool {
	part := m.parts[p]
	if part.uuid == "" || !m.subscribed[modelGroups[g]] {
		return false
	}
	return m.head(p, g) < len(part.msgs) && !m.busy(m.lane(p, g), now)
}

// busy: the lane has a live lease or waits out a retry delay; a pop
// neither delivers from it nor passes anything by in it.
func (m *model) busy(l *mLane, now time.Time) bool {
	return (l.lease != nil && now.Before(l.lease.until)) || now.Before(l.readyAt)
}

// pass moves the lane past the copies for other groups at its head, as a
// pop that reads the lane does.
func (m *model) pass(p, g int) {
	l := m.lane(p, g)
	if h := m.head(p, g); h != l.next {
		l.next, l.retries = h, 0
	}
}

type mDelivery struct {
	txid    string
	retries int
}

// pop hands out up to batch messages of the partition from the first one
// not settled, passing by the copies for other groups at its head and
// stopping before the first one behind. A lease that ran out gives its
// messages back (no retry spent) and the acks it had collected count for
// nothing.
func (m *model) pop(p, g, batch int, autoAck bool, leaseID string, now time.Time) []mDelivery {
	l, part := m.lane(p, g), m.parts[p]
	m.pass(p, g)
	end := l.next
	for end < len(part.msgs) && end-l.next < batch && !m.forOther(p, end, g) {
		end++
	}
	var out []mDelivery
	for i := l.next; i < end; i++ {
		r := 0
		if i == l.next {
			r = l.retries
		}
		out = append(out, mDelivery{part.msgs[i].txid, r})
	}
	l.lease = nil
	if autoAck {
		st := m.stat(modelGroups[g])
		for i := l.next; i < end; i++ {
			st.Completed++
			m.outcome(part.msgs[i].txid, modelGroups[g], true)
		}
		l.next, l.retries = end, 0
		return out
	}
	l.lease = &mLease{id: leaseID, until: now.Add(time.Duration(m.opts.LeaseTime) * time.Second), last: end - 1, acks: map[int]mAck{}}
	return out
}

type mAckResult struct {
	ok                     bool
	kind                   error // when refused
	dlq, dropped, requeued bool
}

type mAckReq struct {
	part    int    // the partition it names; -1: an unknown partition id
	txid    string // maybe one nobody pushed
	byLease bool   // the ack names no partition, only the lease
	leaseID string // "" for none
	status  string
	err     string
	group   string
}

// ack applies one acknowledgement (SPEC.md section 3).
func (m *model) ack(a mAckReq, now time.Time) mAckResult {
	refuse := func(kind error) mAckResult { return mAckResult{kind: kind} }
	switch a.status {
	case broker.AckCompleted, broker.AckFailed, broker.AckRetry, broker.AckDLQ:
	default:
		return refuse(broker.ErrInvalid)
	}
	g := groupIndex(a.group)
	if g < 0 || !m.subscribed[a.group] {
		return refuse(broker.ErrConflict)
	}
	p := a.part
	if a.byLease {
		// The lease names the partition (and the group it belongs to).
		p = -1
		leaseGroup := -1
		for k, l := range m.lanes {
			if l.lease != nil && l.lease.id == a.leaseID {
				p, leaseGroup = k[0], k[1]
			}
		}
		if p < 0 {
			return refuse(broker.ErrConflict)
		}
		if _, ok := m.parts[p].byTx[a.txid]; !ok {
			return refuse(broker.ErrNotFound)
		}
		if leaseGroup != g {
			return refuse(broker.ErrConflict)
		}
	} else if p < 0 || m.parts[p].uuid == "" {
		return refuse(broker.ErrNotFound)
	}
	i, ok := m.parts[p].byTx[a.txid]
	if !ok {
		return refuse(broker.ErrNotFound)
	}
	l := m.lane(p, g)
	inLease := l.lease != nil && now.Before(l.lease.until) && i >= l.next && i <= l.lease.last
	inVoid := l.voidID != "" && i >= l.next && i <= l.voidLast
	if inVoid && (a.leaseID == l.voidID || (a.leaseID == "" && !inLease)) {
		return mAckResult{ok: true, requeued: true}
	}
	if !inLease || (a.leaseID != "" && a.leaseID != l.lease.id) {
		return refuse(broker.ErrConflict)
	}
	if _, dup := l.lease.acks[i]; dup {
		return refuse(broker.ErrConflict)
	}
	l.lease.acks[i] = mAck{a.status, a.err}
	filed, dropped := m.settle(p, g, now)
	return mAckResult{ok: true, dlq: filed[i], dropped: dropped[i]}
}

// settle applies the acks received for the head of the lease, in push
// order, until one is missing.
func (m *model) settle(p, g int, now time.Time) (filed, dropped map[int]bool) {
	filed, dropped = map[int]bool{}, map[int]bool{}
	l, part, group := m.lane(p, g), m.parts[p], modelGroups[g]
	st := m.stat(group)
	advance := func() { l.next, l.retries = l.next+1, 0 }
	end := func() { // the rest of the batch comes back
		l.voidID, l.voidLast = l.lease.id, l.lease.last
		l.lease = nil
	}
	giveUp := func(a mAck, keep bool) {
		i := l.next
		m.outcome(part.msgs[i].txid, group, false)
		if !keep {
			st.Dropped++
			dropped[i] = true
			return
		}
		m.filed++
		m.dead = append(m.dead, &mDead{part: p, idx: i, group: group, err: a.err, retries: l.retries, failedAt: now, order: m.filed})
		st.DeadLettered++
		st.Depth++
		filed[i] = true
	}
	for l.lease != nil {
		a, ok := l.lease.acks[l.next]
		if !ok {
			break
		}
		delete(l.lease.acks, l.next)
		switch a.status {
		case broker.AckCompleted:
			st.Completed++
			m.outcome(part.msgs[l.next].txid, group, true)
			advance()
		case broker.AckDLQ:
			giveUp(a, m.opts.DeadLetterQueue)
			advance()
		case broker.AckFailed:
			st.Failed++
			if l.retries < m.opts.RetryLimit {
				l.retries++
				l.readyAt = now.Add(m.retryWait(l.retries))
				end()
				return filed, dropped
			}
			giveUp(a, m.opts.DeadLetterQueue && m.opts.DLQAfterMaxRetries)
			advance()
			if l.next <= l.lease.last {
				end() // the rest of the batch comes back at once
			} else {
				l.lease = nil
			}
			return filed, dropped
		case broker.AckRetry:
			end()
			return filed, dropped
		}
	}
	if l.lease != nil && l.next > l.lease.last {
		l.lease = nil
	}
	return filed, dropped
}

// deadOf returns the dead letters of message (p, i).
func (m *model) deadOf(p, i int) []*mDead {
	var out []*mDead
	for _, d := range m.dead {
		if d.part == p && d.idx == i {
			out = append(out, d)
		}
	}
	return out
}

func (m *model) remove(dls []*mDead, replayed bool) {
	for _, d := range dls {
		st := m.stat(d.group)
		st.Depth--
		if replayed {
			st.Replayed++
		} else {
			st.Deleted++
		}
		m.dead = slices.DeleteFunc(m.dead, func(x *mDead) bool { return x == d })
	}
}

// replay pushes the copy dlq:<id> of message (p, i) to the end of its
// partition, unless it is there already (a duplicate), and removes the
// message's dead letters in every group; a copy replayed to one group is
// replayed to that group only (replayOwn). copyID is the broker's id of a
// new copy.
func (m *model) replay(p, i int, copyID string) (status, copyTx string, ok bool) {
	dls := m.deadOf(p, i)
	if len(dls) == 0 {
		return "", "", false
	}
	part := m.parts[p]
	orig := part.msgs[i]
	if orig.only != "" {
		// A copy for one group: its copy is for that group only too.
		return m.replayOwn(p, i, orig.only, copyID)
	}
	copyTx = "dlq:" + orig.id
	status = broker.StatusDuplicate
	if _, exists := part.byTx[copyTx]; !exists {
		status = broker.StatusQueued
		part.byTx[copyTx] = len(part.msgs)
		part.msgs = append(part.msgs, mMessage{txid: copyTx, id: copyID, payload: orig.payload, at: m.now()})
	}
	if m.expect[copyTx] == nil {
		m.expect[copyTx] = map[string]bool{}
	}
	for _, d := range dls {
		m.expect[copyTx][d.group] = true
	}
	m.remove(dls, true)
	return status, copyTx, true
}

// replayOwn pushes the copy dlq:<id>:<group> of message (p, i) for group
// only, unless it is there already, and removes that group's dead letter
// of the message alone.
func (m *model) replayOwn(p, i int, group, copyID string) (status, copyTx string, ok bool) {
	var dls []*mDead
	for _, d := range m.deadOf(p, i) {
		if d.group == group {
			dls = append(dls, d)
		}
	}
	if len(dls) == 0 {
		return "", "", false
	}
	part := m.parts[p]
	orig := part.msgs[i]
	copyTx = "dlq:" + orig.id + ":" + group
	status = broker.StatusDuplicate
	if _, exists := part.byTx[copyTx]; !exists {
		status = broker.StatusQueued
		part.byTx[copyTx] = len(part.msgs)
		part.msgs = append(part.msgs, mMessage{txid: copyTx, id: copyID, payload: orig.payload, only: group, at: m.now()})
	}
	if m.expect[copyTx] == nil {
		m.expect[copyTx] = map[string]bool{}
	}
	m.expect[copyTx][group] = true
	m.remove(dls, true)
	return status, copyTx, true
}

// newestFirst orders dead letters as the API lists them.
func newestFirst(dls []*mDead) []*mDead {
	out := slices.Clone(dls)
	sort.SliceStable(out, func(a, b int) bool {
		if !out[a].failedAt.Equal(out[b].failedAt) {
			return out[a].failedAt.After(out[b].failedAt)
		}
		return out[a].order > out[b].order
	})
	return out
}

// ---- random operations ----

// modelOp is one random step. Its numbers are resolved against the state
// when it runs, so any subsequence of a sequence is a sequence too (that
// is what the shrinking needs).
type modelOp struct {
	kind string
	r    [8]int
}

var opWeights = []struct {
	kind   string
	weight int
}{
	{"push", 18}, {"pop", 24}, {"ack", 30}, {"acks", 5}, {"clock", 10},
	{"replay", 4}, {"delete", 3}, {"replayIDs", 2}, {"replayGroup", 2}, {"deleteIDs", 1}, {"replayOwn", 4},
	{"sweep", 5}, {"hold", 2}, {"release", 2},
}

// backoffWeights lean on pops, failed acks and the clock, so that
// messages reach their later retries (testBrokerAgreesWithTheModelOnBackoff).
var backoffWeights = []struct {
	kind   string
	weight int
}{
	{"push", 10}, {"pop", 30}, {"ack", 40}, {"acks", 5}, {"clock", 25}, {"replay", 2}, {"sweep", 1},
}

func genOps(rng *rand.Rand, n int) []modelOp { return genOpsWeighted(rng, n, opWeights) }

func genOpsWeighted(rng *rand.Rand, n int, weights []struct {
	kind   string
	weight int
}) []modelOp {
	total := 0
	for _, w := range weights {
		total += w.weight
	}
	ops := make([]modelOp, n)
	for i := range ops {
		x := rng.IntN(total)
		for _, w := range weights {
			if x < w.weight {
				ops[i].kind = w.kind
				break
			}
			x -= w.weight
		}
		for j := range ops[i].r {
			ops[i].r[j] = rng.IntN(1 << 20)
		}
	}
	return ops
}

// retryWait is the model's own reading of the backoff rule (SPEC.md
// section 2): the wait before retry k is retryDelay × retryBackoff^(k-1),
// grown to retryDelayMax at most; a retryDelay above the cap is waited as
// it is.
func (m *model) retryWait(k int) time.Duration {
	ms := float64(m.opts.RetryDelay)
	for i := 1; i < k; i++ {
		ms *= m.opts.RetryBackoff
	}
	if limit := float64(m.opts.RetryDelayMax); ms > limit {
		ms = max(limit, float64(m.opts.RetryDelay))
	}
	return time.Duration(ms * float64(time.Millisecond))
}

func genOptions(rng *rand.Rand) broker.Options {
	o := broker.Options{
		LeaseTime:          []int{1, 5, 30}[rng.IntN(3)],
		RetryLimit:         rng.IntN(3),
		RetryDelay:         []int{0, 250, 1500}[rng.IntN(3)],
		DeadLetterQueue:    rng.IntN(8) != 0,
		DLQAfterMaxRetries: rng.IntN(8) != 0,
		RetentionSeconds:   1 + rng.IntN(3),
		// Backoff: fixed, doubling, tripling; the cap the default, one a
		// 250 ms delay's growth reaches, or one below a 1500 ms delay.
		RetryBackoff:  []float64{1, 2, 3}[rng.IntN(3)],
		RetryDelayMax: []int{broker.DefaultRetryDelayMax, 400, 1000}[rng.IntN(3)],
	}
	if o.RetryBackoff > 1 {
		o.RetryLimit = rng.IntN(5) // room for the waits to grow to the cap
	}
	// The two message retentions: retentionSeconds alone, both (either
	// may delete first), or completedRetentionSeconds alone.
	switch rng.IntN(3) {
	case 1:
		o.CompletedRetentionSeconds = 1 + rng.IntN(2)
	case 2:
		o.CompletedRetentionSeconds, o.RetentionSeconds = 1+rng.IntN(2), 0
	}
	return o
}

// ---- running a sequence against both ----

type modelRun struct {
	t      testing.TB
	ctx    context.Context
	d      Store
	b      *broker.Broker
	clock  *clock
	m      *model
	trace  []string
	leases map[string]string // lease id -> short name for the trace
	step   int
	pushed int
}

// failure is a disagreement between the broker and the model.
type failure struct{ msg string }

func (r *modelRun) failf(format string, args ...any) {
	panic(failure{fmt.Sprintf(format, args...)})
}

func (r *modelRun) logf(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf("%3d  ", r.step)+fmt.Sprintf(format, args...))
}

func (r *modelRun) leaseName(id string) string {
	if id == "" {
		return "-"
	}
	if n, ok := r.leases[id]; ok {
		return n
	}
	return "L?" + id[len(id)-4:]
}

// runModel runs ops from a fresh database; it returns the trace and the
// first disagreement ("" when none). Every function the broker gives to
// Update runs twice, the first run rolled back (retryStore).
func runModel(t testing.TB, harness Harness, opts broker.Options, ops []modelOp, fold time.Duration) (trace []string, fail string) {
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(t, "model.db"), Options{FoldEvery: fold, NeverAlone: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer d.Close()
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	r := &modelRun{t: t, ctx: ctx, d: d, b: broker.New(broker.Config{Store: &retryStore{Store: d}, Clock: c}), clock: c, m: newModel(opts), leases: map[string]string{}}
	r.m.now = c.Now
	raw := map[string]json.RawMessage{}
	for k, v := range map[string]any{"leaseTime": opts.LeaseTime, "retryLimit": opts.RetryLimit, "retryDelay": opts.RetryDelay,
		"deadLetterQueue": opts.DeadLetterQueue, "dlqAfterMaxRetries": opts.DLQAfterMaxRetries, "retentionSeconds": opts.RetentionSeconds,
		"completedRetentionSeconds": opts.CompletedRetentionSeconds, "retryBackoff": opts.RetryBackoff, "retryDelayMax": opts.RetryDelayMax,
		// The model replays without a cap (the cap's rules have tests of
		// their own, broker/replaycap_test.go): a long chain of replays
		// would otherwise be refused where the model expects a copy.
		"maxReplays": 0} {
		raw[k], _ = json.Marshal(v)
	}
	if _, err := r.b.Configure(ctx, modelQueue, raw, "test"); err != nil {
		t.Fatalf("configure: %v", err)
	}
	r.logf("configure %+v", opts)
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(failure)
			if !ok {
				panic(p)
			}
			trace, fail = r.trace, f.msg
		}
	}()
	for i, op := range ops {
		r.step = i + 1
		r.apply(op)
		r.m.noteSettled(r.now())
		r.compare()
	}
	return r.trace, ""
}

// noteSettled stamps now on the messages that a lane of a subscribed
// group went past since the last step (a step does not move the clock
// and a lane only goes forward).
func (m *model) noteSettled(now time.Time) {
	for k, l := range m.lanes {
		p, g := k[0], k[1]
		if !m.subscribed[modelGroups[g]] {
			continue
		}
		msgs := m.parts[p].msgs
		for i := min(l.next, len(msgs)) - 1; i >= 0 && msgs[i].settled[g].IsZero(); i-- {
			msgs[i].settled[g] = now
		}
	}
}

// lastSettled is when the last subscribed group settled message i of
// partition p (zero when one has not).
func (m *model) lastSettled(p, i int) time.Time {
	var last time.Time
	for g, group := range modelGroups {
		if !m.subscribed[group] {
			continue
		}
		at := m.parts[p].msgs[i].settled[g]
		if at.IsZero() {
			return time.Time{}
		}
		if at.After(last) {
			last = at
		}
	}
	return last
}

func (r *modelRun) now() time.Time { return r.clock.Now() }

func (r *modelRun) apply(op modelOp) {
	switch op.kind {
	case "push":
		r.push(op)
	case "pop":
		r.pop(op)
	case "ack":
		r.ackOne(op)
	case "acks":
		r.ackBatch(op)
	case "clock":
		r.advance(op)
	case "replay":
		r.replayOne(op)
	case "delete":
		r.deleteOne(op)
	case "replayIDs":
		r.replayIDs(op)
	case "replayGroup":
		r.replayGroup(op)
	case "deleteIDs":
		r.deleteIDs(op)
	case "replayOwn":
		r.replayOwn(op)
	case "sweep":
		r.sweep()
	case "hold":
		r.hold(op)
	case "release":
		r.release(op)
	}
}

// hold holds a group, or the whole queue (r[0]); one held already is not
// held again (the broker answers the hold there).
func (r *modelRun) hold(op modelOp) {
	k := op.r[0] % (len(modelGroups) + 1)
	group := ""
	if k < len(modelGroups) {
		group = modelGroups[k]
	}
	h, created, err := r.b.Hold(r.ctx, broker.HoldRequest{Queue: modelQueue, Group: group, Reason: "model", Actor: "test"})
	r.logf("hold %q -> %d created %v", group, h.ID, created)
	if err != nil {
		r.failf("hold %q: %v", group, err)
	}
	id, had := r.m.holds[k]
	if created == had || (had && id != h.ID) {
		r.failf("hold %q: id %d created %v; the model had %d (%v)", group, h.ID, created, id, had)
	}
	r.m.holds[k] = h.ID
}

// release releases one of the holds (r[0] picks it, by its key); none:
// nothing.
func (r *modelRun) release(op modelOp) {
	keys := slices.Sorted(maps.Keys(r.m.holds))
	if len(keys) == 0 {
		r.logf("release: nothing held")
		return
	}
	k := keys[op.r[0]%len(keys)]
	id := r.m.holds[k]
	h, err := r.b.Release(r.ctx, id, "test")
	r.logf("release %d (%q)", id, h.Group)
	if err != nil {
		r.failf("release %d: %v", id, err)
	}
	want := ""
	if k < len(modelGroups) {
		want = modelGroups[k]
	}
	if h.Group != want {
		r.failf("release %d: group %q, want %q", id, h.Group, want)
	}
	delete(r.m.holds, k)
}

// sweep runs maintenance: retentionSeconds deletes, in each partition,
// the oldest messages pushed longer ago than it, up to the first lane
// under a live lease; a group counts those it had not settled (copies
// for other groups aside) as expired and goes on past them, its retry
// and a lease or void lease that ended among them forgotten; a push of
// a deleted message's transactionId is a new message.
//
// completedRetentionSeconds may delete more, when the settle marks say
// (the model does not follow them): the broker's oldest kept message
// says how many, and the model checks its invariant on those: each one
// settled by every subscribed group, the last of them at least the
// retention ago. A group not subscribed yet will read from what is
// left.
func (r *modelRun) sweep() {
	rep, err := r.b.Maintain(r.ctx)
	if err != nil {
		r.failf("maintain: %v", err)
	}
	m, now := r.m, r.now()
	cutoff := now.Add(-time.Duration(m.opts.RetentionSeconds) * time.Second)
	completedCut := now.Add(-time.Duration(m.opts.CompletedRetentionSeconds) * time.Second)
	var removed int64
	for p, part := range m.parts {
		k := part.gone
		for m.opts.RetentionSeconds > 0 && k < len(part.msgs) && part.msgs[k].at.Before(cutoff) {
			k++
		}
		for g := range modelGroups {
			if l := m.lane(p, g); l.lease != nil && now.Before(l.lease.until) {
				k = min(k, l.next)
			}
		}
		k = max(k, part.gone)
		kept := r.firstKept(p)
		if kept < k {
			r.failf("sweep: partition %s keeps %s, which retentionSeconds deletes", modelPartitions[p], part.msgs[kept].txid)
		}
		for i := k; i < kept; i++ {
			if m.opts.CompletedRetentionSeconds == 0 {
				r.failf("sweep: partition %s: %s deleted, by no rule", modelPartitions[p], part.msgs[i].txid)
			}
			last := m.lastSettled(p, i)
			if last.IsZero() || last.After(completedCut) {
				r.failf("sweep: partition %s: %s deleted, last settled by the subscribed groups at %v (zero: one has not; now %v, completedRetentionSeconds %d)",
					modelPartitions[p], part.msgs[i].txid, last, now, m.opts.CompletedRetentionSeconds)
			}
		}
		if kept <= part.gone {
			continue
		}
		removed += int64(kept - part.gone)
		for i := part.gone; i < kept; i++ {
			if j, ok := part.byTx[part.msgs[i].txid]; ok && j == i {
				delete(part.byTx, part.msgs[i].txid)
				// A copy deleted before a group settled it expired
				// there (no replay outcome); a later push of its
				// transactionId is no copy.
				delete(m.expect, part.msgs[i].txid)
			}
		}
		part.gone = kept
		for g, group := range modelGroups {
			// Behind kept: a subscribed group only by retentionSeconds'
			// messages (up to k: the rest every subscribed group had
			// settled, checked above), a group not subscribed yet by any.
			l := m.lane(p, g)
			if l.next >= kept {
				continue
			}
			if m.subscribed[group] {
				for i := l.next; i < k; i++ {
					if !m.forOther(p, i, g) {
						m.stat(group).Expired++
					}
				}
			}
			l.next, l.retries, l.readyAt = kept, 0, time.Time{}
			if l.lease != nil && l.lease.last < kept {
				l.lease = nil
			}
			if l.voidID != "" && l.voidLast < kept {
				l.voidID, l.voidLast = "", 0
			}
		}
	}
	got := rep.Task(broker.TaskMessages).Removed
	r.logf("sweep -> %d removed", got)
	if got != removed {
		r.failf("sweep: broker removed %d messages, the model %d", got, removed)
	}
}

// firstKept is the index in the model's messages of partition p of the
// oldest one the broker keeps (all of them: none kept), read from the
// store.
func (r *modelRun) firstKept(p int) int {
	part := r.m.parts[p]
	if part.uuid == "" {
		return len(part.msgs)
	}
	var oldest string
	if err := r.d.View(r.ctx, func(tx broker.Tx) error {
		bp, err := tx.PartitionByUUID(r.ctx, part.uuid)
		if err != nil {
			return err
		}
		ms, err := tx.MessagesAfter(r.ctx, bp.ID, 0, 1)
		if len(ms) == 1 {
			oldest = ms[0].ID()
		}
		return err
	}); err != nil {
		r.failf("messages of %s: %v", modelPartitions[p], err)
	}
	if oldest == "" {
		return len(part.msgs)
	}
	for i := part.gone; i < len(part.msgs); i++ {
		if part.msgs[i].id == oldest {
			return i
		}
	}
	r.failf("partition %s: the broker's oldest message %s is none the model keeps", modelPartitions[p], oldest)
	return 0
}

func (r *modelRun) push(op modelOp) {
	p := op.r[0] % len(modelPartitions)
	part := r.m.parts[p]
	n := 1 + op.r[1]%3
	items := make([]broker.PushItem, n)
	var names []string
	for j := range items {
		var txid string
		if len(part.msgs) > 0 && op.r[2+j]%8 == 0 {
			txid = part.msgs[op.r[5]%len(part.msgs)].txid // already there: a duplicate
		} else {
			r.pushed++
			txid = "m" + strconv.Itoa(r.pushed)
		}
		payload := fmt.Sprintf(`{"m":%q,"n":%d}`, txid, op.r[2+j]%1000)
		items[j] = broker.PushItem{Queue: modelQueue, Partition: modelPartitions[p], TransactionID: txid, Payload: json.RawMessage(payload)}
		names = append(names, txid)
	}
	res, err := r.b.Push(r.ctx, items)
	r.logf("push %s %v", modelPartitions[p], names)
	if err != nil {
		r.failf("push: %v", err)
	}
	for j, it := range items {
		want := broker.StatusQueued
		if i, dup := part.byTx[it.TransactionID]; dup {
			want = broker.StatusDuplicate
			if res[j].MessageID != part.msgs[i].id {
				r.failf("push %s again: message id %s, want the first one's %s", it.TransactionID, res[j].MessageID, part.msgs[i].id)
			}
		}
		if res[j].Status != want {
			r.failf("push %s: status %s, want %s", it.TransactionID, res[j].Status, want)
		}
		if part.uuid == "" {
			part.uuid = res[j].PartitionID
		}
		if res[j].PartitionID != part.uuid {
			r.failf("push %s: partitionId %s, want %s", it.TransactionID, res[j].PartitionID, part.uuid)
		}
		if want == broker.StatusQueued {
			part.byTx[it.TransactionID] = len(part.msgs)
			part.msgs = append(part.msgs, mMessage{txid: it.TransactionID, id: res[j].MessageID, payload: string(it.Payload), at: r.now()})
		}
	}
}

func (r *modelRun) pop(op modelOp) {
	g := op.r[0] % len(modelGroups)
	group := modelGroups[g]
	batch := 1 + op.r[1]%3
	p := -1
	if op.r[2]%2 == 0 {
		p = op.r[3] % len(modelPartitions)
	}
	autoAck := op.r[4]%10 == 0
	req := broker.PopRequest{Queue: modelQueue, Group: group, Batch: batch, AutoAck: autoAck}
	where := "any"
	if p >= 0 {
		req.Partition = modelPartitions[p]
		where = modelPartitions[p]
	}
	now := r.now()
	res, err := r.b.Pop(r.ctx, req)
	if err != nil {
		r.logf("pop %s %s batch %d autoAck %v", group, where, batch, autoAck)
		r.failf("pop: %v", err)
	}
	r.m.subscribed[group] = true // a pop subscribes the group (the queue exists)
	if len(res.Messages) > 0 && !autoAck {
		r.leases[res.LeaseID] = fmt.Sprintf("L%d", len(r.leases)+1)
	}
	var got []string
	for _, d := range res.Messages {
		got = append(got, fmt.Sprintf("%s(r%d)", d.TransactionID, d.RetryCount))
	}
	r.logf("pop %s %s batch %d autoAck %v -> %v %s", group, where, batch, autoAck, got, r.leaseName(res.LeaseID))

	if r.m.held(g) {
		if len(res.Messages) > 0 {
			r.failf("pop %s %s: got %v while held", group, where, got)
		}
		return // nothing handed out, nothing passed by
	}
	var ready []int
	for q := range modelPartitions {
		if r.m.ready(q, g, now) && (p < 0 || q == p) {
			ready = append(ready, q)
		}
	}
	if len(res.Messages) == 0 {
		if len(ready) > 0 {
			r.failf("pop %s %s: nothing, but %v is ready", group, where, names(ready))
		}
		// The pop read every lane it could take from (the one named, or
		// all the ready ones): it passed the copies for others there.
		for q := range modelPartitions {
			if (p < 0 || q == p) && r.m.parts[q].uuid != "" && !r.m.busy(r.m.lane(q, g), now) {
				r.m.pass(q, g)
			}
		}
		return
	}
	pp := slices.Index(modelPartitions, res.Messages[0].Partition)
	if !slices.Contains(ready, pp) {
		r.failf("pop %s %s: got partition %s, which is not ready (ready: %v)", group, where, res.Messages[0].Partition, names(ready))
	}
	want := r.m.pop(pp, g, batch, autoAck, res.LeaseID, now)
	if len(want) != len(res.Messages) {
		r.failf("pop %s: got %v, want %v", group, got, want)
	}
	part := r.m.parts[pp]
	for i, d := range res.Messages {
		w := want[i]
		if d.TransactionID != w.txid || d.RetryCount != w.retries || d.Partition != modelPartitions[pp] || d.PartitionUUID != part.uuid || d.Group != group {
			r.failf("pop %s: message %d is %s(r%d) of %s, want %s(r%d) of %s", group, i, d.TransactionID, d.RetryCount, d.Partition, w.txid, w.retries, modelPartitions[pp])
		}
		msg := part.msgs[part.byTx[w.txid]]
		if string(d.Payload) != msg.payload || d.ID() != msg.id {
			r.failf("pop %s: %s has payload %s id %s, want %s id %s", group, w.txid, d.Payload, d.ID(), msg.payload, msg.id)
		}
		if (d.LeaseID == "") != autoAck || d.LeaseID != res.LeaseID {
			r.failf("pop %s: lease %q on %s (autoAck %v, pop lease %q)", group, d.LeaseID, w.txid, autoAck, res.LeaseID)
		}
	}
}

func names(parts []int) []string {
	var out []string
	for _, p := range parts {
		out = append(out, modelPartitions[p])
	}
	return out
}

var ackStatuses = []string{
	broker.AckCompleted, broker.AckCompleted, broker.AckCompleted, broker.AckCompleted,
	broker.AckFailed, broker.AckFailed, broker.AckFailed,
	broker.AckRetry, broker.AckDLQ, broker.AckDLQ,
}

// target resolves an ack's numbers to a message and how it is named.
func (r *modelRun) target(x [8]int, errText string) (mAckReq, string) {
	m := r.m
	a := mAckReq{part: -1, status: ackStatuses[x[5]%len(ackStatuses)], err: errText}
	if x[5]%53 == 0 {
		a.status = "done" // not a status
	}
	type cand struct{ p, g, i int }
	var cands []cand
	keys := make([][2]int, 0, len(m.lanes))
	for k := range m.lanes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	switch kind := x[0] % 12; {
	case kind <= 8: // a leased message; its lease may have run out (kind 8)
		for _, k := range keys {
			if l := m.lanes[k]; l.lease != nil && (kind == 8 || r.now().Before(l.lease.until)) {
				for i := l.next; i <= l.lease.last; i++ {
					cands = append(cands, cand{k[0], k[1], i})
				}
			}
		}
	case kind == 9: // one the group has settled
		for _, k := range keys {
			for i := 0; i < m.lanes[k].next; i++ {
				cands = append(cands, cand{k[0], k[1], i})
			}
		}
	case kind == 10: // one of a batch that a failure ended
		for _, k := range keys {
			if l := m.lanes[k]; l.voidID != "" {
				for i := l.next; i <= l.voidLast; i++ {
					cands = append(cands, cand{k[0], k[1], i})
				}
			}
		}
	}
	if len(cands) == 0 { // any message, any group
		for p, part := range m.parts {
			for i := range part.msgs {
				cands = append(cands, cand{p, x[1] % len(modelGroups), i})
			}
		}
	}
	var c cand
	if len(cands) == 0 || x[0]%12 == 11 && x[7]%3 == 0 {
		c = cand{x[2] % len(modelPartitions), x[1] % len(modelGroups), -1} // a transactionId nobody pushed
	} else {
		c = cands[x[2]%len(cands)]
	}
	a.part, a.group, a.txid = c.p, modelGroups[c.g], "nope"
	if c.i >= 0 {
		a.txid = m.parts[c.p].msgs[c.i].txid
	}
	if x[3]%40 == 0 {
		a.group = "stranger" // never popped anything
	}
	l := m.lane(c.p, c.g)
	leaseHow := x[4] % 20
	switch {
	case leaseHow < 13:
		if l.lease != nil {
			a.leaseID = l.lease.id
		}
	case leaseHow < 16:
	case leaseHow == 16:
		a.leaseID = "01900000-0000-7000-8000-000000000000" // nobody's
	case leaseHow == 17:
		a.leaseID = l.voidID
	default: // another lane's lease
		for _, k := range keys {
			if o := m.lanes[k]; o != l && o.lease != nil {
				a.leaseID = o.lease.id
			}
		}
	}
	if a.leaseID != "" && x[6]%10 == 0 {
		a.byLease = true
	}
	how := "partition " + modelPartitions[c.p]
	if a.byLease {
		how = "lease only"
	}
	return a, fmt.Sprintf("ack %s %s %s lease %s (%s)", a.group, a.txid, a.status, r.leaseName(a.leaseID), how)
}

func (r *modelRun) brokerAck(a mAckReq) broker.Ack {
	out := broker.Ack{TransactionID: a.txid, LeaseID: a.leaseID, Status: a.status, Error: a.err, Group: a.group}
	if !a.byLease {
		out.PartitionID = r.m.parts[a.part].uuid
		if out.PartitionID == "" {
			out.PartitionID = "01900000-0000-7000-8000-0000000000ff"
		}
	}
	return out
}

func describeAck(ok bool, kind error, dlq, dropped, requeued bool) string {
	if !ok {
		return fmt.Sprintf("refused (%v)", kind)
	}
	s := "ok"
	if dlq {
		s += " dlq"
	}
	if dropped {
		s += " dropped"
	}
	if requeued {
		s += " requeued"
	}
	return s
}

func kindOf(err error) error {
	for _, k := range []error{broker.ErrNotFound, broker.ErrInvalid, broker.ErrConflict} {
		if errors.Is(err, k) {
			return k
		}
	}
	return err
}

// modelError is the error text an ack sends: one of a few kinds, each
// with the step in it, so that the dead letters fall into several error
// groups (their fingerprints mask the step).
func modelError(pick int, step string) string {
	switch pick % 3 {
	case 0:
		return "error of step " + step
	case 1:
		return "upstream timeout after " + step + " ms"
	}
	return `card declined: "` + step + `"`
}

func (r *modelRun) ackOne(op modelOp) {
	a, desc := r.target(op.r, modelError(op.r[7], fmt.Sprint(r.step)))
	now := r.now()
	res, err := r.b.Ack(r.ctx, r.brokerAck(a))
	var be *broker.Error
	if err != nil && !errors.As(err, &be) {
		r.logf("%s", desc)
		r.failf("ack: %v", err)
	}
	got := describeAck(err == nil && res.Success, kindOf(err), res.DLQ, res.Dropped, res.Requeued)
	w := r.m.ack(a, now)
	want := describeAck(w.ok, w.kind, w.dlq, w.dropped, w.requeued)
	r.logf("%s -> %s", desc, got)
	if got != want {
		r.failf("ack: broker says %s, the model %s", got, want)
	}
}

func (r *modelRun) ackBatch(op modelOp) {
	n := 2 + op.r[7]%2
	var acks []broker.Ack
	var reqs []mAckReq
	var descs []string
	x := op.r
	for j := 0; j < n; j++ {
		for k := range x {
			x[k] = (x[k]*31 + 7 + j) % (1 << 20)
		}
		a, desc := r.target(x, modelError(x[7], fmt.Sprintf("%d.%d", r.step, j)))
		reqs, descs = append(reqs, a), append(descs, desc)
		acks = append(acks, r.brokerAck(a))
	}
	now := r.now()
	res, err := r.b.AckBatch(r.ctx, "", acks)
	if err != nil {
		r.logf("batch %v", descs)
		r.failf("ack batch: %v", err)
	}
	var gots []string
	for j, a := range reqs {
		got := describeAck(res[j].Success, nil, res[j].DLQ, res[j].Dropped, res[j].Requeued)
		w := r.m.ack(a, now)
		want := describeAck(w.ok, nil, w.dlq, w.dropped, w.requeued)
		gots = append(gots, descs[j]+" -> "+got)
		if got != want {
			r.logf("batch [%s]", strings.Join(gots, "; "))
			r.failf("ack batch item %d: broker says %s, the model %s", j, got, want)
		}
	}
	r.logf("batch [%s]", strings.Join(gots, "; "))
}

// advance moves the clock: a little, by the retry delay or the lease
// time, half way to, to or just before the next moment something becomes
// ready.
func (r *modelRun) advance(op modelOp) {
	o := r.m.opts
	now := r.now()
	var next time.Time
	for _, l := range r.m.lanes {
		for _, t := range []time.Time{l.readyAt, leaseEnd(l)} {
			if t.After(now) && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	d := time.Millisecond
	switch op.r[0] % 8 {
	case 1:
		d = max(time.Duration(o.RetryDelay)*time.Millisecond, time.Millisecond)
		if op.r[1]%2 == 1 && !next.IsZero() {
			// Half way to the next moment: a wait the broker cuts short
			// (a backoff or its cap misread) shows there.
			d = max((next.Sub(now) / 2).Truncate(time.Millisecond), time.Millisecond)
		}
	case 2:
		d = time.Duration(o.LeaseTime) * time.Second
	case 3:
		d = time.Duration(op.r[1]%(2*o.LeaseTime*1000)) * time.Millisecond
	case 4, 5:
		if !next.IsZero() {
			d = next.Sub(now)
		}
	case 6:
		if !next.IsZero() && next.Sub(now) > time.Millisecond {
			d = next.Sub(now) - time.Millisecond
		}
	case 7:
		d = 50 * time.Millisecond
	}
	r.clock.Advance(d)
	r.logf("clock +%s", d)
}

func leaseEnd(l *mLane) time.Time {
	if l.lease == nil {
		return time.Time{}
	}
	return l.lease.until
}

// deadTarget picks a dead-lettered message, or (sometimes, or when there is
// none) one that has no dead letter.
func (r *modelRun) deadTarget(x, y int) (p, i int, id string) {
	m := r.m
	if len(m.dead) > 0 && x%8 != 0 {
		d := newestFirst(m.dead)[y%len(m.dead)]
		return d.part, d.idx, m.parts[d.part].msgs[d.idx].id
	}
	var all [][2]int
	for p, part := range m.parts {
		for i := range part.msgs {
			all = append(all, [2]int{p, i})
		}
	}
	if len(all) == 0 || x%16 == 0 {
		return -1, -1, "01900000-0000-7000-8000-000000000001"
	}
	c := all[y%len(all)]
	return c[0], c[1], m.parts[c[0]].msgs[c[1]].id
}

func (r *modelRun) txOf(p, i int) string {
	if p < 0 {
		return "unknown"
	}
	return r.m.parts[p].msgs[i].txid
}

func (r *modelRun) replayOne(op modelOp) {
	p, i, id := r.deadTarget(op.r[0], op.r[1])
	res, err := r.b.Replay(r.ctx, id, "test")
	r.logf("replay %s -> %s %s %v", r.txOf(p, i), res.Status, res.TransactionID, err)
	if err != nil && !errors.Is(err, broker.ErrNotFound) {
		r.failf("replay: %v", err)
	}
	if p < 0 {
		if err == nil {
			r.failf("replay of an unknown id succeeded")
		}
		return
	}
	status, copyTx, ok := r.m.replay(p, i, res.MessageID)
	if ok != (err == nil) || status != res.Status || copyTx != res.TransactionID {
		r.failf("replay %s: broker says %s %s (%v), the model %s %s (found %v)", r.txOf(p, i), res.Status, res.TransactionID, err, status, copyTx, ok)
	}
	if ok && status == broker.StatusDuplicate {
		part := r.m.parts[p]
		if want := part.msgs[part.byTx[copyTx]].id; res.MessageID != want {
			r.failf("replay %s again: copy id %s, want the existing %s", r.txOf(p, i), res.MessageID, want)
		}
	}
}

func (r *modelRun) deleteOne(op modelOp) {
	p, i, id := r.deadTarget(op.r[0], op.r[1])
	group := ""
	if op.r[2]%2 == 0 {
		group = modelGroups[op.r[3]%len(modelGroups)]
	}
	n, err := r.b.Delete(r.ctx, id, group, "test")
	r.logf("delete %s group %q -> %d %v", r.txOf(p, i), group, n, err)
	if err != nil && !errors.Is(err, broker.ErrNotFound) {
		r.failf("delete: %v", err)
	}
	var dls []*mDead
	if p >= 0 {
		for _, d := range r.m.deadOf(p, i) {
			if group == "" || d.group == group {
				dls = append(dls, d)
			}
		}
	}
	if (len(dls) == 0) != (err != nil) || (err == nil && n != len(dls)) {
		r.failf("delete %s group %q: broker deleted %d (%v), the model %d", r.txOf(p, i), group, n, err, len(dls))
	}
	r.m.remove(dls, false)
}

func (r *modelRun) replayIDs(op modelOp) {
	n := 1 + op.r[0]%3
	var ids, txs []string
	var targets [][2]int
	for j := 0; j < n; j++ {
		p, i, id := r.deadTarget(op.r[1+j], op.r[4+j])
		ids, txs, targets = append(ids, id), append(txs, r.txOf(p, i)), append(targets, [2]int{p, i})
	}
	res, err := r.b.ReplayIDs(r.ctx, ids, "test")
	res.JobID = 0 // the job that did it: the broker's own number
	r.logf("replay ids %v -> %+v %v", txs, res, err)
	if err != nil {
		r.failf("replay ids: %v", err)
	}
	// The copies are pushed in the order of the list, each message once.
	var want broker.BulkResult
	seen := map[string]bool{}
	for j, tg := range targets {
		if seen[ids[j]] {
			continue
		}
		seen[ids[j]] = true
		if tg[0] < 0 {
			want.Skipped++
			continue
		}
		if _, _, ok := r.m.replay(tg[0], tg[1], ""); ok {
			want.Done++
		} else {
			want.Skipped++
		}
	}
	if res != want {
		r.failf("replay ids: broker %+v, model %+v", res, want)
	}
	r.learnCopies()
}

// replayOwn replays a message's dead letter of one group to that group
// only (ReplayOwnGroup): sometimes a group with no dead letter of it.
func (r *modelRun) replayOwn(op modelOp) {
	p, i, id := r.deadTarget(op.r[0], op.r[1])
	group := modelGroups[op.r[2]%len(modelGroups)]
	if p >= 0 && op.r[3]%4 != 0 {
		if dls := r.m.deadOf(p, i); len(dls) > 0 {
			group = dls[op.r[4]%len(dls)].group
		}
	}
	res, err := r.b.ReplayWith(r.ctx, id, broker.ReplayOptions{Actor: "test", Mode: broker.ReplayOwnGroup, Group: group})
	r.logf("replay %s to %s only -> %s %s %v", r.txOf(p, i), group, res.Status, res.TransactionID, err)
	if err != nil && !errors.Is(err, broker.ErrNotFound) {
		r.failf("replay to %s: %v", group, err)
	}
	if p < 0 {
		if err == nil {
			r.failf("replay of an unknown id succeeded")
		}
		return
	}
	status, copyTx, ok := r.m.replayOwn(p, i, group, res.MessageID)
	if ok != (err == nil) || status != res.Status || copyTx != res.TransactionID {
		r.failf("replay %s to %s: broker says %s %s (%v), the model %s %s (found %v)", r.txOf(p, i), group, res.Status, res.TransactionID, err, status, copyTx, ok)
	}
	if ok && status == broker.StatusDuplicate {
		part := r.m.parts[p]
		if want := part.msgs[part.byTx[copyTx]].id; res.MessageID != want {
			r.failf("replay %s to %s again: copy id %s, want the existing %s", r.txOf(p, i), group, res.MessageID, want)
		}
	}
}

// replayGroup replays every message with a dead letter in a group, as a
// bulk replay by filter does, newest failure first.
func (r *modelRun) replayGroup(op modelOp) {
	group := modelGroups[op.r[0]%len(modelGroups)]
	res, err := r.b.ReplayMatching(r.ctx, broker.DLQQuery{Queue: modelQueue, Group: group}, "test")
	r.logf("replay matching group %s -> %+v %v", group, res, err)
	if err != nil {
		r.failf("replay matching: %v", err)
	}
	// The bound is the newest failure the filter selects (nothing else
	// writes meanwhile: none arrives since).
	var want broker.BulkResult
	var newest time.Time
	for _, d := range newestFirst(r.m.dead) {
		if d.group != group {
			continue
		}
		if newest.IsZero() {
			newest = d.failedAt
		}
		if _, _, ok := r.m.replay(d.part, d.idx, ""); ok {
			want.Done++
		}
	}
	got := res
	got.Bound, got.JobID = nil, 0
	switch {
	case got != want:
		r.failf("replay matching group %s: broker %+v, model %+v", group, res, want)
	case res.Bound == nil:
		r.failf("replay matching group %s: no bound in %+v", group, res)
	case !newest.IsZero() && !res.Bound.FailedAt.Equal(newest.Truncate(time.Millisecond)):
		r.failf("replay matching group %s: bound %s, want the newest failure %s", group, res.Bound, newest)
	}
	r.learnCopies()
}

// deleteIDs deletes the dead letters of a few messages, in a group or in
// all.
func (r *modelRun) deleteIDs(op modelOp) {
	n := 1 + op.r[0]%3
	group := ""
	if op.r[7]%2 == 0 {
		group = modelGroups[op.r[6]%len(modelGroups)]
	}
	var ids, txs []string
	var targets [][2]int
	for j := 0; j < n; j++ {
		p, i, id := r.deadTarget(op.r[1+j], op.r[4+j])
		ids, txs, targets = append(ids, id), append(txs, r.txOf(p, i)), append(targets, [2]int{p, i})
	}
	res, err := r.b.DeleteIDs(r.ctx, ids, group, "test")
	res.JobID = 0
	r.logf("delete ids %v group %q -> %+v %v", txs, group, res, err)
	if err != nil {
		r.failf("delete ids: %v", err)
	}
	var want broker.BulkResult
	seen := map[string]bool{}
	for j, tg := range targets {
		if seen[ids[j]] {
			continue
		}
		seen[ids[j]] = true
		var dls []*mDead
		if tg[0] >= 0 {
			for _, d := range r.m.deadOf(tg[0], tg[1]) {
				if group == "" || d.group == group {
					dls = append(dls, d)
				}
			}
		}
		if len(dls) == 0 {
			want.Skipped++
			continue
		}
		want.Done++
		r.m.remove(dls, false)
	}
	if res != want {
		r.failf("delete ids: broker %+v, model %+v", res, want)
	}
}

// learnCopies fills in the ids of the copies a bulk replay pushed: its
// answer only counts them.
func (r *modelRun) learnCopies() {
	for p, part := range r.m.parts {
		for i := range part.msgs {
			if part.msgs[i].id != "" {
				continue
			}
			id, ok := r.messageID(p, part.msgs[i].txid)
			if !ok {
				r.failf("the copy %s is not in partition %s", part.msgs[i].txid, modelPartitions[p])
			}
			part.msgs[i].id = id
		}
	}
}

// messageID finds the id of a message the model knows is there: a push of
// its transactionId is a duplicate, whose answer names it, and changes
// nothing.
func (r *modelRun) messageID(p int, txid string) (string, bool) {
	res, err := r.b.Push(r.ctx, []broker.PushItem{{Queue: modelQueue, Partition: modelPartitions[p], TransactionID: txid, Payload: json.RawMessage(`"probe"`)}})
	if err != nil || res[0].Status != broker.StatusDuplicate {
		return "", false
	}
	return res[0].MessageID, true
}

// compare checks the broker's dead letters, partitions, groups and
// counters against the model.
func (r *modelRun) compare() {
	m := r.m
	page, err := r.b.DeadLetters(r.ctx, broker.DLQQuery{Queue: modelQueue, Limit: broker.MaxPageSize})
	if err != nil {
		r.failf("dead letters: %v", err)
	}
	want := newestFirst(m.dead)
	if len(page.Items) != len(want) {
		r.failf("dead letters: broker has %d %v, the model %d %v", len(page.Items), brokerDead(page.Items), len(want), r.modelDead(want))
	}
	for i, d := range page.Items {
		w := want[i]
		msg := m.parts[w.part].msgs[w.idx]
		if d.TransactionID != msg.txid || d.Partition != modelPartitions[w.part] || d.Group != w.group || d.Error != w.err ||
			d.RetryCount != w.retries || !d.FailedAt.Equal(w.failedAt) || string(d.Payload) != msg.payload || d.MessageID() != msg.id {
			r.failf("dead letters: broker has %v, the model %v", brokerDead(page.Items), r.modelDead(want))
		}
	}
	q, err := r.b.Queue(r.ctx, modelQueue)
	if err != nil {
		r.failf("queue: %v", err)
	}
	for _, pi := range q.Partitions {
		p := slices.Index(modelPartitions, pi.Name)
		if p < 0 || int(pi.Messages) != len(m.parts[p].msgs)-m.parts[p].gone {
			r.failf("partition %s: broker has %d messages, the model %d", pi.Name, pi.Messages, len(m.parts[max(p, 0)].msgs)-m.parts[max(p, 0)].gone)
		}
	}
	now := r.now()
	for _, gi := range q.Groups {
		g := groupIndex(gi.Name)
		if g < 0 || !m.subscribed[gi.Name] {
			r.failf("group %s reads the queue, the model does not know it", gi.Name)
		}
		// The copies for other groups at a lane's head count in the lag
		// until a pop of the group reads the lane and passes them by: a
		// pop of any partition may have read lanes before the one it
		// took, which the model does not follow, so the lag is between
		// the two.
		var lag, lagPassed, leased int64
		for p, part := range m.parts {
			if part.uuid == "" {
				continue
			}
			l := m.lane(p, g)
			lag += int64(len(part.msgs) - l.next)
			lagPassed += int64(len(part.msgs) - m.head(p, g))
			if l.lease != nil && now.Before(l.lease.until) {
				leased++
			}
		}
		if gi.Lag < lagPassed || gi.Lag > lag || gi.Leased != leased {
			r.failf("group %s: broker lag %d leased %d, the model lag %d (%d with the copies for others passed) leased %d", gi.Name, gi.Lag, gi.Leased, lag, lagPassed, leased)
		}
	}
	if len(q.Groups) != len(m.subscribed) {
		r.failf("groups: broker %d, model %d", len(q.Groups), len(m.subscribed))
	}
	got := map[string]broker.GroupStats{}
	for _, s := range q.Stats {
		got[s.Group] = s
	}
	for _, g := range modelGroups {
		var w broker.Stats
		if s, ok := m.stats[g]; ok {
			w = *s
		}
		var oldest time.Time
		for _, d := range m.dead {
			if d.group == g && (oldest.IsZero() || d.failedAt.Before(oldest)) {
				oldest = d.failedAt
			}
		}
		if got[g].Stats != w || !got[g].OldestFailedAt.Equal(oldest) {
			r.failf("stats of %s: broker %+v oldest %s, the model %+v oldest %s", g, got[g].Stats, got[g].OldestFailedAt, w, oldest)
		}
	}
	// The kept error groups hold the dead letters there are, by the
	// fingerprint of their errors, in each group and across groups.
	for _, g := range append([]string{""}, modelGroups...) {
		var dls []broker.DeadLetter
		for _, d := range page.Items {
			if g == "" || d.Group == g {
				dls = append(dls, d)
			}
		}
		gs, err := r.b.ErrorGroups(r.ctx, modelQueue, g, "", broker.MaxErrorGroups)
		if err != nil {
			r.failf("error groups of %q: %v", g, err)
		}
		if kept, scanned := groupCounts(gs), scanGroups(dls); kept != scanned {
			r.failf("error groups of %q: broker keeps %s, its dead letters are %s", g, kept, scanned)
		}
	}
	// The error groups' funnels add up to the group's counts the model
	// keeps (filed, replayed, deleted, expired, and the copies'
	// outcomes), and each group's dead letters now are what was filed
	// less what was replayed, deleted or expired.
	for _, g := range modelGroups {
		owned, err := r.b.ErrorGroupList(r.ctx, broker.ErrorGroupFilter{Queue: modelQueue, Group: g, Limit: broker.MaxErrorGroups})
		if err != nil {
			r.failf("error groups you own of %q: %v", g, err)
		}
		var life broker.Funnel
		for _, o := range owned {
			life = life.Add(o.Life)
			if left := o.Life.Filed - o.Life.Replayed - o.Life.Deleted - o.Life.Expired; left != o.DeadLetters {
				r.failf("error group %q of %q: funnel %+v leaves %d dead letters, it holds %d", o.Fingerprint, g, o.Life, left, o.DeadLetters)
			}
		}
		var w broker.Stats
		if s, ok := m.stats[g]; ok {
			w = *s
		}
		// Lost (copies retention removed before the group settled them)
		// has no count in the model's: its own tests check it.
		life.Lost = 0
		want := broker.Funnel{Filed: w.DeadLettered, Replayed: w.Replayed, Succeeded: w.ReplayCompleted, FailedAgain: w.ReplayFailed, Deleted: w.Deleted, Expired: w.DeadLettersExpired}
		if life != want {
			r.failf("funnels of %q add up to %+v, the model's counts are %+v", g, life, want)
		}
	}
}

func brokerDead(dls []broker.DeadLetter) []string {
	var out []string
	for _, d := range dls {
		out = append(out, fmt.Sprintf("%s/%s/%s r%d %q", d.Partition, d.TransactionID, d.Group, d.RetryCount, d.Error))
	}
	return out
}

func (r *modelRun) modelDead(dls []*mDead) []string {
	var out []string
	for _, d := range dls {
		out = append(out, fmt.Sprintf("%s/%s/%s r%d %q", modelPartitions[d.part], r.m.parts[d.part].msgs[d.idx].txid, d.group, d.retries, d.err))
	}
	return out
}

// ---- the test ----

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

func testBrokerAgreesWithTheModel(t *testing.T, harness Harness) {
	t.Parallel()
	seeds, steps := envInt("LAZARUS_MODEL_SEEDS", 16), envInt("LAZARUS_MODEL_STEPS", 200)
	first := int64(1)
	if v, err := strconv.ParseInt(os.Getenv("LAZARUS_MODEL_SEED"), 10, 64); err == nil {
		first, seeds = v, 1
	}
	for seed := first; seed < first+int64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), 0x1a2a))
			opts := genOptions(rng)
			ops := genOps(rng, steps)
			// The queue page's counts: read as the writer keeps them, and
			// (odd seeds) as they are kept at every commit.
			fold := time.Duration(0)
			if seed%2 == 1 {
				fold = -1
			}
			trace, fail := runModel(t, harness, opts, ops, fold)
			if fail == "" {
				return
			}
			t.Logf("seed %d: %s after %d steps; shrinking", seed, fail, len(trace)-1)
			ops, trace, fail = shrink(t, harness, opts, ops[:len(trace)-1], fail, fold)
			t.Fatalf("seed %d (LAZARUS_MODEL_SEED=%d), %d steps:\n%s\nthe broker and the model disagree: %s",
				seed, seed, len(ops), strings.Join(trace, "\n"), fail)
		})
	}
}

// shrink removes steps from a failing sequence while it still fails
// (ddmin-like: chunks, then single steps), and returns the shortest found.
func shrink(t *testing.T, harness Harness, opts broker.Options, ops []modelOp, fail string, fold time.Duration) ([]modelOp, []string, string) {
	fails := func(cand []modelOp) ([]string, string, bool) {
		tr, f := runModel(t, harness, opts, cand, fold)
		return tr, f, f != ""
	}
	trace, _, _ := fails(ops)
	deadline := time.Now().Add(20 * time.Second)
	for chunk := len(ops) / 2; chunk >= 1 && time.Now().Before(deadline); {
		removed := false
		for start := 0; start+chunk <= len(ops) && time.Now().Before(deadline); {
			cand := append(slices.Clone(ops[:start]), ops[start+chunk:]...)
			if tr, f, ok := fails(cand); ok {
				ops, trace, fail, removed = cand, tr, f, true
				// A disagreement may come earlier now: drop what follows it.
				if n := len(tr) - 1; n < len(ops) {
					ops = ops[:n]
				}
				continue
			}
			start += chunk
		}
		if !removed {
			chunk /= 2
		}
	}
	return ops, trace, fail
}

// The backoff rule learned on its own: retryBackoff above 1, a cap drawn
// among the model's (one the growth reaches, one below the delay, the
// default), room for several retries, and operations that fail messages
// and move the clock.
func testBrokerAgreesWithTheModelOnBackoff(t *testing.T, harness Harness) {
	t.Parallel()
	seeds, steps := envInt("LAZARUS_MODEL_SEEDS", 16), envInt("LAZARUS_MODEL_STEPS", 600)
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), 0xbac0))
			opts := genOptions(rng)
			opts.RetryBackoff = []float64{2, 3}[seed%2]
			// A cap the growth reaches soon, later, never; one below the
			// delay (waited as it is).
			dc := [][2]int{{250, 400}, {250, 1000}, {250, broker.DefaultRetryDelayMax}, {1500, 400}}[seed%4]
			opts.RetryDelay, opts.RetryDelayMax = dc[0], dc[1]
			opts.RetryLimit = 3 + rng.IntN(2)
			opts.LeaseTime = 30
			// Retention off, so that messages live to their later retries.
			opts.RetentionSeconds, opts.CompletedRetentionSeconds = 0, 3600
			ops := genOpsWeighted(rng, steps, backoffWeights)
			trace, fail := runModel(t, harness, opts, ops, 0)
			if fail == "" {
				return
			}
			ops, trace, fail = shrink(t, harness, opts, ops[:len(trace)-1], fail, 0)
			t.Fatalf("backoff seed %d (-run '%s$'), %d steps:\n%s\nthe broker and the model disagree: %s", seed, t.Name(), len(ops), strings.Join(trace, "\n"), fail)
		})
	}
}
