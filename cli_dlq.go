package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/lazarus-dlq/lazarus/client"
)

// runDLQ runs `lazarus dlq list|show|replay|delete|export`.
func runDLQ(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	verb, args, err := subcommand("dlq", args, "list", "show", "replay", "delete", "export")
	if err != nil {
		return err
	}
	switch verb {
	case "list":
		return dlqList(ctx, args, getenv, stdin, stdout, stderr)
	case "show":
		return dlqShow(ctx, args, getenv, stdin, stdout, stderr)
	case "export":
		return dlqExport(ctx, args, getenv, stdin, stdout, stderr)
	}
	return dlqBulk(ctx, verb, args, getenv, stdin, stdout, stderr)
}

// stringsFlag is a flag that may be given several times.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ", ") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// filterFlags adds the dead-letter filters (GET /api/v1/dlq's query, in
// kebab-case) to fs.
func filterFlags(fs *flag.FlagSet) *client.Filter {
	f := &client.Filter{}
	fs.StringVar(&f.Queue, "queue", "", "only this queue's dead letters")
	fs.StringVar(&f.ConsumerGroup, "consumer-group", "", "only this consumer group's")
	fs.StringVar(&f.Partition, "partition", "", "only this partition's")
	fs.StringVar(&f.From, "from", "", "failed at or after this time (RFC 3339)")
	fs.StringVar(&f.To, "to", "", "failed before this time (RFC 3339)")
	fs.StringVar(&f.Error, "error", "", "the error text contains this")
	fs.StringVar(&f.TransactionID, "transaction-id", "", "only the message with this transactionId")
	fs.StringVar(&f.Fingerprint, "fingerprint", "", "only this error group's (its fingerprint)")
	fs.StringVar(&f.ConsumerVersion, "consumer-version", "", "only those an ack of this consumer version filed")
	fs.StringVar(&f.Q, "q", "", "free text in payloads and errors (search)")
	fs.Var((*stringsFlag)(&f.Field), "field", "a payload field filter such as customer.tier=gold (again for more; docs/concepts.md, Finding dead letters)")
	return f
}

// emptyFilter says whether the filter selects by nothing.
func emptyFilter(f client.Filter) bool {
	return f.Queue == "" && f.ConsumerGroup == "" && f.Partition == "" && f.From == "" && f.To == "" && f.Error == "" && f.TransactionID == "" &&
		f.Fingerprint == "" && f.ConsumerVersion == "" && f.Q == "" && len(f.Field) == 0
}

func dlqList(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := remoteFlags("dlq list [filters] [--limit N] [--offset N | --after NEXT] [--json]",
		"Lists dead letters, newest failure first (GET /api/v1/dlq).", true, getenv, stderr)
	f := filterFlags(fs)
	var p client.PageRequest
	fs.IntVar(&p.Limit, "limit", 0, "how many (1 to 1000; default 100)")
	fs.IntVar(&p.Offset, "offset", 0, "skip this many")
	fs.StringVar(&p.After, "after", "", "go on after the page that gave this next")
	if err := parseNoArgs(fs, args, "the filters are flags"); err != nil {
		return err
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	l, err := r.c.DeadLetters(ctx, *f, p)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(l.Raw)
	}
	tw := r.table("ID", "QUEUE", "PARTITION", "CONSUMER GROUP", "FAILED AT", "RETRIES", "ERROR")
	for _, d := range l.Messages {
		row(tw, d.ID, d.Queue, d.Partition, d.ConsumerGroup, when(d.FailedAt), fmt.Sprint(d.RetryCount), clean(orDash(d.ErrorMessage), 60))
	}
	tw.Flush()
	more := ""
	if l.TotalCapped {
		more = " at least"
	}
	fmt.Fprintf(stdout, "%d shown of%s %s dead letters", len(l.Messages), more, count(l.Total))
	if l.Next != "" {
		fmt.Fprintf(stdout, "; the next page: --after %s", l.Next)
	}
	fmt.Fprintln(stdout)
	return nil
}

