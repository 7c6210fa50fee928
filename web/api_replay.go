package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// replayRequest is the optional body of a replay (POST
// /api/v1/dlq/:id/replay, POST /api/v1/messages/:partitionId/:transactionId/retry):
// an edited payload (any JSON value, kept byte for byte as sent; null or
// left out: the original), the mode and, with mode own, the group, and
// where the copy goes.
type replayRequest struct {
	Payload       json.RawMessage `json:"payload"`
	Mode          string          `json:"mode"`
	ConsumerGroup string          `json:"consumerGroup"`
	// Force replays a message replayed its queue's maxReplays times
	// already (without it: 409 with the reason); audited as forced.
	Force bool `json:"force"`
	// Queue and Partition (Queen 1.6's body), either or both, send the
	// copy to the end of that partition instead of the message's own
	// (made if missing, with the default options). Destination says the
	// same the way a bulk replay does; one of the two ways, not both.
	Queue       *string          `json:"queue"`
	Partition   *string          `json:"partition"`
	Destination *destinationJSON `json:"destination"`
}

// destinationJSON is a replay's destination as the API writes it.
type destinationJSON struct {
	Queue     string `json:"queue,omitempty"`
	Partition string `json:"partition,omitempty"`
}

// destination checks a destination's names are not empty strings: a
// name left out is the message's own, an empty one a mistake.
func (d destinationJSON) destination(where string) (*broker.Destination, error) {
	return newDestination(where, &d.Queue, &d.Partition, true)
}

func newDestination(where string, queue, partition *string, emptyIsAbsent bool) (*broker.Destination, error) {
	var d broker.Destination
	for _, f := range []struct {
		name string
		v    *string
		to   *string
	}{{"queue", queue, &d.Queue}, {"partition", partition, &d.Partition}} {
		if f.v == nil || (emptyIsAbsent && *f.v == "") {
			continue
		}
		if *f.v == "" {
			return nil, badRequest("%s%s must be a non-empty name: leave it out to keep the message's own", where, f.name)
		}
		*f.to = *f.v
	}
	if d.Empty() {
		return nil, nil
	}
	return &d, nil
}

// apiReplayOptions reads the replay API's optional body. An edited
// payload over the limit is a 413, as for a push. An empty body, {}, []
// (what Queen's PHP client sends for "no body") and null are no options.
func (s *Server) apiReplayOptions(c echo.Context) (broker.ReplayOptions, error) {
	var req replayRequest
	if err := decodeReplayBody(c, &req); err != nil {
		return broker.ReplayOptions{}, err
	}
	mode, err := replayMode(req.Mode)
	if err != nil {
		return broker.ReplayOptions{}, err
	}
	o := broker.ReplayOptions{Actor: actor(c), Mode: mode, Group: req.ConsumerGroup, Force: req.Force}
	if len(req.Payload) > 0 && string(req.Payload) != "null" {
		if n := int64(len(req.Payload)); n > s.maxPayload {
			return o, &apiError{status: http.StatusRequestEntityTooLarge,
				message: fmt.Sprintf("payload is %d bytes, over the limit of %d bytes per payload", n, s.maxPayload)}
		}
		if !utf8.Valid(req.Payload) {
			return o, badRequest("payload is not valid UTF-8: JSON text must be")
		}
		o.Payload = req.Payload
	}
	if req.Destination != nil && (req.Queue != nil || req.Partition != nil) {
		return o, badRequest("give the destination either as queue and partition or as destination, not both")
	}
	if req.Destination != nil {
		o.Destination, err = req.Destination.destination("destination.")
	} else {
		o.Destination, err = newDestination("", req.Queue, req.Partition, false)
	}
	return o, err
}

// decodeReplayBody decodes a replay's optional body into dst.
func decodeReplayBody(c echo.Context, dst *replayRequest) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		if berr := bodyError(err); berr != nil {
			return berr
		}
		return badRequest("the request body could not be read")
	}
	switch string(bytes.Trim(body, " \t\r\n")) { // JSON's white space
	case "", "{}", "[]", "null":
		return nil
	}
	return decodeReader(bytes.NewReader(body), dst)
}

// replayView is a replay's answer: what happened (result), the copy
// (replayedAs, and today's fields beside it) and the dead letter it was.
type replayView struct {
	// Success and Result are Queen's verdict (ReplayResult.Verdict):
	// "moved" (a copy was made now) or "duplicate" (the copy was there
	// already: nothing new).
	Success bool   `json:"success"`
	Result  string `json:"result"`
	// Status (queued, duplicate) and the copy's ids, where it is.
	Status         string   `json:"status"`
	MessageID      string   `json:"messageId"`
	TransactionID  string   `json:"transactionId"`
	PartitionID    string   `json:"partitionId"`
	Queue          string   `json:"queue"`
	Partition      string   `json:"partition"`
	ConsumerGroups []string `json:"consumerGroups"`
	// ReplayedAs is the copy as a push answers for it.
	ReplayedAs replayedAsView `json:"replayedAs"`
	// DLQID names the dead letter replayed (GET /api/v1/dlq/:id), with its
	// transactionId and group (the first, when several groups had it:
	// consumerGroups lists them all).
	DLQID                 string `json:"dlqId"`
	OriginalTransactionID string `json:"originalTransactionId"`
	ConsumerGroup         string `json:"consumerGroup"`
	// DLQRowRemoved: the dead letters went in the transaction that made
	// (or found) the copy; true on every answer that is not an error.
	DLQRowRemoved bool `json:"dlqRowRemoved"`
	// From is where the message was, when the copy went elsewhere.
	From *placeView `json:"from,omitempty"`
}

