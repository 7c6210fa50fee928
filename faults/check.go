package faults

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// CheckConfig is what the checker needs beside the history.
type CheckConfig struct {
	// Groups are the consumer groups of each queue.
	Groups map[string][]string
	// LeaseTime is the queues' leaseTime.
	LeaseTime time.Duration
	// Skew is the largest clock offset a process had: a lease is taken
	// for live at least LeaseTime-Skew after its pop was sent.
	Skew time.Duration
	// FinalDLQ is each queue's and group's dead letters once the run
	// was over (the workers drained the queues): id → transactionId.
	FinalDLQ map[string]map[string]map[string]string
	// PauseBound, when not zero, is the longest a write of a healthy
	// process may wait while another is paused: longer is an anomaly.
	PauseBound time.Duration
}

// PauseWait is the longest wait of a write (push, ack) sent to a healthy
// PostgreSQL process while another was paused.
type PauseWait struct {
	Fault Fault
	Wait  time.Duration
	Op    string // the write that waited longest
}

// Report is what the checker found.
type Report struct {
	Ops        int
	ByKind     map[Kind]int
	Unknown    int // operations with no answer
	Pushed     int // pushes answered 201 (distinct transactionIds)
	Deliveries int
	Faults     map[string]int
	Anomalies  []string
	PauseWaits []PauseWait
	// MaxPauseWait is the longest of PauseWaits.
	MaxPauseWait time.Duration
	MaxKillWait  time.Duration // the same measure around kills, to compare
}

func (r *Report) anomaly(format string, args ...any) {
	r.Anomalies = append(r.Anomalies, fmt.Sprintf(format, args...))
}

