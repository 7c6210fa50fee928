package web

import (
	"math"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Queen's read-only consumer-group and status routes (queenctl's cg list,
// cg describe, lag, queue stats), answered from the counts Lazarus keeps
// (queue pages': no scan of messages). What Lazarus does not keep (the
// age of a group's oldest unread message, messages in flight) is null.

// groupListItem is a consumer group in one queue, in Queen's shape
// (get_consumer_groups_v4) with Lazarus's counts.
type groupListItem struct {
	Name                  string    `json:"name"`
	Topics                []string  `json:"topics"`
	QueueName             string    `json:"queueName"`
	Members               int       `json:"members"` // the queue's partitions: a cursor each
	PartitionsWithLag     *int64    `json:"partitionsWithLag"`
	TotalLag              int64     `json:"totalLag"`
	LagMessages           int64     `json:"lagMessages"` // queenctl's column
	MaxTimeLag            *int64    `json:"maxTimeLag"`
	State                 string    `json:"state"` // Stable: nothing unread; Lagging
	SubscriptionMode      *string   `json:"subscriptionMode"`
	SubscriptionTimestamp timestamp `json:"subscriptionTimestamp"`
	SubscriptionCreatedAt timestamp `json:"subscriptionCreatedAt"`
	LeasedPartitions      int64     `json:"leasedPartitions"`
	DeadLetters           int64     `json:"deadLetters"`
}

func newGroupListItem(q broker.QueueSummary, g broker.GroupInfo) groupListItem {
	it := groupListItem{Name: g.Name, Topics: []string{q.Name}, QueueName: q.Name, Members: len(q.Partitions), TotalLag: g.Lag, LagMessages: g.Lag,
		State: "Stable", SubscriptionTimestamp: timestamp(g.SubscribedAt), SubscriptionCreatedAt: timestamp(g.SubscribedAt), LeasedPartitions: g.Leased}
	if g.Lag > 0 {
		it.State = "Lagging"
	}
	for _, st := range q.Stats {
		if st.GroupID == g.ID {
			it.DeadLetters = st.Depth
		}
	}
	return it
}

// listGroups lists every consumer group of every queue, a row a queue and
// group, by queue then group (Queen's GET /consumer-groups).
func (s *Server) listGroups(c echo.Context) error {
	qs, err := s.broker.Queues(c.Request().Context())
	if err != nil {
		return err
	}
	qs = inScope(c.Request().Context(), qs, func(q broker.QueueSummary) string { return q.Name })
	out := []groupListItem{}
	for _, q := range qs {
		for _, g := range q.Groups {
			out = append(out, newGroupListItem(q, g))
		}
	}
	return writeJSON(c, http.StatusOK, out)
}

// showGroup describes a consumer group: an object keyed by the queues it
// reads (Queen's GET /consumer-groups/:group); a group that reads nothing
// is {}.
func (s *Server) showGroup(c echo.Context) error {
	group, err := pathParam(c, "group")
	if err != nil {
		return err
	}
	qs, err := s.broker.Queues(c.Request().Context())
	if err != nil {
		return err
	}
	qs = inScope(c.Request().Context(), qs, func(q broker.QueueSummary) string { return q.Name })
	out := map[string]groupListItem{}
	for _, q := range qs {
		for _, g := range q.Groups {
			if g.Name == group {
				out[q.Name] = newGroupListItem(q, g)
			}
		}
	}
	return writeJSON(c, http.StatusOK, out)
}

// refreshStats answers Queen's POST /stats/refresh: Lazarus's counts are
// kept as things happen, there is nothing to refresh.
func (s *Server) refreshStats(c echo.Context) error {
	return writeJSON(c, http.StatusOK, map[string]any{"success": true, "message": "statistics are live: nothing to refresh"})
}

// statusMessages are a queue's (or partition's) message counts in Queen's
// shape: total kept; pending, the most any group has not settled.
type statusMessages struct {
	Total      int64  `json:"total"`
	Pending    int64  `json:"pending"`
	Processing *int64 `json:"processing"`
}

type statusQueue struct {
	Name        string         `json:"name"`
	Namespace   *string        `json:"namespace"`
	Task        *string        `json:"task"`
	CreatedAt   timestamp      `json:"createdAt"`
	Partitions  int            `json:"partitions"`
	Messages    statusMessages `json:"messages"`
	DeadLetters int64          `json:"deadLetters"`
	// Holds: the queue's and its groups' holds, as on /resources (not
	// Queen's: a field more, which its clients pass by).
	Holds []holdJSON `json:"holds"`
}

func newStatusQueue(q broker.QueueSummary) statusQueue {
	v := statusQueue{Name: q.Name, Namespace: optional(q.Namespace), Task: optional(q.Task), CreatedAt: timestamp(q.CreatedAt), Partitions: len(q.Partitions), DeadLetters: q.Depth(),
		Holds: holdsJSON(q.Holds)}
	for _, p := range q.Partitions {
		v.Messages.Total += p.Messages
	}
	for _, g := range q.Groups {
		v.Messages.Pending = max(v.Messages.Pending, g.Lag)
	}
	return v
}

// statusQueues lists the queues with their counts (Queen's GET
// /status/queues; namespace and task filter as on /resources/queues).
func (s *Server) statusQueues(c echo.Context) error {
	qs, err := s.queuesMatching(c)
	if err != nil {
		return err
	}
	out := struct {
		Queues []statusQueue `json:"queues"`
	}{Queues: make([]statusQueue, len(qs))}
	for i, q := range qs {
		out.Queues[i] = newStatusQueue(q)
	}
	return writeJSON(c, http.StatusOK, out)
}

type statusPartition struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	CreatedAt timestamp      `json:"createdAt"`
	Messages  statusMessages `json:"messages"`
}