func dlqShow(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := remoteFlags("dlq show ID [--consumer-group G] [--json]",
		"Shows a dead letter (GET /api/v1/dlq/:id): the message's, or with --consumer-group that group's, with\n"+
			"its payload, the message's dead letters in other groups and its replays. --json adds its history.", true, getenv, stderr)
	group := fs.String("consumer-group", "", "the dead letter of this consumer group")
	id, err := parseOne(fs, args, "dead letter id")
	if err != nil {
		return err
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	d, err := r.c.DeadLetter(ctx, id, *group)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(d.Raw)
	}
	tw := r.table("FIELD", "VALUE")
	row(tw, "id", d.ID)
	row(tw, "queue", d.Queue)
	row(tw, "partition", d.Partition)
	row(tw, "consumer group", d.ConsumerGroup)
	row(tw, "transaction id", d.TransactionID)
	row(tw, "failed at", when(d.FailedAt))
	row(tw, "created at", when(d.CreatedAt))
	row(tw, "retries", fmt.Sprint(d.RetryCount))
	row(tw, "error group", d.Fingerprint)
	if d.ConsumerVersion != "" {
		row(tw, "consumer version", d.ConsumerVersion)
	}
	row(tw, "replays", fmt.Sprintf("%d of at most %d", d.Replays.Count, d.Replays.MaxReplays))
	for _, other := range d.Others {
		row(tw, "also in", other.ConsumerGroup+": "+clean(orDash(other.ErrorMessage), 60))
	}
	tw.Flush()
	fmt.Fprintf(stdout, "error:\n  %s\npayload:\n", clean(orDash(d.ErrorMessage), 0))
	var pretty strings.Builder
	if b, err := json.MarshalIndent(d.Data, "  ", "  "); err == nil {
		pretty.Write(b)
	} else {
		pretty.Write(d.Data)
	}
	fmt.Fprintf(stdout, "  %s\n", cleanLines(pretty.String()))
	return nil
}

