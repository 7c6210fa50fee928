package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/lazarus-dlq/lazarus/client"
)

// runGroups runs `lazarus groups list|show|set`: error groups and their
// state (SPEC section 7).
func runGroups(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	verb, args, err := subcommand("groups", args, "list", "show", "set")
	if err != nil {
		return err
	}
	switch verb {
	case "list":
		return groupsList(ctx, args, getenv, stdin, stdout, stderr)
	case "show":
		return groupsShow(ctx, args, getenv, stdin, stdout, stderr)
	}
	return groupsSet(ctx, args, getenv, stdin, stdout, stderr)
}

func groupsList(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := remoteFlags("groups list [--queue Q] [--consumer-group G] [--state S] [--owner U] [--consumer-version V] [--limit N] [--json]",
		"Lists error groups (GET /api/v1/error-groups): open first (regressed first among them), then\n"+
			"acknowledged, resolved and ignored.", true, getenv, stderr)
	var f client.ErrorGroupFilter
	fs.StringVar(&f.Queue, "queue", "", "only this queue's")
	fs.StringVar(&f.ConsumerGroup, "consumer-group", "", "only this consumer group's")
	fs.StringVar(&f.State, "state", "", "open, acknowledged, resolved or ignored")
	fs.StringVar(&f.Owner, "owner", "", "only those this user owns")
	fs.StringVar(&f.ConsumerVersion, "consumer-version", "", "only those this consumer version filed into")
	fs.IntVar(&f.Limit, "limit", 0, "how many (default 50)")
	if err := parseNoArgs(fs, args, ""); err != nil {
		return err
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	l, err := r.c.ErrorGroups(ctx, f)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(l.Raw)
	}
	r.groupsTable(l.ErrorGroups)
	return nil
}

// groupsTable prints error groups, one a row.
func (r *remote) groupsTable(gs []client.ErrorGroup) {
	tw := r.table("STATE", "QUEUE", "CONSUMER GROUP", "DEAD LETTERS", "OWNER", "LAST SEEN", "FINGERPRINT")
	for _, g := range gs {
		state := g.State
		if g.Regressed {
			state += " (regressed)"
		}
		row(tw, state, g.Queue, g.ConsumerGroup, count(g.DeadLetters), orDash(g.Owner), when(g.LastSeen), clean(g.Fingerprint, 60))
	}
	tw.Flush()
}

func groupsShow(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := remoteFlags("groups show FINGERPRINT --queue Q [--consumer-group G] [--json]",
		"Shows an error group (GET /api/v1/error-groups/:fingerprint) with its funnel and history.", true, getenv, stderr)
	queue := fs.String("queue", "", "the queue of the group (required)")
	group := fs.String("consumer-group", "", "its consumer group (needed when several have the fingerprint)")
	fp, err := parseOne(fs, args, "fingerprint (quote it: it holds spaces)")
	if err != nil {
		return err
	}
	if *queue == "" {
		return usageError{fmt.Errorf("groups show needs --queue: a fingerprint names an error group within a queue")}
	}
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	g, err := r.c.ErrorGroup(ctx, fp, *queue, *group)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(g.Raw)
	}
	tw := r.table("FIELD", "VALUE")
	row(tw, "fingerprint", g.Fingerprint)
	row(tw, "queue", g.Queue)
	row(tw, "consumer group", g.ConsumerGroup)
	row(tw, "state", g.State)
	row(tw, "owner", orDash(g.Owner))
	row(tw, "note", clean(orDash(g.Note), 200))
	row(tw, "link", orDash(g.Link))
	row(tw, "dead letters", count(g.DeadLetters))
	row(tw, "first seen", when(g.FirstSeen))
	row(tw, "last seen", when(g.LastSeen))
	life := g.Funnel.Life
	row(tw, "funnel", fmt.Sprintf("filed %s, replayed %s (succeeded %s, failed again %s, pending %s), deleted %s, expired %s",
		count(life.Filed), count(life.Replayed), count(life.Succeeded), count(life.FailedAgain), count(g.Pending), count(life.Deleted), count(life.Expired)))
	row(tw, "sample error", clean(orDash(g.SampleError), 120))
	tw.Flush()
	if len(g.History) > 0 {
		fmt.Fprintln(stdout)
		tw = r.table("AT", "BY", "FROM", "TO", "WHY")
		for _, h := range g.History {
			row(tw, when(h.At), h.Actor, h.From, h.To, clean(h.Why, 80))
		}
		tw.Flush()
	}
	return nil
}

func groupsSet(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, o := remoteFlags("groups set FINGERPRINT STATE --queue Q [--consumer-group G] [flags]",
		"Changes an error group's state (POST /api/v1/error-groups/:fingerprint/state; operators): open,\n"+
			"acknowledged (someone is on it: --owner), resolved (fixed: --note, --version; refused while\n"+
			"replayed copies are pending or failed again, exit 7, unless --force) or ignored (--until a time,\n"+
			"--until-count more dead letters, or for ever). Without --consumer-group: in every consumer group\n"+
			"of the queue that has the fingerprint. --owner, --note, --link, --version: \"\" clears.", true, getenv, stderr)
	var s client.StateChange
	fs.StringVar(&s.Queue, "queue", "", "the queue of the group (required)")
	fs.StringVar(&s.ConsumerGroup, "consumer-group", "", "only this consumer group's")
	owner := fs.String("owner", "", "who is on it (a user)")
	note := fs.String("note", "", "a note (plain text)")
	link := fs.String("link", "", "a link (http or https)")
	version := fs.String("version", "", "resolved: the consumer version with the fix")
	fs.StringVar(&s.Until, "until", "", "ignored: until this time (RFC 3339)")
	fs.Int64Var(&s.UntilCount, "until-count", 0, "ignored: until this many more dead letters")
	fs.BoolVar(&s.Force, "force", false, "resolve even while replayed copies are pending or failed again")
	pos, err := parseRemote(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError{fmt.Errorf("groups set takes a fingerprint (quoted) and a state (%s)", strings.Join(groupStates, ", "))}
	}
	fp, state := pos[0], pos[1]
	s.State = state
	if s.Queue == "" {
		return usageError{fmt.Errorf("groups set needs --queue: a fingerprint names an error group within a queue")}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "owner":
			s.Owner = owner
		case "note":
			s.Note = note
		case "link":
			s.Link = link
		case "version":
			s.Version = version
		}
	})
	r, err := o.connect(getenv, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	l, err := r.c.SetErrorGroupState(ctx, fp, s)
	if err != nil {
		return r.explain(err)
	}
	if r.json {
		return r.printJSON(l.Raw)
	}
	r.groupsTable(l.ErrorGroups)
	return nil
}

// groupStates are the states an error group may be set to.
var groupStates = []string{client.StateOpen, client.StateAcknowledged, client.StateResolved, client.StateIgnored}