// statusQueueDetail is Queen's queue detail (get_queue_detail_v2):
// the queue with its config (its options), its partitions, totals, and its groups.
type statusQueueDetail struct {
	Queue struct {
		statusQueue
		Config broker.Options `json:"config"`
	} `json:"queue"`
	Partitions     []statusPartition `json:"partitions"`
	Totals         statusMessages    `json:"totals"`
	ConsumerGroups []groupListItem   `json:"consumerGroups"`
}

// statusQueue describes one queue (Queen's GET /status/queues/:queue).
func (s *Server) statusQueue(c echo.Context) error {
	name, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	q, err := s.broker.Queue(c.Request().Context(), name)
	if err != nil {
		return err
	}
	var out statusQueueDetail
	out.Queue.statusQueue = newStatusQueue(q)
	out.Queue.Config = q.Options
	out.Partitions = make([]statusPartition, len(q.Partitions))
	for i, p := range q.Partitions {
		out.Partitions[i] = statusPartition{ID: p.UUID, Name: p.Name, CreatedAt: timestamp(p.CreatedAt), Messages: statusMessages{Total: p.Messages}}
	}
	out.Totals = out.Queue.Messages
	out.ConsumerGroups = []groupListItem{}
	for _, g := range q.Groups {
		out.ConsumerGroups = append(out.ConsumerGroups, newGroupListItem(q, g))
	}
	return writeJSON(c, http.StatusOK, out)
}

// laggingPartition is a row of Queen's lagging partitions
// (get_lagging_partitions_v1), in its snake_case; what Lazarus does not
// keep (the worker, the unread count, the last consumption) is null.
type laggingPartition struct {
	ConsumerGroup      string    `json:"consumer_group"`
	QueueName          string    `json:"queue_name"`
	PartitionName      string    `json:"partition_name"`
	PartitionID        string    `json:"partition_id"`
	WorkerID           *string   `json:"worker_id"`
	OffsetLag          *int64    `json:"offset_lag"`
	TimeLagSeconds     int64     `json:"time_lag_seconds"`
	LagHours           float64   `json:"lag_hours"`
	OldestUnconsumedAt timestamp `json:"oldest_unconsumed_at"`
	LastConsumedAt     *string   `json:"last_consumed_at"`
}

// listLagging lists the partitions where a group's oldest unread message
// is older than minLagSeconds (default 3600), most behind first (Queen's
// GET /consumer-groups/lagging).
func (s *Server) listLagging(c echo.Context) error {
	minLag, err := queryInt(c, "minLagSeconds", 3600)
	if err != nil {
		return err
	}
	if minLag < 0 {
		return badRequest("minLagSeconds must be 0 or more")
	}
	ls, err := s.broker.LaggingPartitions(c.Request().Context(), time.Duration(minLag)*time.Second)
	if err != nil {
		return err
	}
	ls = inScope(c.Request().Context(), ls, func(l broker.PartitionLag) string { return l.Queue })
	out := make([]laggingPartition, len(ls))
	for i, l := range ls {
		secs := int64(l.Lag / time.Second)
		out[i] = laggingPartition{ConsumerGroup: l.Group, QueueName: l.Queue, PartitionName: l.Partition, PartitionID: l.PartitionUUID,
			TimeLagSeconds: secs, LagHours: math.Round(float64(secs)/36) / 100, OldestUnconsumedAt: timestamp(l.OldestUnread)}
	}
	return writeJSON(c, http.StatusOK, out)
}