// Summary is the report in a few lines.
func (r *Report) Summary() string {
	var b strings.Builder
	kinds := make([]string, 0, len(r.ByKind))
	for k, n := range r.ByKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	faults := make([]string, 0, len(r.Faults))
	for k, n := range r.Faults {
		faults = append(faults, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(faults)
	fmt.Fprintf(&b, "operations %d (%s), no answer %d; pushes answered 201: %d; deliveries %d\n", r.Ops, strings.Join(kinds, ", "), r.Unknown, r.Pushed, r.Deliveries)
	fmt.Fprintf(&b, "faults: %s\n", strings.Join(faults, ", "))
	fmt.Fprintf(&b, "longest write of a healthy process during a pause: %s (around kills: %s)\n", r.MaxPauseWait.Round(time.Millisecond), r.MaxKillWait.Round(time.Millisecond))
	fmt.Fprintf(&b, "anomalies: %d", len(r.Anomalies))
	for i, a := range r.Anomalies {
		if i == 30 {
			fmt.Fprintf(&b, "\n  … %d more", len(r.Anomalies)-30)
			break
		}
		b.WriteString("\n  " + a)
	}
	return b.String()
}

// isWrite reports whether o writes (what a paused process's lock could hold up).
func isWrite(o *Op) bool { return o.Kind == OpPush || o.Kind == OpAck }

// Check checks a history.
func Check(ops []*Op, faults []Fault, cfg CheckConfig) *Report {
	r := &Report{Ops: len(ops), ByKind: map[Kind]int{}, Faults: map[string]int{}}
	for _, f := range faults {
		name := f.Kind
		if f.Leader {
			name += " (leader)"
		}
		if f.Proc == "S1" {
			name += " (SQLite)"
		}
		r.Faults[name]++
	}
	for _, o := range ops {
		r.ByKind[o.Kind]++
		if !o.Known() {
			r.Unknown++
		}
		if o.Status == 500 {
			r.anomaly("op %d %s %s on %s answered 500: %s", o.ID, o.Kind, o.Queue, o.Proc, o.Err)
		}
	}
	checkPushes(r, ops, cfg)
	checkLeases(r, ops, cfg)
	checkLeaseModel(r, ops, cfg)
	checkReplays(r, ops, cfg)
	checkHolds(r, ops)
	checkBreaker(r, ops)
	checkPauses(r, ops, faults, cfg)
	return r
}

type key struct{ queue, group, partition string }

// checkPushes: a push answered 201 has one message whatever the number
// of times it was sent; each is delivered to every group of its queue;
// the first deliveries of a (partition, group) come in push order; the
// dead letters at the end are the messages whose fate was one, less
// those an operator replayed or deleted, and nothing else.
func checkPushes(r *Report, ops []*Op, cfg CheckConfig) {
	type pushed struct {
		queue, partition, msg string
		seq                   int
		at                    time.Time
	}
	acked := map[string]*pushed{} // transactionId → its push
	for _, o := range ops {
		if o.Kind != OpPush || o.Status != 201 {
			continue
		}
		if p, ok := acked[o.TransactionID]; ok {
			if p.msg != o.MessageID {
				r.anomaly("push %s answered 201 twice with two messages, %s and %s: doubled", o.TransactionID, p.msg, o.MessageID)
			}
			continue
		}
		acked[o.TransactionID] = &pushed{queue: o.Queue, partition: o.Partition, msg: o.MessageID, seq: o.Seq, at: o.End}
	}
	r.Pushed = len(acked)
	seqOf := map[string]int{}
	for _, o := range ops {
		if o.Kind == OpPush {
			seqOf[o.TransactionID] = o.Seq
		}
	}
	// Pops in the order their answers came.
	pops := make([]*Op, 0)
	for _, o := range ops {
		if o.Kind == OpPop && o.Status == 200 {
			pops = append(pops, o)
		}
	}
	sort.SliceStable(pops, func(i, j int) bool { return pops[i].End.Before(pops[j].End) })
	delivered := map[[3]string]bool{} // queue, group, transactionId
	msgOf := map[[2]string]string{}   // queue, transactionId → message id
	highest := map[key]int{}
	highestTx := map[key]string{}
	for _, o := range pops {
		for _, d := range o.Deliveries {
			r.Deliveries++
			k3 := [3]string{o.Queue, o.Group, d.TransactionID}
			if m, ok := msgOf[[2]string{o.Queue, d.TransactionID}]; ok && m != d.MessageID {
				r.anomaly("transactionId %s of %s delivered as two messages, %s and %s: doubled", d.TransactionID, o.Queue, m, d.MessageID)
			}
			msgOf[[2]string{o.Queue, d.TransactionID}] = d.MessageID
			if p, ok := acked[d.TransactionID]; ok && p.msg != "" && p.msg != d.MessageID {
				r.anomaly("transactionId %s pushed as %s delivered as %s", d.TransactionID, p.msg, d.MessageID)
			}
			first := !delivered[k3]
			delivered[k3] = true
			seq, produced := seqOf[d.TransactionID]
			if !first || !produced {
				continue // a redelivery, or a replayed copy (not in the push order)
			}
			k := key{o.Queue, o.Group, d.Partition}
			if h, ok := highest[k]; ok && seq < h {
				r.anomaly("order: %s/%s group %s got %s (push %d) first at op %d after %s (push %d)", o.Queue, d.Partition, o.Group, d.TransactionID, seq, o.ID, highestTx[k], h)
			}
			if h, ok := highest[k]; !ok || seq > h {
				highest[k], highestTx[k] = seq, d.TransactionID
			}
		}
	}
	lost := 0
	txs := make([]string, 0, len(acked))
	for tx := range acked {
		txs = append(txs, tx)
	}
	sort.Strings(txs)
	for _, tx := range txs {
		p := acked[tx]
		for _, g := range cfg.Groups[p.queue] {
			if !delivered[[3]string{p.queue, g, tx}] {
				lost++
				if lost <= 20 {
					r.anomaly("lost: %s pushed to %s/%s answered 201 at %s never delivered to group %s", tx, p.queue, p.partition, p.at.Format("15:04:05.000"), g)
				}
			}
		}
	}
	if lost > 20 {
		r.anomaly("lost: %d (message, group) pairs in all", lost)
	}
	if cfg.FinalDLQ == nil {
		return
	}
	// The dead letters at the end.
	touched := map[string]bool{} // dead letter ids an operator acted on
	for _, o := range ops {
		switch o.Kind {
		case OpReplay, OpDelete:
			touched[o.DLQID] = true
		case OpJob:
			for _, id := range o.DLQIDs {
				touched[id] = true
			}
		}
	}
	filed := map[[3]string]string{} // queue, group, transactionId → message id, dead-lettered by an ack
	for _, o := range ops {
		if o.Kind != OpAck || o.Status != 200 {
			continue
		}
		for _, a := range o.Acks {
			if a.Success && a.Status == "dlq" {
				filed[[3]string{o.Queue, o.Group, a.TransactionID}] = msgOf[[2]string{o.Queue, a.TransactionID}]
			}
		}
	}
	for queue, groups := range cfg.FinalDLQ {
		for g, dl := range groups {
			byTx := map[string]bool{}
			for id, tx := range dl {
				byTx[tx] = true
				if f := Fate(tx, g, cfg.Groups[queue]); f == "completed" {
					r.anomaly("dead letter %s (%s) of %s/%s, which every try completed", id, tx, queue, g)
				}
			}
			for k, msg := range filed {
				if k[0] != queue || k[1] != g || byTx[k[2]] || touched[msg] {
					continue
				}
				r.anomaly("dead letter lost: %s of %s/%s was filed (ack dlq answered success) and is not a dead letter at the end, nor replayed or deleted", k[2], queue, g)
			}
		}
	}
}

// lease is one lease a pop handed out on one message.
type lease struct {
	op       *Op
	id       string
	granted  time.Time // the pop's answer: granted by then
	liveTill time.Time // surely live until then
}

// leasesOf gathers the leases of each (queue, group, message).
func leasesOf(ops []*Op, cfg CheckConfig) map[[3]string][]*lease {
	firstAck := map[string]time.Time{} // lease id → the first ack sent with it
	for _, o := range ops {
		if o.Kind != OpAck {
			continue
		}
		for _, a := range o.Acks {
			if t, ok := firstAck[a.LeaseID]; !ok || o.Start.Before(t) {
				firstAck[a.LeaseID] = o.Start
			}
		}
	}
	out := map[[3]string][]*lease{}
	for _, o := range ops {
		if o.Kind != OpPop || o.Status != 200 {
			continue
		}
		for _, d := range o.Deliveries {
			l := &lease{op: o, id: d.LeaseID, granted: o.End, liveTill: o.Start.Add(cfg.LeaseTime - cfg.Skew)}
			if t, ok := firstAck[d.LeaseID]; ok && t.Before(l.liveTill) {
				l.liveTill = t
			}
			k := [3]string{o.Queue, o.Group, d.MessageID}
			out[k] = append(out[k], l)
		}
	}
	return out
}

// checkLeases: no two leases of one group on one message are surely
// live at one moment. A lease is granted by the time its pop is
// answered, and is surely live until its leaseTime (less the clock skew)
// from the pop's sending, or the first ack sent with it.
func checkLeases(r *Report, ops []*Op, cfg CheckConfig) {
	n := 0
	for k, ls := range leasesOf(ops, cfg) {
		for i := range ls {
			for j := i + 1; j < len(ls); j++ {
				a, b := ls[i], ls[j]
				if a.id == b.id {
					continue
				}
				both := a.granted
				if b.granted.After(both) {
					both = b.granted
				}
				if both.Before(a.liveTill) && both.Before(b.liveTill) {
					n++
					if n <= 10 {
						r.anomaly("lease overlap: %s/%s message %s leased by op %d (%s on %s, sent %s, answered %s, live till %s) and op %d (%s on %s, sent %s, answered %s, live till %s), both live at %s",
							k[0], k[1], k[2], a.op.ID, a.id, a.op.Proc, clock(a.op.Start), clock(a.op.End), clock(a.liveTill),
							b.op.ID, b.id, b.op.Proc, clock(b.op.Start), clock(b.op.End), clock(b.liveTill), clock(both))
					}
				}
			}
		}
	}
	if n > 10 {
		r.anomaly("lease overlap: %d in all", n)
	}
}

// leaseIn is an operation of the lease model: a pop that handed out the
// message under lease (acquire), or an ack with the lease (release),
// which succeeded or not: an ack of a message behind a failed one in its
// batch is answered success false, and ends its lease all the same (the
// message comes back, SPEC 3.6).
type leaseIn struct {
	key     [3]string
	acquire bool
	success bool
	lease   string
	call    int64 // the pop's sending, ns
	ret     int64 // its answer, ns
}

type leaseState struct {
	holder  string
	granted int64 // the holder's pop's sending, ns
}

// checkLeaseModel checks the leases of each (queue, group, message)
// against a model of a lease with porcupine: a message is acquired when
// free, or when its holder's lease may have run out (its leaseTime,
// less the skew, from its pop's sending, is before this pop's answer);
// an ack with a lease succeeds only while that lease holds the message,
// and ends it.
func checkLeaseModel(r *Report, ops []*Op, cfg CheckConfig) {
	var hist []porcupine.Operation
	client := map[string]int{}
	cid := func(name string) int {
		if id, ok := client[name]; ok {
			return id
		}
		client[name] = len(client)
		return client[name]
	}
	msgOf := map[[2]string]string{}
	for _, o := range ops {
		if o.Kind != OpPop || o.Status != 200 {
			continue
		}
		for _, d := range o.Deliveries {
			msgOf[[2]string{o.Queue, d.TransactionID}] = d.MessageID
			in := leaseIn{key: [3]string{o.Queue, o.Group, d.MessageID}, acquire: true, lease: d.LeaseID, call: o.Start.UnixNano(), ret: o.End.UnixNano()}
			hist = append(hist, porcupine.Operation{ClientId: cid(o.Client), Input: in, Call: in.call, Return: in.ret})
		}
	}
	for _, o := range ops {
		if o.Kind != OpAck || o.Status != 200 {
			continue
		}
		for _, a := range o.Acks {
			in := leaseIn{key: [3]string{o.Queue, o.Group, msgOf[[2]string{o.Queue, a.TransactionID}]}, lease: a.LeaseID, success: a.Success, call: o.Start.UnixNano(), ret: o.End.UnixNano()}
			hist = append(hist, porcupine.Operation{ClientId: cid(o.Client), Input: in, Call: in.call, Return: in.ret})
		}
	}
	lease := int64(cfg.LeaseTime - cfg.Skew)
	model := porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[[3]string][]porcupine.Operation{}
			var keys [][3]string
			for _, op := range h {
				k := op.Input.(leaseIn).key
				if _, ok := by[k]; !ok {
					keys = append(keys, k)
				}
				by[k] = append(by[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() any { return leaseState{} },
		Step: func(state, input, _ any) (bool, any) {
			s, in := state.(leaseState), input.(leaseIn)
			if in.acquire {
				if s.holder == "" || s.holder == in.lease || in.ret >= s.granted+lease {
					return true, leaseState{holder: in.lease, granted: in.call}
				}
				return false, s
			}
			if s.holder == in.lease {
				return true, leaseState{}
			}
			// An ack with a lease that no longer holds the message must
			// not succeed.
			return !in.success, s
		},
		DescribeOperation: func(input, _ any) string {
			in := input.(leaseIn)
			if in.acquire {
				return "acquire " + in.lease
			}
			return "ack " + in.lease
		},
	}
	switch porcupine.CheckOperationsTimeout(model, hist, time.Minute) {
	case porcupine.Illegal:
		// Say which message, with its operations.
		part := model.Partition
		model.Partition = nil
		for _, ops := range part(hist) {
			if porcupine.CheckOperationsTimeout(model, ops, 10*time.Second) != porcupine.Illegal {
				continue
			}
			in0 := ops[0].Input.(leaseIn)
			var b strings.Builder
			base := ops[0].Call
			for _, op := range ops {
				in := op.Input.(leaseIn)
				fmt.Fprintf(&b, "; %s by client %d [%+.3fs, %+.3fs]", model.DescribeOperation(in, nil), op.ClientId, float64(op.Call-base)/1e9, float64(op.Return-base)/1e9)
			}
			r.anomaly("lease model: %s/%s message %s: no order of its leases and acks is a lease's%s", in0.key[0], in0.key[1], in0.key[2], b.String())
			break
		}
	case porcupine.Unknown:
		r.anomaly("the lease model check timed out (%d operations)", len(hist))
	}
}

// replayIn is an operation of the replay model on one dead letter.
type replayIn struct {
	id     string
	delete bool
	// out: moved, duplicate, gone (404), deleted (a delete's 200), or ""
	// (no answer: anything may have happened).
	out string
}

// checkReplays: each dead letter is replayed once (porcupine: a dead
// letter is there until replayed or deleted; a replay answers moved
// while it is there, duplicate or gone after); a replay makes one copy;
// the copies made equal what the answers and the jobs' counts say; a
// job's counts add up to its ids.
func checkReplays(r *Report, ops []*Op, cfg CheckConfig) {
	var hist []porcupine.Operation
	knownMoved, unknown := map[string]int{}, map[string]int{} // per queue
	for _, o := range ops {
		switch o.Kind {
		case OpReplay, OpDelete:
			in := replayIn{id: o.Queue + "/" + o.DLQID, delete: o.Kind == OpDelete}
			switch {
			case !o.Known() || o.Status >= 500:
				unknown[o.Queue]++
			case o.Kind == OpReplay && o.Status == 200:
				in.out = o.Result
				if o.Result == "moved" {
					knownMoved[o.Queue]++
				}
			case o.Kind == OpDelete && o.Status == 200:
				in.out = "deleted"
			case o.Status == 404:
				in.out = "gone"
			default:
				continue // refused (4xx): nothing done
			}
			ret := o.End.UnixNano()
			if in.out == "" {
				ret = 1 << 62 // no answer: it may take effect at any time after
			}
			hist = append(hist, porcupine.Operation{Input: in, Call: o.Start.UnixNano(), Output: in.out, Return: ret})
		case OpJob:
			remove := o.Comment == "delete"
			switch {
			case o.Result == "done" && o.Done+o.Skipped+o.Failed != len(o.DLQIDs):
				r.anomaly("%s job %s of %d ids counted done %d, skipped %d, failed %d", o.Comment, o.JobID, len(o.DLQIDs), o.Done, o.Skipped, o.Failed)
			case remove:
			case o.Result != "done":
				unknown[o.Queue] += len(o.DLQIDs)
			default:
				knownMoved[o.Queue] += o.Moved
				if o.Moved+o.Dup+o.Gone != len(o.DLQIDs) {
					r.anomaly("replay job %s of %d ids counted moved %d, duplicate %d, gone %d", o.JobID, len(o.DLQIDs), o.Moved, o.Dup, o.Gone)
				}
			}
			for _, id := range o.DLQIDs {
				// Each id of a job: an operation whose outcome the job's
				// counts do not name one by one.
				hist = append(hist, porcupine.Operation{Input: replayIn{id: o.Queue + "/" + id, delete: remove}, Call: o.Start.UnixNano(), Return: 1 << 62})
			}
		}
	}
	model := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range h {
				k := op.Input.(replayIn).id
				if _, ok := by[k]; !ok {
					keys = append(keys, k)
				}
				by[k] = append(by[k], op)
			}
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() []any { return []any{"there"} },
		Step: func(state, input, _ any) []any {
			s, in := state.(string), input.(replayIn)
			switch {
			case in.out == "" && s == "there" && in.delete:
				return []any{"there", "deleted"}
			case in.out == "" && s == "there":
				return []any{"there", "replayed"}
			case in.out == "":
				return []any{s}
			case in.out == "moved" && s == "there":
				return []any{"replayed"}
			case in.out == "duplicate" && s == "replayed":
				return []any{s}
			case in.out == "deleted" && s == "there":
				return []any{"deleted"}
			case in.out == "gone" && s != "there":
				return []any{s}
			}
			return nil
		},
	}
	if porcupine.CheckOperationsTimeout(model.ToModel(), hist, time.Minute) == porcupine.Illegal {
		r.anomaly("the replays and deletes of dead letters are not linearizable: a dead letter replayed twice, or an answer that cannot be")
	}
	// The copies made: distinct dlq:<id> transactionIds delivered.
	copies := map[string]map[string]bool{}
	for _, o := range ops {
		if o.Kind != OpPop || o.Status != 200 {
			continue
		}
		for _, d := range o.Deliveries {
			if strings.HasPrefix(d.TransactionID, "dlq:") {
				if copies[o.Queue] == nil {
					copies[o.Queue] = map[string]bool{}
				}
				copies[o.Queue][d.TransactionID] = true
			}
		}
	}
	for q := range cfg.Groups {
		n := len(copies[q])
		if n < knownMoved[q] || n > knownMoved[q]+unknown[q] {
			r.anomaly("replays of %s: %d copies delivered, the answers and jobs said %d moved (and %d replays of unknown outcome)", q, n, knownMoved[q], unknown[q])
		}
	}
}

// checkHolds: a pop sent after a hold of its group was answered 201 and
// answered before its release was sent delivers nothing.
func checkHolds(r *Report, ops []*Op) {
	type window struct {
		queue, group string
		from, to     time.Time
	}
	var ws []window
	for _, o := range ops {
		if o.Kind != OpHold || o.HoldID == "" {
			continue
		}
		w := window{queue: o.Queue, group: o.Group, from: o.End}
		for _, rel := range ops {
			if rel.Kind == OpRelease && rel.Queue == o.Queue && rel.HoldID == o.HoldID && (w.to.IsZero() || rel.Start.Before(w.to)) {
				w.to = rel.Start
			}
		}
		if w.to.IsZero() {
			w.to = time.Now()
		}
		ws = append(ws, w)
	}
	for _, o := range ops {
		if o.Kind != OpPop || o.Status != 200 || len(o.Deliveries) == 0 {
			continue
		}
		for _, w := range ws {
			if o.Queue == w.queue && o.Group == w.group && o.Start.After(w.from) && o.End.Before(w.to) {
				r.anomaly("hold: op %d (pop of %s/%s on %s) delivered %d messages during a hold (%s to %s)", o.ID, o.Queue, o.Group, o.Proc, len(o.Deliveries), w.from.Format("15:04:05.000"), w.to.Format("15:04:05.000"))
			}
		}
	}
}

// checkPauses measures, for each pause of a PostgreSQL process, the
// longest a write to another process (not paused, not the SQLite one)
// in flight during the pause waited from the pause's start (or its own
// sending, when later) to its answer, or to the next fault's start
// when that came first; and the same around kills, to compare.
func checkPauses(r *Report, ops []*Op, faults []Fault, cfg CheckConfig) {
	for i, f := range faults {
		if (f.Kind != "pause" && f.Kind != "pause-filing" && f.Kind != "kill") || f.Proc == "S1" || f.Proc == "" {
			continue
		}
		// A write still waiting when the next fault began (another
		// pause, a crash) waits for that one too from then on: what
		// this one held it is counted up to there.
		var next time.Time
		for _, g := range faults[i+1:] {
			if g.Start.After(f.Start) && (next.IsZero() || g.Start.Before(next)) {
				next = g.Start
			}
		}
		pw := PauseWait{Fault: f}
		for _, o := range ops {
			// In flight at some moment of the pause: one sent just before
			// it may be the one that waits for the paused process's lock.
			if !isWrite(o) || o.Proc == f.Proc || o.Proc == "S1" || o.Start.After(f.End) || o.End.Before(f.Start) {
				continue
			}
			// What it waited from the pause on: a write sent before
			// it could wait for the paused process only from then (its
			// time before is the load's, which kills measure too).
			end := o.End
			if !next.IsZero() && end.After(next) {
				end = next
			}
			if d := end.Sub(later(o.Start, f.Start)); d > pw.Wait {
				pw.Wait = d
				pw.Op = fmt.Sprintf("op %d %s on %s: %d after %s", o.ID, o.Kind, o.Proc, o.Status, o.End.Sub(o.Start).Round(time.Millisecond))
			}
		}
		if f.Kind == "kill" {
			r.MaxKillWait = max(r.MaxKillWait, pw.Wait)
			continue
		}
		r.PauseWaits = append(r.PauseWaits, pw)
		r.MaxPauseWait = max(r.MaxPauseWait, pw.Wait)
		if cfg.PauseBound > 0 && pw.Wait > cfg.PauseBound {
			r.anomaly("pause of %s (leader %v, %s): a healthy process's write waited %s (bound %s): %s", f.Proc, f.Leader, f.Detail, pw.Wait.Round(time.Millisecond), cfg.PauseBound, pw.Op)
		}
	}
}

// checkBreaker: on the breaker's queue (BreakerQueue), once more
// failures in a row than breakerAfter were acked, a read of the holds
// sees the breaker's hold; and the last read, after messages completed
// again, sees it ended.
func checkBreaker(r *Report, ops []*Op) {
	failures, heldSeen, sawFailuresThenRead := 0, false, false
	var last *Op
	for _, o := range ops {
		if o.Queue != BreakerQueue {
			continue
		}
		switch o.Kind {
		case OpAck:
			for _, a := range o.Acks {
				if a.Success && a.Status == "failed" {
					failures++
				}
			}
		case OpBreaker:
			if o.Result == "" {
				continue
			}
			if o.Result == "held" {
				heldSeen = true
			}
			if failures > breakerAfter {
				sawFailuresThenRead = true
			}
			last = o
		}
	}
	if last == nil {
		return
	}
	if sawFailuresThenRead && !heldSeen {
		r.anomaly("breaker: %d failures acked in a row on %s (it holds after %d), and no read of the holds saw its hold", failures, BreakerQueue, breakerAfter)
	}
	if last.Result != "free" {
		r.anomaly("breaker: the last read of %s's holds (op %d) still saw the breaker's hold after messages completed again", BreakerQueue, last.ID)
	}
}

// BreakerQueue is the circuit breaker's queue in a campaign, and
// breakerAfter its holdAfterFailures.
const (
	BreakerQueue = "cb"
	breakerAfter = 3
)

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// clock is t as an anomaly shows it.
func clock(t time.Time) string { return t.Format("15:04:05.000") }
