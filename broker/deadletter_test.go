package broker_test

import (
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

func TestMessageIDRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	for _, seq := range []int64{1, 255, 1 << 40, 1<<62 - 1} {
		id := broker.MessageID(at, seq)
		if appended := string(broker.AppendMessageID([]byte("x"), at, seq)); appended != "x"+id {
			t.Errorf("%d: AppendMessageID gave %q, MessageID %q", seq, appended, id)
		}
		ms, got, ok := broker.ParseMessageID(id)
		if !ok || got != seq || ms != at.UnixMilli() {
			t.Errorf("%d: %s -> %d %d %v", seq, id, ms, got, ok)
		}
	}
	if broker.MessageID(at, 2) <= broker.MessageID(at, 1) || broker.MessageID(at.Add(time.Millisecond), 1) <= broker.MessageID(at, 2) {
		t.Error("ids do not sort by time, then sequence")
	}
	for _, bad := range []string{"", "x", broker.NewUUID(at), "zzzzzzzz-zzzz-7zzz-8zzz-zzzzzzzzzzzz"} {
		if _, _, ok := broker.ParseMessageID(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
