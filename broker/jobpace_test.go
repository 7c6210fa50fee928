package broker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// At the default pace a job rests after a chunk when other writes came
// since a little before it began, (gentleShare-1) times as long as the
// chunk held the writer; alone, or flat out, it does not rest.
func TestAGentleJobGivesWayToTraffic(t *testing.T) {
	t.Parallel()
	b := &Broker{}
	began := time.Now()
	const held = 3 * time.Millisecond
	if rest := b.restAfter(PaceGentle, began, held); rest != 0 {
		t.Errorf("no other write: rest %v, want none", rest)
	}
	b.foreground.Store(began.Add(-2 * trafficWindow).UnixNano())
	if rest := b.restAfter(PaceGentle, began, held); rest != 0 {
		t.Errorf("a write long before the chunk: rest %v, want none", rest)
	}
	for _, at := range []time.Time{began.Add(-trafficWindow / 2), began.Add(time.Millisecond)} {
		b.foreground.Store(at.UnixNano())
		if rest, want := b.restAfter(PaceGentle, began, held), (gentleShare-1)*held; rest != want {
			t.Errorf("a write %v from the chunk's start: rest %v, want %v", at.Sub(began), rest, want)
		}
		if rest := b.restAfter(PaceFull, began, held); rest != 0 {
			t.Errorf("flat out, a write %v from the chunk's start: rest %v, want none", at.Sub(began), rest)
		}
	}
}

// refusingStore refuses every write: what the broker does before it
// writes is all that runs.
type refusingStore struct{ Store }

func (refusingStore) Update(context.Context, UpdateOptions, func(Tx) error) error {
	return errors.New("refused")
}

// Every write but background work (a job's chunks, maintenance) counts
// as traffic a gentle job gives way to.
func TestTrafficIsTheWritesButBackgroundWork(t *testing.T) {
	t.Parallel()
	b := &Broker{store: refusingStore{}}
	nothing := func(Tx, UpdateOptions, func(string)) error { return nil }
	b.updateWith(context.Background(), background, nothing)
	if at := b.foreground.Load(); at != 0 {
		t.Fatalf("a background write counted as traffic (at %d)", at)
	}
	before := time.Now()
	b.updateWith(context.Background(), UpdateOptions{}, nothing)
	if at := time.Unix(0, b.foreground.Load()); at.Before(before) {
		t.Fatalf("a write did not count as traffic (at %v, before %v)", at, before)
	}
}