func dlqExport(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := remoteFlags("dlq export [filters] [--format ndjson|csv] [--output FILE]",
		"Writes every dead letter the filters select (GET /api/v1/dlq/export; operators: payloads may hold\n"+
			"personal data), as NDJSON (one dead letter a line, the list's JSON) or CSV.", false, getenv, stderr)
	f := filterFlags(fs)
	format := fs.String("format", "ndjson", "ndjson or csv")
	output := fs.String("output", "", "write to this file (made, or truncated) instead of standard output")
	if err := parseNoArgs(fs, args, "the filters are flags"); err != nil {
		return err
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	w := stdout
	if *output != "" {
		file, err := os.OpenFile(*output, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // personal data: the owner's only
		if err != nil {
			return fmt.Errorf("dlq export: %w", err)
		}
		defer file.Close()
		w = file
	}
	n, err := r.c.Export(ctx, *f, *format, w)
	if err != nil {
		return r.explain(err)
	}
	if *output != "" {
		fmt.Fprintf(stderr, "wrote %s bytes to %s\n", count(n), *output)
	}
	return nil
}

// dlqBulk runs `dlq replay` and `dlq delete`: of one dead letter by id,
// of several by id (a job), or of every one a filter selects (a job,
// after a dry run and a question).
func dlqBulk(ctx context.Context, verb string, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	about := "Deletes dead letters (they can be restored for a while: the server's --restore-window). By id:\n" +
		"those of one or more messages (with --consumer-group only that group's). By filter: first a dry run\n" +
		"says how many, and where; then, asked on the terminal or with --yes, a job deletes those the dry\n" +
		"run counted (its bound: none filed later), with a progress bar on a terminal."
	if verb == "replay" {
		about = "Replays dead letters: a copy of each message goes to the end of its partition (or --to-queue,\n" +
			"--to-partition), seen by every consumer group that reads it (--mode own: only the group that gave\n" +
			"up on it). By id: one or more messages. By filter: first a dry run says how many, and where;\n" +
			"then, asked on the terminal or with --yes, a job replays those the dry run counted (its bound:\n" +
			"none filed later), with a progress bar on a terminal."
	}
	fs, o := remoteFlags("dlq "+verb+" (ID... | filters [--all]) [flags]", about, true, getenv, stderr)
	f := filterFlags(fs)
	all := fs.Bool("all", false, "with a filter that names no --queue: every queue's dead letters")
	yes := fs.Bool("yes", false, "go ahead without the question (for scripts)")
	maxCount := fs.Int64("max", 0, "refuse (exit 5) when the dry run counts more dead letters than this; 0: no limit")
	rate := fs.Int("rate", 0, "at most this many a second (0: no limit)")
	noWait := fs.Bool("no-wait", false, "start the job and return, without following it")
	var mode, toQueue, toPartition string
	var force bool
	var canary int
	if verb == "replay" {
		fs.StringVar(&mode, "mode", "", "every (default: every group that reads the partition sees the copy) or own (only the group that gave up on it)")
		fs.BoolVar(&force, "force", false, "replay messages at their queue's replay cap too (audited as forced)")
		fs.StringVar(&toQueue, "to-queue", "", "put the copies in this queue instead (made if missing)")
		fs.StringVar(&toPartition, "to-partition", "", "put the copies in this partition instead (made if missing)")
		fs.IntVar(&canary, "canary", 0, "a job by filter: begin with this many, drawn at random, and pause if they fail again")
	}
	ids, err := parseRemote(fs, args)
	if err != nil {
		return err
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	kind := client.BulkDelete
	if verb == "replay" {
		kind = client.BulkReplay
	}
	req := client.BulkRequest{Mode: mode, Rate: *rate, Force: force}
	var dest *client.Destination
	if toQueue != "" || toPartition != "" {
		dest = &client.Destination{Queue: toQueue, Partition: toPartition}
		req.Destination = dest
	}
	if len(ids) > 0 {
		if !emptyFilter(client.Filter{Queue: f.Queue, Partition: f.Partition, From: f.From, To: f.To, Error: f.Error, TransactionID: f.TransactionID,
			Fingerprint: f.Fingerprint, ConsumerVersion: f.ConsumerVersion, Q: f.Q, Field: f.Field}) || *all || *maxCount != 0 || canary != 0 {
			return usageError{errors.New("give dead letters by id or by filter, not both (by id, --consumer-group is the only filter)")}
		}
		if len(ids) == 1 && *rate == 0 && !*noWait {
			return r.one(ctx, verb, ids[0], f.ConsumerGroup, client.ReplayOptions{Mode: mode, ConsumerGroup: f.ConsumerGroup, Force: force, Destination: dest})
		}
		req.IDs, req.ConsumerGroup = ids, f.ConsumerGroup
		return r.runJob(ctx, kind, verb, req, nil, *noWait)
	}
	if emptyFilter(*f) && !*all {
		return usageError{fmt.Errorf("dlq %s: name the dead letters: ids, or a filter (--queue, or --all for every queue)", verb)}
	}
	if f.Queue == "" && !*all {
		return usageError{fmt.Errorf("dlq %s: the filter names no queue: add --queue, or --all to act on every queue's dead letters", verb)}
	}
	if canary > 0 {
		req.Canary = &client.Canary{Count: canary}
	}
	req.Filter, req.All = f, *all
	dry, err := r.c.DryRun(ctx, kind, req)
	if err != nil {
		return r.explain(err)
	}
	say := r.stdout
	if r.json {
		say = r.stderr // standard output is the JSON's
	}
	if dry.Matching == 0 {
		fmt.Fprintf(say, "No dead letter matches: nothing to %s.\n", verb)
		if r.json {
			return r.printJSON(bulkJSON(dry.Raw, nil))
		}
		return nil
	}
	if err := r.describe(ctx, say, verb, *f, dry); err != nil {
		return err
	}
	if *maxCount > 0 && dry.Matching > *maxCount {
		return exitError{exitOverMax, fmt.Errorf("the filter matches %s dead letters, more than --max %s: nothing was changed", count(dry.Matching), count(*maxCount))}
	}
	question := fmt.Sprintf("%s %s dead letters?", strings.ToUpper(verb[:1])+verb[1:], count(dry.Matching))
	if err := r.confirm(ctx, question, *yes); err != nil {
		return err
	}
	req.Bound = &dry.Bound
	return r.runJob(ctx, kind, verb, req, dry, *noWait)
}

// describeSample is how many of the newest dead letters a bulk action's
// summary reads to say where they are: the list carries their payloads
// (up to the server's payload limit each), so not every one.
const describeSample = 250

// describe says what a bulk action by filter will touch: how many dead
// letters (and messages), up to which bound, in which queues and consumer
// groups (read from the newest describeSample of the list: all of them
// when there are no more).
func (r *remote) describe(ctx context.Context, w io.Writer, verb string, f client.Filter, dry *client.DryRun) error {
	what := fmt.Sprintf("%s dead letters", count(dry.Matching))
	if verb == "replay" {
		what += fmt.Sprintf(" (%s messages)", count(dry.Messages))
	}
	fmt.Fprintf(w, "This will %s %s, those that failed at or before %s (dead letters filed later are left alone).\n", verb, what, dry.Bound.FailedAt)
	page, err := r.c.DeadLetters(ctx, f, client.PageRequest{Limit: describeSample})
	if err != nil {
		return r.explain(err)
	}
	type place struct {
		queue string
		n     int64
		group map[string]int64
	}
	var places []*place
	for _, d := range page.Messages {
		i := slices.IndexFunc(places, func(p *place) bool { return p.queue == d.Queue })
		if i < 0 {
			places = append(places, &place{queue: d.Queue, group: map[string]int64{}})
			i = len(places) - 1
		}
		places[i].n++
		places[i].group[d.ConsumerGroup]++
	}
	among := ""
	if int64(len(page.Messages)) < page.Total {
		among = fmt.Sprintf(" (among the newest %s)", count(int64(len(page.Messages))))
	}
	fmt.Fprintf(w, "Where%s:\n", among)
	for _, p := range places {
		groups := make([]string, 0, len(p.group))
		for g, n := range p.group {
			groups = append(groups, fmt.Sprintf("%s %s", clean(g, 64), count(n)))
		}
		slices.Sort(groups)
		fmt.Fprintf(w, "  queue %s: %s (consumer groups: %s)\n", clean(p.queue, 64), count(p.n), strings.Join(groups, ", "))
	}
	if verb == "replay" {
		fmt.Fprintln(w, "A replay removes each message's dead letters in every group, and, unless --mode own, every group that reads the partition gets the copy.")
	}
	return nil
}

// bulkJSON is a bulk action's --json: the dry run's answer and the job's
// (GET /api/v1/jobs/:id), each as the API wrote it; null when there was
// none.
func bulkJSON(dry, job json.RawMessage) json.RawMessage {
	null := json.RawMessage("null")
	if dry == nil {
		dry = null
	}
	if job == nil {
		job = null
	}
	b, _ := json.Marshal(struct {
		DryRun json.RawMessage `json:"dryRun"`
		Job    json.RawMessage `json:"job"`
	}{dry, job})
	return b
}

// runJob starts a bulk job and, unless noWait, follows it to its end
// and says what it did.
func (r *remote) runJob(ctx context.Context, kind, verb string, req client.BulkRequest, dry *client.DryRun, noWait bool) error {
	var dryRaw json.RawMessage
	if dry != nil {
		dryRaw = dry.Raw
	}
	started, err := r.c.StartBulk(ctx, kind, req)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("interrupted while the job was being started: it may have started (lazarus jobs list --state running shows it)")
	}
	if err != nil {
		return r.explain(err)
	}
	id := started.Job.ID
	if noWait {
		if r.json {
			return r.printJSON(bulkJSON(dryRaw, started.Raw))
		}
		fmt.Fprintf(r.stdout, "Started job %d: lazarus jobs show %d follows it.\n", id, id)
		return nil
	}
	j, err := r.waitJob(ctx, id, verb)
	if err != nil {
		return err
	}
	if r.json {
		if err := r.printJSON(bulkJSON(dryRaw, j.Raw)); err != nil {
			return err
		}
		return jobEnd(j.Job)
	}
	fmt.Fprintln(r.stdout, jobSummary(j.Job))
	return jobEnd(j.Job)
}

// jobSummary says in a line what a job did.
func jobSummary(j client.Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %d %s: %s of %s done, %s skipped, %s failed", j.ID, j.State, count(j.Done), count(j.Planned), count(j.Skipped), count(j.Failed))
	if res := j.Results; res != nil {
		fmt.Fprintf(&b, " (moved %s, duplicate %s, gone %s)", count(res.Moved), count(res.Duplicate), count(res.Gone))
	}
	if j.ArrivedSince != nil && *j.ArrivedSince > 0 {
		fmt.Fprintf(&b, "; %s filed since the dry run, left alone", count(*j.ArrivedSince))
	}
	return b.String() + "."
}

// one replays or deletes one message's dead letters at once (no job).
func (r *remote) one(ctx context.Context, verb, id, group string, o client.ReplayOptions) error {
	if verb == "delete" {
		d, err := r.c.Delete(ctx, id, group)
		if err != nil {
			return r.explain(err)
		}
		if r.json {
			return r.printJSON(d.Raw)
		}
		fmt.Fprintf(r.stdout, "Deleted %d dead letters of message %s.\n", d.Deleted, clean(id, 64))
		return nil
	}
	res, err := r.c.Replay(ctx, id, o)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(res.Raw)
	}
	fmt.Fprintf(r.stdout, "Replayed %s: %s, the copy is message %s in %s/%s.\n", clean(id, 64), res.Result, res.MessageID, clean(res.Queue, 64), clean(res.Partition, 64))
	return nil
}
