package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Traces: what a worker records on a message it handles (Queen's
// message.trace(), POST /api/v1/traces), kept with the message and shown
// in the history of its dead letters. Bounded per message: each trace's
// data is cut at MaxTraceData bytes and a message keeps MaxTracesPerMessage
// traces; what is cut or not kept is counted on the trace and shown.
const (
	// MaxTraceData is the most bytes of a trace's data kept; the rest is
	// cut, and the size sent kept beside it.
	MaxTraceData = 8 << 10
	// MaxTracesPerMessage is the most traces one message keeps; those
	// after are counted on the last kept (Trace.Dropped), not kept.
	MaxTracesPerMessage = 100
	// MaxTraceNames is the most trace names one trace has.
	MaxTraceNames = 20
	// maxEventType is the longest event type, in bytes.
	maxEventType = 64
)

// Trace is one trace of a message.
type Trace struct {
	ID        int64
	Seq       int64
	QueueID   int64
	Group     string // the consumer group that recorded it (QueueModeGroup: none)
	EventType string
	Names     []string
	// Data is the trace's data as sent (JSON), or its first MaxTraceData
	// bytes when DataBytes is not 0: the size sent, then.
	Data      string
	DataBytes int
	// Dropped is how many traces of the message came after this one, the
	// last kept, and were not kept.
	Dropped int64
	At      time.Time
}

// Cut reports whether the trace's data was cut.
func (t Trace) Cut() bool { return t.DataBytes > 0 }

// TraceTx is the storage of traces (table message_traces).
type TraceTx interface {
	// InsertTrace writes t as a new trace (its names as a JSON array) and
	// returns its id (writes message_traces only).
	InsertTrace(ctx context.Context, t Trace) (int64, error)
	// TraceCount counts message seq's traces, by message_traces_seq.
	TraceCount(ctx context.Context, seq int64) (int, error)
	// CountDroppedTrace adds one to Dropped of message seq's newest
	// trace, by message_traces_seq (none: no error).
	CountDroppedTrace(ctx context.Context, seq int64) error
	// TracesOf reads up to limit traces of message seq, oldest first, by
	// message_traces_seq (none: empty).
	TracesOf(ctx context.Context, seq int64, limit int) ([]Trace, error)
	// SweepTraces deletes up to limit traces whose message is gone and
	// has no dead letter, live or removed (removed_dead_letters keeps a
	// deleted one's history), reading message_traces from its start and
	// the others by their seq indexes; it returns how many it deleted.
	SweepTraces(ctx context.Context, limit int) (int64, error)
}

// TraceParams is one trace as a worker sends it.
type TraceParams struct {
	PartitionUUID string
	TransactionID string
	Group         string // "": QueueModeGroup
	EventType     string // "": info
	Names         []string
	Data          json.RawMessage
}

// TraceResult says what became of a trace.
type TraceResult struct {
	ID   int64 // 0: not kept (Dropped)
	Kept bool
	// DataBytes is the size sent when the data was cut (else 0), and
	// DataKept how much of it was kept.
	DataBytes, DataKept int
	// Dropped: the message has MaxTracesPerMessage traces already; this
	// one is counted on the last, not kept.
	Dropped bool
}

// RecordTrace keeps a trace of the message named by its partition and
// transactionId (ErrNotFound when there is none: never pushed, or gone).
func (b *Broker) RecordTrace(ctx context.Context, p TraceParams) (TraceResult, error) {
	if p.Group == "" {
		p.Group = QueueModeGroup
	}
	if err := checkName("consumerGroup", p.Group); err != nil {
		return TraceResult{}, err
	}
	if p.EventType == "" {
		p.EventType = "info"
	}
	if len(p.EventType) > maxEventType || !plainText(p.EventType) {
		return TraceResult{}, errorf(ErrInvalid, "eventType must be text of at most %d bytes", maxEventType)
	}
	if len(p.Names) > MaxTraceNames {
		return TraceResult{}, errorf(ErrInvalid, "traceNames: at most %d names, got %d", MaxTraceNames, len(p.Names))
	}
	for i, n := range p.Names {
		if len(n) > MaxNameLength || !plainText(n) {
			return TraceResult{}, errorf(ErrInvalid, "traceNames[%d] must be text of at most %d bytes", i, MaxNameLength)
		}
	}
	if len(p.TransactionID) > MaxNameLength || !plainText(p.TransactionID) {
		return TraceResult{}, errorf(ErrInvalid, "transactionId must be text of at most %d bytes", MaxNameLength)
	}
	data := bytes.TrimSpace(p.Data)
	if len(data) == 0 || !json.Valid(data) || !utf8.Valid(data) {
		return TraceResult{}, errorf(ErrInvalid, "data is required, as JSON")
	}
	t := Trace{Group: p.Group, EventType: p.EventType, Names: p.Names, Data: string(data)}
	if len(data) > MaxTraceData {
		t.Data, t.DataBytes = cutUTF8(string(data), MaxTraceData), len(data)
	}
	var res TraceResult
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		res = TraceResult{}
		part, err := tx.PartitionByUUID(ctx, p.PartitionUUID)
		if isNotFound(err) {
			return errorf(ErrNotFound, "partition %q not found", truncate(p.PartitionUUID, 64))
		}
		if err != nil {
			return fmt.Errorf("trace: partition: %w", err)
		}
		m, err := tx.MessageByTransaction(ctx, part.ID, p.TransactionID)
		if isNotFound(err) {
			return errorf(ErrNotFound, "message %q not found in partition %q", truncate(p.TransactionID, 64), truncate(p.PartitionUUID, 64))
		}
		if err != nil {
			return fmt.Errorf("trace: message: %w", err)
		}
		n, err := tx.TraceCount(ctx, m.Seq)
		if err != nil {
			return fmt.Errorf("trace: count: %w", err)
		}
		if n >= MaxTracesPerMessage {
			res.Dropped = true
			return tx.CountDroppedTrace(ctx, m.Seq)
		}
		row := t
		row.Seq, row.QueueID, row.At = m.Seq, part.QueueID, b.now()
		if res.ID, err = tx.InsertTrace(ctx, row); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
		res.Kept, res.DataBytes, res.DataKept = true, t.DataBytes, len(t.Data)
		return nil
	})
	return res, err
}

// cutUTF8 is s cut to at most n bytes, on a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// maintainTraces deletes the traces whose message and dead letters are
// all gone (part of the history task).
func (b *Broker) maintainTraces(ctx context.Context, r *TaskReport) error {
	return b.chunks(ctx, r, func(tx Tx, _ MaintainTx, _ time.Time) (int64, error) {
		return tx.SweepTraces(ctx, maintainChunk)
	})
}
