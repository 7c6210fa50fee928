package broker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// trafficAt stamps traffic as under way at t.
func (b *Broker) trafficAt(t time.Time) { b.traffic.Store(int64(t.Sub(b.started))) }

// At the default pace a job rests after a chunk when traffic was under
// way since a little before it began, (gentleShare-1) times as long as
// the chunk held the writer, maxGentleRest at most; without traffic, or
// flat out, it does not rest.
func TestAGentleJobGivesWayToTraffic(t *testing.T) {
	t.Parallel()
	b := &Broker{started: time.Now().Add(-time.Second)} // a second old
	began := time.Now()
	const held = 3 * time.Millisecond
	if rest := b.restAfter(PaceGentle, began, held); rest != 0 {
		t.Errorf("no traffic: rest %v, want none", rest)
	}
	b.trafficAt(began.Add(-2 * trafficWindow))
	if rest := b.restAfter(PaceGentle, began, held); rest != 0 {
		t.Errorf("traffic long before the chunk: rest %v, want none", rest)
	}
	for _, at := range []time.Time{began.Add(-trafficWindow / 2), began.Add(time.Millisecond)} {
		b.trafficAt(at)
		if rest, want := b.restAfter(PaceGentle, began, held), (gentleShare-1)*held; rest != want {
			t.Errorf("traffic %v from the chunk's start: rest %v, want %v", at.Sub(began), rest, want)
		}
		if rest := b.restAfter(PaceFull, began, held); rest != 0 {
			t.Errorf("flat out, traffic %v from the chunk's start: rest %v, want none", at.Sub(began), rest)
		}
	}
	if rest := b.restAfter(PaceGentle, began, 3*time.Second); rest != maxGentleRest {
		t.Errorf("a chunk held up 3 s: rest %v, want %v", rest, maxGentleRest)
	}
}

// refusingStore refuses every write and read: what the broker does
// before it reaches the store is all that runs.
type refusingStore struct{ Store }

var errRefused = errors.New("refused")

func (refusingStore) Update(context.Context, UpdateOptions, func(Tx) error) error { return errRefused }
func (refusingStore) View(context.Context, func(Tx) error) error                  { return errRefused }

// Pushes and acks are traffic; background work (a job's chunks,
// maintenance) and a pop that leased nothing are not.
func TestTrafficIsPushesAcksAndPopsThatLeased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := New(Config{Store: refusingStore{}})
	t.Cleanup(b.Close)
	nothing := func(Tx, UpdateOptions, func(string)) error { return nil }
	b.updateWith(ctx, background, nothing)
	b.updateWith(ctx, UpdateOptions{}, nothing)
	b.Pop(ctx, PopRequest{Queue: "q", Group: "g", Batch: 1})
	if at := b.traffic.Load(); at != 0 {
		t.Fatalf("writes that are neither pushes nor acks, or a pop that leased nothing, counted as traffic (at %v)", time.Duration(at))
	}
	for name, do := range map[string]func(){
		"a push": func() {
			b.Push(ctx, []PushItem{{Queue: "q", Payload: json.RawMessage(`{}`)}})
		},
		"an ack": func() { b.Ack(ctx, Ack{TransactionID: "t", PartitionID: "p", LeaseID: "l", Status: AckCompleted}) },
		"a batch of acks": func() {
			b.AckBatch(ctx, "g", []Ack{{TransactionID: "t", PartitionID: "p", LeaseID: "l", Status: AckCompleted}})
		},
	} {
		b.traffic.Store(0)
		before := time.Since(b.started)
		do()
		if at := time.Duration(b.traffic.Load()); at < before {
			t.Errorf("%s did not count as traffic (at %v, before %v)", name, at, before)
		}
	}
}
