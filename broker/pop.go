package broker

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// PopRequest asks for messages of one queue (or of the queues of a
// namespace or task) for one consumer group.
type PopRequest struct {
	Queue string // empty: the queues Namespace and Task select
	// Namespace and Task select the queues of a pop that names no queue
	// (Queen's GET /api/v1/pop?namespace=&task=): those with exactly
	// these labels, an empty one matching any; one at least is needed.
	Namespace string
	Task      string
	Partition string // empty: any partition of the queue
	Group     string // empty: QueueModeGroup
	Batch     int    // messages at most, default 1; across partitions
	Wait      bool   // hold until a message arrives or Timeout passes
	Timeout   time.Duration
	AutoAck   bool  // settle the messages as completed at once: no lease
	Start     Start // where a group new to the queue begins
	// Partitions is how many partitions one pop may lease at most
	// (Queen's partitions=N), default 1; Batch bounds the messages of
	// them all. Above 1 (and with no Partition named), every partition
	// it leases goes under one shared lease id (NewSharedLeaseID).
	Partitions int
	// LeaseSeconds is this pop's lease length (1 s to 7 days); 0: the
	// queue's leaseTime.
	LeaseSeconds int

	// shared: the pop's partitions go under one lease id, lease once the
	// first of them has made it.
	shared bool
	lease  string
}

// MaxPopPartitions is the most partitions one pop may lease.
const MaxPopPartitions = 1000

// labeledRecheck is how often a waiting pop of a namespace or task looks
// for queues labeled since it began (it is woken by news of the queues it
// knows only).
const labeledRecheck = time.Second

// Delivery is one message handed out by a pop.
type Delivery struct {
	Message
	Queue         string
	Partition     string
	PartitionUUID string
	LeaseID       string // the pop's lease (one for all its partitions: PopResult); empty with AutoAck
	Group         string
	RetryCount    int
}

// PopResult is what a pop hands out: messages of one partition, under one
// lease (none when AutoAck); with PopRequest.Partitions above 1, of
// several, all under one shared lease id (each Delivery carries it too).
// Each partition's lease is still its own row's: an ack settles it alone,
// a failure voids only its partition's rest, all its messages settled end
// it there while the others go on, and each runs out at its own time;
// ExtendLease with the shared id extends every partition still under it.
// LeaseUntil is the first partition's (the pop leases them one after
// another, each with its own clock reading).
type PopResult struct {
	Messages   []Delivery
	LeaseID    string
	LeaseUntil time.Time
}

