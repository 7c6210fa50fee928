package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// queueView describes a queue: options, partitions, consumer groups with
// their lag and dead letters, totals.
type queueView struct {
	Name        string      `json:"name"`
	Namespace   *string     `json:"namespace"`
	Task        *string     `json:"task"`
	CreatedAt   timestamp   `json:"createdAt"`
	Options     optionsView `json:"options"`
	NotEnforced []string    `json:"notEnforced"` // options kept without being enforced

	Partitions         []partitionView `json:"partitions"`
	ConsumerGroups     []groupView     `json:"consumerGroups"`
	Messages           int64           `json:"messages"`
	DeadLetters        int64           `json:"deadLetters"`
	OldestDeadLetterAt timestamp       `json:"oldestDeadLetterAt"`
	// Holds are the queue's and its groups' holds (GET /api/v1/holds's
	// shape), [] when none: a client sees a hold where the queue is.
	Holds []holdJSON `json:"holds"`
}

type partitionView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Messages  int64     `json:"messages"`
	CreatedAt timestamp `json:"createdAt"`
}

// groupView is a consumer group in one queue. A group appears once it has
// read the queue or has counts in it.
type groupView struct {
	Name               string    `json:"name"`
	SubscribedAt       timestamp `json:"subscribedAt"`
	Lag                int64     `json:"lag"`
	LeasedPartitions   int64     `json:"leasedPartitions"`
	DeadLetters        int64     `json:"deadLetters"`
	OldestDeadLetterAt timestamp `json:"oldestDeadLetterAt"`
	Completed          int64     `json:"completed"`
	Failed             int64     `json:"failed"`
	DeadLettered       int64     `json:"deadLettered"`
	Replayed           int64     `json:"replayed"`
	Deleted            int64     `json:"deleted"`
	Dropped            int64     `json:"dropped"`
}

func newQueueView(s broker.QueueSummary) queueView {
	v := queueView{
		Name:        s.Name,
		Namespace:   optional(s.Namespace),
		Task:        optional(s.Task),
		CreatedAt:   timestamp(s.CreatedAt),
		Options:     newOptionsView(s.Options),
		NotEnforced: notEnforced(s.Options),
		Partitions:  make([]partitionView, len(s.Partitions)),
		DeadLetters: s.Depth(),
		Holds:       holdsJSON(s.Holds),
	}
	for i, p := range s.Partitions {
		v.Partitions[i] = partitionView{ID: p.UUID, Name: p.Name, Messages: p.Messages, CreatedAt: timestamp(p.CreatedAt)}
		v.Messages += p.Messages
	}
	// Groups that read the queue and groups with counts are joined by id.
	var oldest time.Time
	index := map[int64]int{}
	for _, g := range s.Groups {
		index[g.ID] = len(v.ConsumerGroups)
		v.ConsumerGroups = append(v.ConsumerGroups, groupView{Name: g.Name, SubscribedAt: timestamp(g.SubscribedAt), Lag: g.Lag, LeasedPartitions: g.Leased})
	}
	for _, st := range s.Stats {
		i, ok := index[st.GroupID]
		if !ok {
			i = len(v.ConsumerGroups)
			v.ConsumerGroups = append(v.ConsumerGroups, groupView{Name: st.Group})
		}
		g := &v.ConsumerGroups[i]
		g.DeadLetters, g.OldestDeadLetterAt = st.Depth, timestamp(st.OldestFailedAt)
		g.Completed, g.Failed, g.DeadLettered = st.Completed, st.Failed, st.DeadLettered
		g.Replayed, g.Deleted, g.Dropped = st.Replayed, st.Deleted, st.Dropped
		if !st.OldestFailedAt.IsZero() && (oldest.IsZero() || st.OldestFailedAt.Before(oldest)) {
			oldest = st.OldestFailedAt
		}
	}
	v.OldestDeadLetterAt = timestamp(oldest)
	if v.ConsumerGroups == nil {
		v.ConsumerGroups = []groupView{}
	}
	return v
}

type queuesResponse struct {
	Queues []queueView `json:"queues"`
}

// queuesMatching reads the queues of the query's namespace and task
// (exact names; empty or absent selects any).
func (s *Server) queuesMatching(c echo.Context) ([]broker.QueueSummary, error) {
	f := broker.QueueFilter{Namespace: c.QueryParam("namespace"), Task: c.QueryParam("task")}
	if len(f.Namespace) > broker.MaxNameLength || len(f.Task) > broker.MaxNameLength {
		return nil, badRequest("namespace and task are at most %d bytes", broker.MaxNameLength)
	}
	qs, err := s.broker.QueuesMatching(c.Request().Context(), f)
	return inScope(c.Request().Context(), qs, func(q broker.QueueSummary) string { return q.Name }), err
}

// listQueues describes every queue, or those of a namespace and task
// (query namespace, task: exact names; empty or absent selects any).
func (s *Server) listQueues(c echo.Context) error {
	qs, err := s.queuesMatching(c)
	if err != nil {
		return err
	}
	out := queuesResponse{Queues: make([]queueView, len(qs))}
	for i, q := range qs {
		out.Queues[i] = newQueueView(q)
	}
	return writeJSON(c, http.StatusOK, out)
}

// showQueue describes one queue.
func (s *Server) showQueue(c echo.Context) error {
	name, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	q, err := s.broker.Queue(c.Request().Context(), name)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, newQueueView(q))
}

type deleteQueueResponse struct {
	Deleted bool   `json:"deleted"`
	Queue   string `json:"queue"`
	Existed bool   `json:"existed"`
}

// deleteQueue deletes a queue with its partitions, messages and dead
// letters. A queue that does not exist is deleted already: 200 with
// existed false, as Queen answers (delete_queue_v1), so that a client's
// cleanup of queues it may not have made goes through.
func (s *Server) deleteQueue(c echo.Context) error {
	name, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	existed := true
	if err := s.broker.DeleteQueue(c.Request().Context(), name, actor(c)); errors.Is(err, broker.ErrNotFound) {
		existed = false
	} else if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, deleteQueueResponse{Deleted: true, Queue: name, Existed: existed})
}