// replayedAsView is a replay's copy in the shape of a push's answer
// (Queen's replayedAs), with Queen's index and queueName.
type replayedAsView struct {
	Index         int    `json:"index"`
	Status        string `json:"status"`
	MessageID     string `json:"message_id"`
	TransactionID string `json:"transaction_id"`
	PartitionID   string `json:"partition_id"`
	Queue         string `json:"queue"`
	QueueName     string `json:"queueName"`
	Partition     string `json:"partition"`
}

// placeView is a queue's partition.
type placeView struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
}

func newReplayView(r broker.ReplayResult) replayView {
	v := replayView{Success: true, Result: r.Verdict(), Status: r.Status, MessageID: r.MessageID, TransactionID: r.TransactionID, PartitionID: r.PartitionID,
		Queue: r.Queue, Partition: r.Partition, ConsumerGroups: r.Groups,
		ReplayedAs: replayedAsView{Status: r.Status, MessageID: r.MessageID, TransactionID: r.TransactionID, PartitionID: r.PartitionID,
			Queue: r.Queue, QueueName: r.Queue, Partition: r.Partition},
		DLQID: r.DeadLetterID, OriginalTransactionID: r.OriginalTransactionID, DLQRowRemoved: true}
	if len(r.Groups) > 0 {
		v.ConsumerGroup = r.Groups[0]
	}
	if r.Elsewhere {
		v.From = &placeView{Queue: r.FromQueue, Partition: r.FromPartition}
	}
	return v
}

// replayGoneAnswer is a replay's 404: there is no such dead letter (any
// more), and when it was known what became of it (gone).
type replayGoneAnswer struct {
	Error   string `json:"error"`
	Success bool   `json:"success"`
	Result  string `json:"result"` // broker.ReplayGone
	DLQID   string `json:"dlqId,omitempty"`
	// By transactionId: the partition and transactionId asked for.
	PartitionID   string    `json:"partitionId,omitempty"`
	TransactionID string    `json:"transactionId,omitempty"`
	Gone          *goneView `json:"gone,omitempty"`
}

// replayDeadLetter pushes a copy of a dead-lettered message to the end of
// its partition, or of the destination the body names, and removes its
// dead letters; a second replay is a 404 that says what became of it.
// An optional body (replayRequest) gives the copy an edited payload, or
// replays it to the group that gave up on it only (mode own).
func (s *Server) replayDeadLetter(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	o, err := s.apiReplayOptions(c)
	if err != nil {
		return err
	}
	if o.Payload != nil {
		// An edited payload is what GET showed, masked: a ••• left in it
		// keeps the real value (mask.go).
		d, err := s.broker.DeadLetter(c.Request().Context(), id, o.Group)
		if err == nil {
			if o.Payload, err = s.masksOf(c).restore(d.Queue, o.Payload, d.Payload); err != nil {
				return err
			}
		} else if !errors.Is(err, broker.ErrNotFound) {
			return err
		}
	}
	res, err := s.broker.ReplayWith(c.Request().Context(), id, o)
	if errors.Is(err, broker.ErrNotFound) {
		return s.replayGone(c, err, replayGoneAnswer{DLQID: id}, o.Group)
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, newReplayView(res))
}

// retryMessage is replayDeadLetter naming the message by partition and
// transactionId (Queen's admin.retryMessage), with the same body.
func (s *Server) retryMessage(c echo.Context) error {
	partitionID, err := pathParam(c, "partitionId")
	if err != nil {
		return err
	}
	txid, err := pathParam(c, "transactionId")
	if err != nil {
		return err
	}
	o, err := s.apiReplayOptions(c)
	if err != nil {
		return err
	}
	if o.Payload != nil {
		// As replayDeadLetter: a ••• left in the edit keeps the real value.
		m, err := s.broker.MessageState(c.Request().Context(), partitionID, txid)
		if err == nil {
			if o.Payload, err = s.masksOf(c).restore(m.Queue.Name, o.Payload, m.Payload); err != nil {
				return err
			}
		} else if !errors.Is(err, broker.ErrNotFound) {
			return err
		}
	}
	res, err := s.broker.ReplayTransactionWith(c.Request().Context(), partitionID, txid, o)
	if errors.Is(err, broker.ErrNotFound) {
		return s.replayGone(c, err, replayGoneAnswer{DLQID: res.DeadLetterID, PartitionID: partitionID, TransactionID: txid}, o.Group)
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, newReplayView(res))
}

// replayGone answers a replay that found no dead letter: 404, "result":
// "gone", with what became of the message's dead letters (of group, when
// the replay named one) when it is known: a client that retries a replay
// after a timeout learns its first call was done, and by whom.
func (s *Server) replayGone(c echo.Context, notFound error, a replayGoneAnswer, group string) error {
	a.Result, a.Error = broker.ReplayGone, notFound.Error()
	var be *broker.Error
	if !errors.As(notFound, &be) {
		return notFound
	}
	a.Error = be.Message
	if a.DLQID != "" {
		h, err := s.broker.DeadLetterHistory(c.Request().Context(), a.DLQID, group)
		if err != nil && !errors.Is(err, broker.ErrNotFound) {
			return err
		}
		if err == nil {
			if fates := goneFates(h, group); len(fates) > 0 {
				f := latestFate(fates)
				g := newGoneView(f)
				a.Gone, a.Error = &g, goneMessage(views.Cut(a.DLQID, 64), f)
			}
		}
	}
	return writeJSON(c, http.StatusNotFound, a)
}
