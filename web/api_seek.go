package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// seekRequest is Queen's seek body: toEnd, or a timestamp (RFC 3339).
type seekRequest struct {
	ToEnd     bool   `json:"toEnd"`
	Timestamp string `json:"timestamp"`
}

// seekResponse is Queen's answer to a seek (seek_consumer_group_v1), and
// the live leases it ended.
type seekResponse struct {
	Success           bool      `json:"success"`
	ConsumerGroup     string    `json:"consumerGroup"`
	QueueName         string    `json:"queueName"`
	SeekToEnd         bool      `json:"seekToEnd"`
	TargetTimestamp   timestamp `json:"targetTimestamp"` // null with toEnd
	PartitionsUpdated int64     `json:"partitionsUpdated"`
	LeasesEnded       int64     `json:"leasesEnded"`
}

// seekGroup moves a consumer group's cursors in every partition of a
// queue to the end or to a time (Queen's seekConsumerGroup): the group
// reads again from the first message pushed at or after the time.
func (s *Server) seekGroup(c echo.Context) error {
	group, queue, err := groupAndQueue(c)
	if err != nil {
		return err
	}
	var req seekRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if !req.ToEnd && req.Timestamp == "" {
		return badRequest("Must specify either 'toEnd': true or 'timestamp'")
	}
	r := broker.SeekRequest{Group: group, Queue: queue, ToEnd: req.ToEnd, Actor: actor(c)}
	if !req.ToEnd {
		if r.At, err = parseTime("timestamp", req.Timestamp); err != nil {
			return err
		}
	}
	res, err := s.broker.SeekGroup(c.Request().Context(), r)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, seekResponse{Success: true, ConsumerGroup: group, QueueName: queue, SeekToEnd: req.ToEnd,
		TargetTimestamp: timestamp(r.At), PartitionsUpdated: res.Partitions, LeasesEnded: res.Leases})
}

// seekPartitionResponse is Queen's answer to a partition's seek
// (seek_partition_v1).
type seekPartitionResponse struct {
	Success       bool      `json:"success"`
	ConsumerGroup string    `json:"consumerGroup"`
	QueueName     string    `json:"queueName"`
	PartitionName string    `json:"partitionName"`
	Updated       bool      `json:"updated"`
	CursorMovedTo timestamp `json:"cursorMovedTo"` // the time of the seek
	LeasesEnded   int64     `json:"leasesEnded"`
}

// seekPartition moves a consumer group's cursor in one partition to its
// end (Queen's seek of a partition: to the end only; a body is not read,
// as Queen does not). A partition that does not exist is 404.
func (s *Server) seekPartition(c echo.Context) error {
	group, queue, err := groupAndQueue(c)
	if err != nil {
		return err
	}
	partition, err := pathParam(c, "partition")
	if err != nil {
		return err
	}
	res, err := s.broker.SeekGroup(c.Request().Context(), broker.SeekRequest{Group: group, Queue: queue, Partition: partition, ToEnd: true, Actor: actor(c)})
	if err != nil {
		return err
	}
	out := seekPartitionResponse{Success: true, ConsumerGroup: group, QueueName: queue, PartitionName: partition, Updated: res.Partitions > 0, LeasesEnded: res.Leases}
	if out.Updated {
		out.CursorMovedTo = timestamp(s.clock.Now())
	}
	return writeJSON(c, http.StatusOK, out)
}

// groupAndQueue reads the :group and :queue of a path.
func groupAndQueue(c echo.Context) (group, queue string, err error) {
	if group, err = pathParam(c, "group"); err != nil {
		return "", "", err
	}
	if queue, err = pathParam(c, "queue"); err != nil {
		return "", "", err
	}
	return group, queue, nil
}
