package main

import (
	"context"
	"fmt"
	"io"

	"github.com/lazarus-dlq/lazarus/client"
)

// runHold runs `lazarus hold --queue Q [--consumer-group G] --reason WHY`
// and `lazarus hold list` (SPEC section 6).
func runHold(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "list" {
		return holdList(ctx, args[1:], getenv, stdin, stdout, stderr)
	}
	fs, o := remoteFlags("hold --queue Q [--consumer-group G] --reason WHY [--json] | hold list [--queue Q] [--consumer-group G] [--json]",
		"Holds the deliveries of a queue, or of one consumer group of it (POST /api/v1/holds; operators):\n"+
			"pops deliver nothing until it is released (lazarus release ID); pushes are taken as usual and no\n"+
			"retry is spent. Holding what is held already is safe: it says so. `hold list` lists the holds.", true, getenv, stderr)
	var h client.HoldRequest
	fs.StringVar(&h.Queue, "queue", "", "the queue to hold (required)")
	fs.StringVar(&h.ConsumerGroup, "consumer-group", "", "hold only this consumer group's deliveries")
	fs.StringVar(&h.Reason, "reason", "", "why (required; shown wherever the queue appears, audited)")
	if err := parseNoArgs(fs, args, "name the queue with --queue"); err != nil {
		return err
	}
	if h.Queue == "" || h.Reason == "" {
		return usageError{fmt.Errorf("hold needs --queue and --reason")}
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	a, err := r.c.Hold(ctx, h)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(a.Raw)
	}
	what := "queue " + clean(a.Queue, 64)
	if a.ConsumerGroup != nil {
		what += ", consumer group " + clean(*a.ConsumerGroup, 64)
	}
	if a.Existing {
		fmt.Fprintf(stdout, "Held already: %s, hold %d by %s since %s (%s).\n", what, a.ID, clean(a.By, 64), when(a.Since), clean(a.Reason, 120))
		return nil
	}
	fmt.Fprintf(stdout, "Held %s: hold %d (lazarus release %d ends it).\n", what, a.ID, a.ID)
	return nil
}

func holdList(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := remoteFlags("hold list [--queue Q] [--consumer-group G] [--json]", "Lists the holds (GET /api/v1/holds).", true, getenv, stderr)
	queue := fs.String("queue", "", "only this queue's")
	group := fs.String("consumer-group", "", "only this consumer group's")
	if err := parseNoArgs(fs, args, ""); err != nil {
		return err
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	l, err := r.c.Holds(ctx, *queue, *group)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(l.Raw)
	}
	tw := r.table("ID", "QUEUE", "CONSUMER GROUP", "KIND", "WAITING", "BY", "SINCE", "REASON")
	for _, h := range l.Holds {
		row(tw, fmt.Sprint(h.ID), h.Queue, orDash(h.ConsumerGroup), h.Kind, count(h.Waiting), h.By, when(h.Since), clean(h.Reason, 60))
	}
	tw.Flush()
	return nil
}

// runRelease runs `lazarus release ID`.
func runRelease(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := remoteFlags("release ID [--json]",
		"Releases a hold (DELETE /api/v1/holds/:id; operators): waiting pops are served at once.", true, getenv, stderr)
	id, err := parseOneID(fs, args, "hold id (lazarus hold list shows them)", "a hold id")
	if err != nil {
		return err
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	a, err := r.c.Release(ctx, id)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(a.Raw)
	}
	fmt.Fprintf(stdout, "Released hold %d of queue %s.\n", a.Hold.ID, clean(a.Hold.Queue, 64))
	return nil
}