// Pop leases the next messages of a partition of the queue that has some
// for the group and no live lease or retry delay. A message is delivered
// no earlier than the queue's delayedProcessing after its push, and
// nothing behind it in its partition before it; a partition pushed to
// less than the queue's windowBuffer ago is not delivered at all. With
// Wait it holds until a message arrives, woken by pushes and acks inside
// this process, and by a timer when a lease, a retry delay, a message's
// delay or a partition's window ends. While maintenance mode is on it
// hands out nothing, and a wait waits for its end (Maintenance); so does
// a hold of the queue or the group (Hold), until its release. A copy
// replayed to another group only (ReplayOwnGroup) is never handed out:
// the group's cursor passes it by when it comes to the head, and a batch
// ends before it (the next pop goes on behind it).
func (b *Broker) Pop(ctx context.Context, req PopRequest) (PopResult, error) {
	if err := validatePop(&req); err != nil {
		return PopResult{}, err
	}
	var deadline <-chan time.Time
	if req.Wait {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	for {
		queues := []string{req.Queue}
		if req.Queue == "" {
			var err error
			if queues, err = b.labeledQueues(ctx, req.Namespace, req.Task); err != nil {
				return PopResult{}, err
			}
		}
		news, stop := b.watchAny(queues) // before looking, so no news is missed
		var ended <-chan struct{}        // maintenance mode's end, likewise
		if req.Wait {
			ended = b.watch(maintenanceNews)
		}
		res, wake, err := b.tryPopQueues(ctx, req, queues)
		if len(res.Messages) > 0 {
			b.noteTraffic()
		}
		if err != nil || len(res.Messages) > 0 || !req.Wait {
			stop()
			return res, err
		}
		if req.Queue == "" {
			wake = earliest(wake, b.now().Add(labeledRecheck))
		}
		var wakeC <-chan time.Time
		var wakeT *time.Timer
		if !wake.IsZero() {
			// A lease running out or a retry delay ending makes a message
			// ready with no push to announce it.
			wakeT = time.NewTimer(max(wake.Sub(b.now()), time.Millisecond))
			wakeC = wakeT.C
		}
		var done bool
		b.waiting.Add(1)
		select {
		case <-news:
		case <-ended:
		case <-wakeC:
		case <-deadline:
			done = true
		case <-ctx.Done():
			err = ctx.Err()
			done = true
		case <-b.closed:
			done = true
		}
		b.waiting.Add(-1)
		stop()
		if wakeT != nil {
			wakeT.Stop()
		}
		if done {
			return PopResult{}, err
		}
	}
}

func validatePop(req *PopRequest) error {
	if req.Group == "" {
		req.Group = QueueModeGroup
	}
	if req.Batch == 0 {
		req.Batch = 1
	}
	if req.Partitions == 0 {
		req.Partitions = 1
	}
	if req.Queue == "" && (req.Namespace != "" || req.Task != "") {
		if req.Partition != "" {
			return errorf(ErrInvalid, "a pop by namespace or task names no partition")
		}
		if len(req.Namespace) > MaxNameLength || len(req.Task) > MaxNameLength {
			return errorf(ErrInvalid, "namespace and task are at most %d bytes", MaxNameLength)
		}
	} else if err := checkName("queue", req.Queue); err != nil {
		return err
	}
	if req.Partitions < 1 || req.Partitions > MaxPopPartitions {
		return errorf(ErrInvalid, "partitions must be between 1 and %d", MaxPopPartitions)
	}
	if req.LeaseSeconds < 0 || req.LeaseSeconds > 7*24*3600 {
		return errorf(ErrInvalid, "leaseSeconds must be between 1 and %d (0: the queue's leaseTime)", 7*24*3600)
	}
	if req.Partition != "" {
		if err := checkName("partition", req.Partition); err != nil {
			return err
		}
	}
	if err := checkName("consumer group", req.Group); err != nil {
		return err
	}
	if req.Batch < 1 || req.Batch > MaxBatch {
		return errorf(ErrInvalid, "batch must be between 1 and %d", MaxBatch)
	}
	if req.Wait && (req.Timeout <= 0 || req.Timeout > 10*time.Minute) {
		return errorf(ErrInvalid, "timeout must be between 1 ms and 10 minutes")
	}
	return nil
}

// labeledQueues names, sorted, the queues with the namespace and task
// given ("" matching any).
func (b *Broker) labeledQueues(ctx context.Context, namespace, task string) ([]string, error) {
	f := QueueFilter{Namespace: namespace, Task: task}
	var names []string
	err := b.store.View(ctx, func(tx Tx) error {
		qs, err := tx.Queues(ctx)
		if err != nil {
			return fmt.Errorf("pop: queues: %w", err)
		}
		names = names[:0]
		for _, q := range qs {
			if f.match(q) {
				names = append(names, q.Name)
			}
		}
		return nil
	})
	sort.Strings(names)
	return names, err
}

// watchAny is a channel closed by news of any of the queues, and the
// function that lets it go.
func (b *Broker) watchAny(queues []string) (<-chan struct{}, func()) {
	if len(queues) == 1 {
		return b.watch(queues[0]), func() {}
	}
	out, quit := make(chan struct{}), make(chan struct{})
	var once sync.Once
	for _, q := range queues {
		ch := b.watch(q)
		go func() {
			select {
			case <-ch:
				once.Do(func() { close(out) })
			case <-quit:
			}
		}()
	}
	var stopped sync.Once
	return out, func() { stopped.Do(func() { close(quit) }) }
}

// tryPopQueues leases what is ready now in the queues, in order: up to
// req.Partitions partitions, req.Batch messages in all, each partition
// leased in a transaction of its own, under one shared lease id when it
// may lease several (the first one's transaction makes it, the others
// reuse it). When nothing is ready it returns the earliest time something
// will be. A failure after some partitions were leased ends the pop with
// them (their messages are delivered; the failure is the next pop's to
// meet).
func (b *Broker) tryPopQueues(ctx context.Context, req PopRequest, queues []string) (PopResult, time.Time, error) {
	var out PopResult
	var wake time.Time
	parts := 0
	req.shared = req.Partitions > 1 && req.Partition == "" && !req.AutoAck
	for _, q := range queues {
		r := req
		r.Queue = q
		for parts < req.Partitions && len(out.Messages) < req.Batch {
			r.Batch = req.Batch - len(out.Messages)
			if req.shared {
				r.lease = out.LeaseID
			}
			res, w, err := b.tryPop(ctx, r)
			if err != nil {
				if len(out.Messages) > 0 {
					return out, wake, nil
				}
				return out, wake, err
			}
			if len(res.Messages) == 0 {
				wake = earliest(wake, w)
				break
			}
			if len(out.Messages) == 0 {
				out.LeaseID, out.LeaseUntil = res.LeaseID, res.LeaseUntil
			}
			out.Messages = append(out.Messages, res.Messages...)
			parts++
			if req.Partition != "" {
				break // the one partition named
			}
		}
		if parts >= req.Partitions || len(out.Messages) >= req.Batch {
			break
		}
	}
	return out, wake, nil
}

// earliest is the earlier of two times, a zero one counting as none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// tryPop leases what is ready now. When nothing is, it returns the time at
// which something will be (zero when only a push can change that). A pop
// transaction that stops passing by copies for other groups at its bound
// is followed by another, up to maxPassTx; past them the wake is now, so
// that a waiting pop goes on.
func (b *Broker) tryPop(ctx context.Context, req PopRequest) (res PopResult, wake time.Time, err error) {
	for range maxPassTx {
		var more bool
		res, wake, more, err = b.popTx(ctx, req)
		if err != nil || len(res.Messages) > 0 || !more {
			return res, wake, err
		}
	}
	return res, b.now(), nil
}

// popTx runs one pop transaction: ephemeral when it can be.
func (b *Broker) popTx(ctx context.Context, req PopRequest) (res PopResult, wake time.Time, more bool, err error) {
	var o UpdateOptions
	if !req.AutoAck {
		// A lease alone need not wait for the disk (Ephemeral), unless the
		// pop turns out to subscribe the group first (errPlainWrite: it
		// runs again as an ordinary write). Passing by copies
		// for other groups may be ephemeral too: if lost, they are passed
		// by again.
		// It may also run beside other writes: the consumer it leases is
		// locked (ReadyConsumers, Consumer), and what it passes by is
		// that consumer's.
		o = b.hot(UpdateOptions{Ephemeral: true})
	}
	return b.popOnce(ctx, req, o)
}

// popOnce leases (or with AutoAck settles) what a consumer of the group
// may be handed, passing by at its head the copies replayed to other
// groups (passer.take). A pop of any partition that finds a ready
// consumer holding only such copies passes them and tries the next one,
// up to maxPassRounds; more reports a pass stopped at its bound.
func (b *Broker) popOnce(ctx context.Context, req PopRequest, o UpdateOptions) (res PopResult, wake time.Time, more bool, err error) {
	err = b.updateWith(ctx, o, func(tx Tx, o UpdateOptions, touched func(string)) error {
		r := popRun{b: b, ctx: ctx, tx: tx, req: req, now: b.now(), touched: touched}
		err := r.run(o)
		res, wake, more = r.res, r.wake, r.more
		return err
	})
	return res, wake, more, err
}

// popTx is what a pop reads and writes: a delivery's settling (the
// leases it takes over), the passes of copies it delivers, maintenance
// mode in the settings, and the window's marks.
type popTx interface {
	deliveryTx
	PassTx
	UserTx
	WindowTx
}

// popRun is one run of a pop transaction's function: what it reads and
// what it reports (a run that goes again starts from a new one).
type popRun struct {
	b       *Broker // its events (raise)
	ctx     context.Context
	tx      popTx
	req     PopRequest
	now     time.Time
	touched func(string)
	o       UpdateOptions // of the write
	gid     int64         // the popping group, once subscribed

	res  PopResult
	wake time.Time
	more bool
}

// run is the function of popOnce's transaction, marked o.
func (r *popRun) run(o UpdateOptions) error {
	ctx, tx, req := r.ctx, r.tx, r.req
	r.o = o
	// Maintenance mode hands nothing out (a wait waits for its end:
	// maintenanceNews).
	if held, err := deliveriesHeld(ctx, tx); err != nil || held {
		return err
	}
	q, err := tx.QueueByName(ctx, req.Queue)
	if isNotFound(err) {
		return nil // nothing pushed yet: empty, and a wait waits for the first push
	}
	if err != nil {
		return fmt.Errorf("pop: %w", err)
	}
	var gid int64
	if o.Ephemeral {
		gid, err = subscribed(ctx, tx, q.ID, req.Group)
	} else {
		gid, err = subscribe(ctx, tx, q.ID, req.Group, req.Start, r.now)
	}
	if err != nil {
		return err
	}
	r.gid = gid
	// A hold of the queue or the group hands nothing out (a wait waits
	// for the queue's news: a release touches it).
	if hs, err := heldFor(ctx, tx, q.ID, gid); err != nil || hs.Held() {
		if err != nil {
			return fmt.Errorf("pop: %w", err)
		}
		return r.runHeld(q, hs)
	}
	ps := passer{tx: tx, gid: gid, budget: passBudget}
	var c Consumer
	var part Partition
	var msgs []Message
	if req.Partition != "" {
		part, c, msgs, err = r.takeNamed(q, &ps)
	} else {
		c, msgs, err = r.takeReady(q, &ps)
	}
	if err != nil || len(msgs) == 0 {
		return err
	}
	if part.ID == 0 {
		if part, err = tx.PartitionByID(ctx, c.PartitionID); err != nil {
			return fmt.Errorf("pop: partition: %w", err)
		}
	}
	return r.hand(q, part, &c, msgs)
}

// takeNamed takes what the group may be handed from the partition the
// pop names: nothing when there is no such partition, its consumer is
// leased or waits for a retry, or it was pushed to within the queue's
// windowBuffer (the wake says until when).
func (r *popRun) takeNamed(q Queue, ps *passer) (Partition, Consumer, []Message, error) {
	ctx, tx, now := r.ctx, r.tx, r.now
	part, err := tx.PartitionByName(ctx, q.ID, r.req.Partition)
	if isNotFound(err) {
		return part, Consumer{}, nil, nil
	}
	if err != nil {
		return part, Consumer{}, nil, fmt.Errorf("pop: partition: %w", err)
	}
	c, err := tx.Consumer(ctx, part.ID, ps.gid)
	if err != nil {
		return part, c, nil, fmt.Errorf("pop: consumer: %w", err)
	}
	if c.leaseLive(now) || c.AvailableAt.After(now) {
		r.wake = later(c.LeaseUntil, c.AvailableAt)
		return part, c, nil, nil
	}
	if end, err := windowEnd(ctx, tx, q, part.ID); err != nil {
		return part, c, nil, fmt.Errorf("pop: %w", err)
	} else if end.After(now) {
		r.wake = end // pushed to within its windowBuffer: not yet
		return part, c, nil, nil
	}
	msgs, passed, more, wake, err := ps.take(ctx, &c, r.req.Batch, q.Options.Delay(), now)
	r.more, r.wake = more, wake
	if err != nil {
		return part, c, nil, fmt.Errorf("pop: %w", err)
	}
	if len(msgs) == 0 {
		return part, c, nil, savePassed(ctx, tx, &c, passed)
	}
	return part, c, msgs, nil
}

// takeReady takes what the group may be handed from the first ready
// consumer that has some, passing by and saving those that hold only
// copies for other groups, up to maxPassRounds; when none is ready, the
// wake says when one will be.
func (r *popRun) takeReady(q Queue, ps *passer) (Consumer, []Message, error) {
	ctx, tx, now := r.ctx, r.tx, r.now
	for round := 0; ; round++ {
		if round == maxPassRounds {
			r.more = true
			return Consumer{}, nil, nil
		}
		ready, busy, err := readyConsumers(ctx, tx, q, ps.gid, now)
		if err != nil {
			return Consumer{}, nil, fmt.Errorf("pop: ready: %w", err)
		}
		if len(ready) == 0 {
			r.wake, err = nextWake(ctx, tx, q, ps.gid, now)
			if busy && (r.wake.IsZero() || r.wake.After(now.Add(busyRetry))) {
				r.wake = now.Add(busyRetry)
			}
			return Consumer{}, nil, err
		}
		c := ready[0]
		msgs, passed, more, _, err := ps.take(ctx, &c, r.req.Batch, q.Options.Delay(), now)
		r.more = more
		if err != nil {
			return c, nil, fmt.Errorf("pop: %w", err)
		}
		if len(msgs) > 0 {
			return c, msgs, nil
		}
		// Nothing for this group in this partition now: the copies
		// passed are saved, and the next ready consumer is tried (this
		// one is not ready again in this transaction: its head is gone,
		// not due, or another copy past the budget, which stops the
		// pass).
		if err := savePassed(ctx, tx, &c, passed); err != nil || more || !passed {
			return c, nil, err
		}
	}
}

// hand leases msgs of c's partition to the pop (or with AutoAck settles
// them), saves c and fills in the result.
func (r *popRun) hand(q Queue, part Partition, c *Consumer, msgs []Message) error {
	// The retries each message has spent, as the deliveries report
	// them: read before an autoAck settles the messages, which resets
	// the count.
	retries := make([]int, len(msgs))
	for i, m := range msgs {
		retries[i] = c.retriesOf(m.Seq)
	}
	// A lease that ran out hands its messages back, no retry spent;
	// acks recorded behind an unacked head are void.
	c.clearLease()
	c.LeasedAt = r.now
	if r.req.AutoAck {
		if err := r.autoAck(q, c, msgs, retries); err != nil {
			return err
		}
	} else {
		r.lease(q, c, msgs)
	}
	if err := r.tx.SaveConsumer(r.ctx, c); err != nil {
		return fmt.Errorf("pop: save consumer: %w", err)
	}
	r.res.LeaseID, r.res.LeaseUntil = c.LeaseID, c.LeaseUntil
	r.res.Messages = make([]Delivery, len(msgs))
	for i, m := range msgs {
		r.res.Messages[i] = Delivery{Message: m, Queue: q.Name, Partition: part.Name, PartitionUUID: part.UUID, LeaseID: c.LeaseID, Group: r.req.Group, RetryCount: retries[i]}
	}
	return nil
}

// autoAck settles msgs as completed at once: c's cursor moves past them,
// the attempts of those that had failed before are deleted, the replayed
// copies among them settled, and the group's counts added.
func (r *popRun) autoAck(q Queue, c *Consumer, msgs []Message, retries []int) error {
	ctx, tx, now, gid := r.ctx, r.tx, r.now, r.gid
	c.Cursor = msgs[len(msgs)-1].Seq
	c.RetrySeq, c.Retries = 0, 0
	st := Stats{Completed: int64(len(msgs))}
	for i, m := range msgs {
		if retries[i] > 0 {
			// It had failed before: its attempts tell nothing now.
			if err := tx.DeleteAttempts(ctx, m.Seq, gid); err != nil {
				return fmt.Errorf("pop: attempts: %w", err)
			}
		}
		counted, err := settleCopy(ctx, tx, m, gid, true, now, r.touched, r.b.raiser(ctx, tx))
		if err != nil {
			return err
		}
		if counted {
			st.ReplayCompleted++
		}
	}
	if err := r.breakerCompleted(q); err != nil {
		return err
	}
	return tx.AddStats(ctx, q.ID, gid, st, now)
}

// lease puts c under the pop's lease up to the last of msgs: the shared
// lease of the pop's first partition, a new shared one, or its own.
func (r *popRun) lease(q Queue, c *Consumer, msgs []Message) {
	switch {
	case r.req.lease != "":
		c.LeaseID = r.req.lease // the shared lease of the pop's first partition
	case r.req.shared:
		c.LeaseID = NewSharedLeaseID(c.GroupID, c.VoidLeaseID)
	default:
		c.LeaseID = NewLeaseID(c.PartitionID, c.GroupID, c.LeaseID, c.VoidLeaseID)
	}
	lease := q.Options.LeaseTime
	if r.req.LeaseSeconds > 0 {
		lease = r.req.LeaseSeconds
	}
	c.LeaseUntil = r.now.Add(time.Duration(lease) * time.Second)
	c.LeaseLast = msgs[len(msgs)-1].Seq
}

// savePassed saves a consumer whose cursor passed by copies for other
// groups and that is handed nothing: no lease, no count as completed
// (the messages up to the cursor count as passed in the group's lag).
func savePassed(ctx context.Context, tx ConsumerTx, c *Consumer, passed bool) error {
	if !passed {
		return nil
	}
	if err := tx.SaveConsumer(ctx, c); err != nil {
		return fmt.Errorf("pop: save consumer: %w", err)
	}
	return nil
}

// subscribe returns the group's id, subscribing it to the queue the first
// time it reads it.
func subscribe(ctx context.Context, tx SubscriptionTx, queueID int64, group string, start Start, now time.Time) (int64, error) {
	gid, err := tx.GroupID(ctx, group, true)
	if err != nil {
		return 0, fmt.Errorf("group: %w", err)
	}
	ok, err := tx.Subscribed(ctx, queueID, gid)
	if err != nil {
		return 0, fmt.Errorf("subscribed: %w", err)
	}
	if !ok {
		if err := tx.Subscribe(ctx, queueID, gid, start, now); err != nil {
			return 0, fmt.Errorf("subscribe: %w", err)
		}
	}
	return gid, nil
}

// subscribed returns the group's id if it reads the queue already, else
// errPlainWrite (an ephemeral pop does not subscribe).
func subscribed(ctx context.Context, tx SubscriptionTx, queueID int64, group string) (int64, error) {
	gid, err := tx.GroupID(ctx, group, false)
	if isNotFound(err) {
		return 0, errPlainWrite
	}
	if err != nil {
		return 0, fmt.Errorf("group: %w", err)
	}
	ok, err := tx.Subscribed(ctx, queueID, gid)
	if err != nil {
		return 0, fmt.Errorf("subscribed: %w", err)
	}
	if !ok {
		return 0, errPlainWrite
	}
	return gid, nil
}

// busyRetry is how soon a waiting pop asks again when the only ready
// consumers it found were held by other writes (ReadyConsumers' busy):
// they end without news when they leave those consumers as they were.
const busyRetry = 100 * time.Millisecond

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
