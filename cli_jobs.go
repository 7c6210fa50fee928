package main

import (
	"context"
	"fmt"
	"io"

	"github.com/lazarus-dlq/lazarus/client"
)

// runJobs runs `lazarus jobs list|show|pause|resume|cancel`.
func runJobs(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	verb, args, err := subcommand("jobs", args, "list", "show", "pause", "resume", "cancel")
	if err != nil {
		return err
	}
	if verb == "list" {
		return jobsList(ctx, args, getenv, stdin, stdout, stderr)
	}
	about := map[string]string{
		"show":   "Shows a job (GET /api/v1/jobs/:id): its counts and, for a replay, its outcome in each consumer group.",
		"pause":  "Pauses a running job; lazarus jobs resume goes on where it stopped.",
		"resume": "Resumes a paused job.",
		"cancel": "Cancels a running or paused job: what it did stays done.",
	}[verb]
	fs, o := remoteFlags("jobs "+verb+" ID [--json]", about, true, getenv, stderr)
	id, err := parseOneID(fs, args, "job id", "a job id")
	if err != nil {
		return err
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	if verb == "show" {
		j, err := r.c.Job(ctx, id)
		if err != nil {
			return r.explain(err)
		}
		if r.json {
			return r.printJSON(j.Raw)
		}
		return r.showJob(j)
	}
	act := map[string]func(context.Context, int64) (*client.JobAnswer, error){"pause": r.c.PauseJob, "resume": r.c.ResumeJob, "cancel": r.c.CancelJob}[verb]
	a, err := act(ctx, id)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(a.Raw)
	}
	fmt.Fprintln(stdout, jobSummary(a.Job))
	return nil
}

func jobsList(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := remoteFlags("jobs list [--state S] [--kind K] [--queue Q] [--limit N] [--after ID] [--json]",
		"Lists the bulk jobs, newest first (GET /api/v1/jobs).", true, getenv, stderr)
	var f client.JobFilter
	fs.StringVar(&f.State, "state", "", "running, paused, done, cancelled or failed")
	fs.StringVar(&f.Kind, "kind", "", "replay, delete or restore")
	fs.StringVar(&f.Queue, "queue", "", "only the jobs of this queue")
	fs.IntVar(&f.Limit, "limit", 0, "how many (1 to 500; default 50)")
	fs.StringVar(&f.After, "after", "", "go on after the page that gave this next (a job id)")
	if err := parseNoArgs(fs, args, ""); err != nil {
		return err
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	l, err := r.c.Jobs(ctx, f)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(l.Raw)
	}
	tw := r.table("ID", "KIND", "STATE", "QUEUE", "DONE", "PLANNED", "CREATED AT", "BY", "WHAT")
	for _, j := range l.Jobs {
		row(tw, fmt.Sprint(j.ID), j.Kind, j.State, orDash(j.Queue), count(j.Done), count(j.Planned), when(j.CreatedAt), j.Actor, clean(j.Description, 60))
	}
	tw.Flush()
	if l.Next != "" {
		fmt.Fprintf(stdout, "the next page: --after %s\n", l.Next)
	}
	return nil
}

// showJob prints a job's fields and a replay's outcomes.
func (r *remote) showJob(d *client.JobDetail) error {
	j := d.Job
	tw := r.table("FIELD", "VALUE")
	row(tw, "id", fmt.Sprint(j.ID))
	row(tw, "kind", j.Kind)
	row(tw, "state", j.State)
	if j.Reason != "" {
		row(tw, "why", j.Reason)
	}
	row(tw, "what", j.Description)
	row(tw, "queue", orDash(j.Queue))
	row(tw, "by", j.Actor)
	row(tw, "created at", when(j.CreatedAt))
	row(tw, "finished at", when(j.FinishedAt))
	row(tw, "planned", count(j.Planned))
	row(tw, "done", count(j.Done))
	row(tw, "skipped", count(j.Skipped))
	row(tw, "failed", count(j.Failed))
	if j.Results != nil {
		row(tw, "results", fmt.Sprintf("moved %s, duplicate %s, gone %s", count(j.Results.Moved), count(j.Results.Duplicate), count(j.Results.Gone)))
	}
	if j.ArrivedSince != nil {
		row(tw, "filed since its bound", count(*j.ArrivedSince))
	}
	row(tw, "dashboard", r.c.Server()+j.URL)
	tw.Flush()
	if len(d.Outcomes) > 0 {
		fmt.Fprintln(r.stdout)
		tw = r.table("CONSUMER GROUP", "REPLAYED", "SUCCEEDED", "FAILED AGAIN", "PENDING")
		for _, o := range d.Outcomes {
			row(tw, o.ConsumerGroup, count(o.Replayed), count(o.Succeeded), count(o.Failed), count(o.Pending))
		}
		tw.Flush()
	}
	return nil
}
