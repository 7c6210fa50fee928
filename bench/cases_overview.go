package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// D9: the overview at 5,000 queues (issue 30), over HTTP: the time and
// the bytes of GET / (and of GET /charts, whose queue picker once listed
// every queue), one run of a few calls, with the load beside.

// overviewQueues is how many queues D9's store has; overviewDeep how
// many of them have dead letters.
const (
	overviewQueues = 5000
	overviewDeep   = 30
)

func caseD9(ctx context.Context, e *env) ([]Row, error) {
	o, err := e.openOurs(ctx, "overview", e.sync)
	if err != nil {
		return nil, err
	}
	defer o.close()
	for from := 0; from < overviewQueues; from += broker.MaxPushItems {
		items := make([]broker.PushItem, 0, broker.MaxPushItems)
		for i := from; i < min(from+broker.MaxPushItems, overviewQueues); i++ {
			items = append(items, broker.PushItem{Queue: fmt.Sprintf("tenant-%04d", i), Partition: "p", TransactionID: "first", Payload: json.RawMessage(`{}`)})
		}
		if _, err := o.b.Push(ctx, items); err != nil {
			return nil, err
		}
	}
	for i := range overviewDeep {
		q := fmt.Sprintf("tenant-%04d", 100+i)
		res, err := o.b.Pop(ctx, broker.PopRequest{Queue: q, Group: "billing", Batch: 10})
		if err != nil {
			return nil, err
		}
		for _, m := range res.Messages {
			if _, err := o.b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "tenant suspended", Group: "billing"}); err != nil {
				return nil, err
			}
		}
	}
	srv, err := startServer(o)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	c, err := srv.dashboardClient(ctx, o.b)
	if err != nil {
		return nil, err
	}
	defer c.CloseIdleConnections()
	get := func(path string) (time.Duration, int, error) {
		start := time.Now()
		resp, err := c.Get(srv.base + path)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return time.Since(start), int(n), err
	}
	var rows []Row
	for _, p := range []struct{ path, what string }{{"/", "GET / (the overview)"}, {"/charts", "GET /charts (info)"}} {
		if _, _, err := get(p.path); err != nil { // warm
			return nil, err
		}
		var lat []time.Duration
		var bytes int
		for range e.size(5, 3) {
			d, n, err := get(p.path)
			if err != nil {
				return nil, err
			}
			lat, bytes = append(lat, d), n
		}
		load, _ := os.ReadFile("/proc/loadavg")
		r := Row{Case: "D9", Measure: fmt.Sprintf("%s at %d queues (%d with dead letters), p50", p.what, overviewQueues, overviewDeep), Unit: "ms",
			Ours: ptr(percentile(lat, 0.5)), Reps: 1, Verdict: verdictInfo,
			Note: fmt.Sprintf("%d bytes; %d calls; load %s", bytes, len(lat), strings.Join(strings.Fields(string(load))[:3], " "))}
		rows = append(rows, r)
	}
	return rows, nil
}
