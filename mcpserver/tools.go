package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lazarus-dlq/lazarus/client"
)

// The tools' inputs. Their fields become the tools' input schemas (a
// field without omitempty is required); the descriptions are what an
// agent reads to fill them in.

// Filter selects dead letters, as GET /api/v1/dlq's query and a bulk
// action's filter do.
type Filter struct {
	Queue           string   `json:"queue,omitempty" jsonschema:"the queue's name"`
	ConsumerGroup   string   `json:"consumerGroup,omitempty" jsonschema:"the consumer group that gave up on the messages"`
	Partition       string   `json:"partition,omitempty" jsonschema:"the partition's name"`
	From            string   `json:"from,omitempty" jsonschema:"failed at or after this time (RFC 3339)"`
	To              string   `json:"to,omitempty" jsonschema:"failed at or before this time (RFC 3339)"`
	Error           string   `json:"error,omitempty" jsonschema:"the error text contains this"`
	TransactionID   string   `json:"transactionId,omitempty" jsonschema:"the message's transaction id"`
	Fingerprint     string   `json:"fingerprint,omitempty" jsonschema:"the error group's fingerprint"`
	ConsumerVersion string   `json:"consumerVersion,omitempty" jsonschema:"the consumer version the ack filed it with (exactly)"`
	Q               string   `json:"q,omitempty" jsonschema:"free text in payloads and errors"`
	Field           []string `json:"field,omitempty" jsonschema:"payload field filters such as customer.tier=gold"`
}

func (f Filter) client() client.Filter {
	return client.Filter{Queue: f.Queue, ConsumerGroup: f.ConsumerGroup, Partition: f.Partition, From: f.From, To: f.To,
		Error: f.Error, TransactionID: f.TransactionID, Fingerprint: f.Fingerprint, ConsumerVersion: f.ConsumerVersion, Q: f.Q, Field: f.Field}
}

type searchIn struct {
	Query string `json:"query" jsonschema:"a message or dead letter id, a transaction id, a trace id, or text"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many matches (default 50)"`
}

type listDeadLettersIn struct {
	Filter
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 1000)"`
	Offset int    `json:"offset,omitempty" jsonschema:"skip this many"`
	After  string `json:"after,omitempty" jsonschema:"the next of the page before"`
}

type deadLetterIn struct {
	ID            string `json:"id" jsonschema:"the dead-lettered message's id"`
	ConsumerGroup string `json:"consumerGroup,omitempty" jsonschema:"the consumer group whose dead letter (default: the first; the others are listed)"`
}

type listErrorGroupsIn struct {
	Queue           string `json:"queue,omitempty" jsonschema:"the queue's name"`
	ConsumerGroup   string `json:"consumerGroup,omitempty" jsonschema:"the consumer group"`
	State           string `json:"state,omitempty" jsonschema:"open, acknowledged, resolved or ignored"`
	Owner           string `json:"owner,omitempty" jsonschema:"the owner's name"`
	ConsumerVersion string `json:"consumerVersion,omitempty" jsonschema:"the consumer version"`
	Limit           int    `json:"limit,omitempty" jsonschema:"at most this many (default 50)"`
}

type errorGroupIn struct {
	Fingerprint   string `json:"fingerprint" jsonschema:"the error group's fingerprint"`
	Queue         string `json:"queue" jsonschema:"the queue's name"`
	ConsumerGroup string `json:"consumerGroup,omitempty" jsonschema:"the consumer group (default: the queue's one group that has it)"`
}

type listJobsIn struct {
	State string `json:"state,omitempty" jsonschema:"running, paused, done, cancelled or failed"`
	Kind  string `json:"kind,omitempty" jsonschema:"replay, delete or restore"`
	Queue string `json:"queue,omitempty" jsonschema:"the queue's name"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many (default 50)"`
	After string `json:"after,omitempty" jsonschema:"the next of the page before"`
}

type jobIn struct {
	ID int64 `json:"id" jsonschema:"the job's id"`
}

type listHoldsIn struct {
	Queue         string `json:"queue,omitempty" jsonschema:"the queue's name"`
	ConsumerGroup string `json:"consumerGroup,omitempty" jsonschema:"the consumer group"`
}

type noIn struct{}

// addReadOnly adds the tools any role may call.
func (t tools) addReadOnly(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "search", Annotations: readOnly("Search messages and dead letters"),
		Description: "Find messages and dead letters by id, transaction id, trace id or text, as the dashboard's search box does."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.Search(ctx, in.Query, in.Limit)
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_dead_letters", Annotations: readOnly("List dead letters"),
		Description: "List dead letters, newest failure first, by the API's filters (queue, consumer group, partition, " +
			"time, error text, transaction id, fingerprint, consumer version, free text, payload fields), with a total."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in listDeadLettersIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.DeadLetters(ctx, in.Filter.client(), client.PageRequest{Limit: in.Limit, Offset: in.Offset, After: in.After})
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "get_dead_letter", Annotations: readOnly("Read a dead letter"),
		Description: "Read one dead letter with its payload, error and history, the message's dead letters in other groups, " +
			"and its replay count. Cite it as lazarus://dead-letters/{id}."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in deadLetterIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.DeadLetter(ctx, in.ID, in.ConsumerGroup)
			return linked(r.Raw, err, &mcp.ResourceLink{URI: DeadLetterURI(r.ID), Name: "dead-letter " + r.ID, MIMEType: "application/json"})
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_error_groups", Annotations: readOnly("List error groups"),
		Description: "List error groups (dead letters of one fingerprint in a queue and consumer group) with their state, " +
			"owner, counts and what became of their replays: open first, regressed first among them."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in listErrorGroupsIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.ErrorGroups(ctx, client.ErrorGroupFilter{Queue: in.Queue, ConsumerGroup: in.ConsumerGroup, State: in.State,
				Owner: in.Owner, ConsumerVersion: in.ConsumerVersion, Limit: in.Limit})
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "get_error_group", Annotations: readOnly("Read an error group"),
		Description: "Read one error group with its history. Cite it as lazarus://error-groups/{queue}/{consumerGroup}/{fingerprint}."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in errorGroupIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.ErrorGroup(ctx, in.Fingerprint, in.Queue, in.ConsumerGroup)
			return linked(r.Raw, err, &mcp.ResourceLink{URI: ErrorGroupURI(r.Queue, r.ConsumerGroup, r.Fingerprint),
				Name: "error-group " + r.Fingerprint, MIMEType: "application/json"})
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_jobs", Annotations: readOnly("List jobs"),
		Description: "List bulk replay, delete and restore jobs, newest first, with how far each got."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in listJobsIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.Jobs(ctx, client.JobFilter{State: in.State, Kind: in.Kind, Queue: in.Queue, Limit: in.Limit, After: in.After})
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "get_job", Annotations: readOnly("Read a job"),
		Description: "Read one job: its state and counts, a replay's outcomes per consumer group and the copies that failed again."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in jobIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.Job(ctx, in.ID)
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_holds", Annotations: readOnly("List holds"),
		Description: "List the holds: queues, or consumer groups of them, whose deliveries are stopped, and how many messages wait."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in listHoldsIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.Holds(ctx, in.Queue, in.ConsumerGroup)
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "status", Annotations: readOnly("Queue status"),
		Description: "A summary of the broker: each queue with its partitions, messages (total and pending), dead letters and holds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.QueueStatus(ctx)
			return answer(r.Raw, err)
		})
}

// The operator tools' inputs.

type dryRunIn struct {
	Action string `json:"action" jsonschema:"replay or delete: what the bulk action would do"`
	Filter Filter `json:"filter" jsonschema:"the dead letters the bulk action would touch"`
	All    bool   `json:"all,omitempty" jsonschema:"true to let a filter that names no queue match every queue"`
}

type bulkIn struct {
	Filter Filter        `json:"filter" jsonschema:"the same filter as the dry run's"`
	All    bool          `json:"all,omitempty" jsonschema:"true to let a filter that names no queue match every queue (as in the dry run)"`
	Bound  *client.Bound `json:"bound,omitempty" jsonschema:"the bound the dry run answered, unchanged: required"`
}

type bulkReplayIn struct {
	bulkIn
	Mode  string `json:"mode,omitempty" jsonschema:"every (default: every consumer group gets the copy) or own (only the group that gave up)"`
	Rate  int    `json:"rate,omitempty" jsonschema:"at most this many replays a second (default: no limit)"`
	Force bool   `json:"force,omitempty" jsonschema:"replay past the queue's replay cap"`
}

type replayIn struct {
	ID            string `json:"id" jsonschema:"the dead-lettered message's id"`
	Mode          string `json:"mode,omitempty" jsonschema:"every (default) or own: only consumerGroup gets the copy"`
	ConsumerGroup string `json:"consumerGroup,omitempty" jsonschema:"with mode own: the group that gave up on it"`
	Force         bool   `json:"force,omitempty" jsonschema:"replay past the queue's replay cap"`
}

type holdIn struct {
	Queue         string `json:"queue" jsonschema:"the queue to hold"`
	ConsumerGroup string `json:"consumerGroup,omitempty" jsonschema:"only this consumer group's deliveries (default: the whole queue)"`
	Reason        string `json:"reason,omitempty" jsonschema:"why, for the people who see the hold"`
}

type stateIn struct {
	Fingerprint   string  `json:"fingerprint" jsonschema:"the error group's fingerprint"`
	Queue         string  `json:"queue" jsonschema:"the queue's name"`
	ConsumerGroup string  `json:"consumerGroup,omitempty" jsonschema:"the consumer group (default: every group of the queue that has it)"`
	State         string  `json:"state" jsonschema:"open, acknowledged, resolved or ignored"`
	Owner         *string `json:"owner,omitempty" jsonschema:"the owner (empty text clears it; absent keeps it)"`
	Note          *string `json:"note,omitempty" jsonschema:"a note (empty text clears it; absent keeps it)"`
	Link          *string `json:"link,omitempty" jsonschema:"a link to an issue (empty text clears it; absent keeps it)"`
	Until         string  `json:"until,omitempty" jsonschema:"ignored: until this time (RFC 3339)"`
	UntilCount    int64   `json:"untilCount,omitempty" jsonschema:"ignored: until this many more are filed"`
	Force         bool    `json:"force,omitempty" jsonschema:"resolve although replayed copies are pending or failed again"`
}

// errNoBound is a bulk write without the bound of a dry run.
func errNoBound(tool string) error {
	return fmt.Errorf("refused: %s needs the bound of a dry run. Call dry_run with the same action and filter first, "+
		"tell the user how many dead letters it matched, then call %s again with its bound unchanged", tool, tool)
}

// addOperator adds the tools only an operator's or admin's token is
// offered.
func (t tools) addOperator(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "dry_run", Annotations: readOnly("Count a bulk action"),
		Description: "Count what a bulk replay or delete by filter would touch, changing nothing: matching (dead letters), " +
			"messages, and the bound that freezes that set. replay_dead_letters and delete_dead_letters need this bound."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in dryRunIn) (*mcp.CallToolResult, any, error) {
			if in.Action != client.BulkReplay && in.Action != client.BulkDelete {
				return nil, nil, fmt.Errorf("action %q: want replay or delete", in.Action)
			}
			f := in.Filter.client()
			r, err := t.c.DryRun(ctx, in.Action, client.BulkRequest{Filter: &f, All: in.All})
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "replay_dead_letter", Annotations: writes("Replay a dead letter", false, true),
		Description: "Replay one dead-lettered message: a copy goes to the end of its partition. Sent again, it finds the copy there (duplicate)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in replayIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.Replay(ctx, in.ID, client.ReplayOptions{Mode: in.Mode, ConsumerGroup: in.ConsumerGroup, Force: in.Force})
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_dead_letter", Annotations: writes("Delete a dead letter", true, true),
		Description: "Delete a message's dead letters (only consumerGroup's when given)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in deadLetterIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.Delete(ctx, in.ID, in.ConsumerGroup)
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "replay_dead_letters", Annotations: writes("Replay dead letters by filter", false, true),
		Description: "Replay every dead letter a filter matches, as a job. REQUIRES the bound of a dry run made before it: " +
			"call dry_run with action replay and the same filter, show the user its count, then pass its bound unchanged; " +
			"without a bound this tool refuses. Only the dead letters at or below the bound are replayed (none filed since). " +
			"Answers the job when it ends (or as it is after 30 seconds: follow it with get_job)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in bulkReplayIn) (*mcp.CallToolResult, any, error) {
			return t.bulk(ctx, "replay_dead_letters", client.BulkReplay, in.bulkIn, client.BulkRequest{Mode: in.Mode, Rate: in.Rate, Force: in.Force})
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_dead_letters", Annotations: writes("Delete dead letters by filter", true, true),
		Description: "Delete every dead letter a filter matches, as a job. REQUIRES the bound of a dry run made before it: " +
			"call dry_run with action delete and the same filter, show the user its count, then pass its bound unchanged; " +
			"without a bound this tool refuses. Only the dead letters at or below the bound are deleted (none filed since). " +
			"Answers the job when it ends (or as it is after 30 seconds: follow it with get_job)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in bulkIn) (*mcp.CallToolResult, any, error) {
			return t.bulk(ctx, "delete_dead_letters", client.BulkDelete, in, client.BulkRequest{})
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hold", Annotations: writes("Hold a queue", false, true),
		Description: "Stop the deliveries of a queue, or of one consumer group of it, until the hold is released. Holding what is held already answers the hold there."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in holdIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.Hold(ctx, client.HoldRequest{Queue: in.Queue, ConsumerGroup: in.ConsumerGroup, Reason: in.Reason})
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "release_hold", Annotations: writes("Release a hold", false, false),
		Description: "Release a hold (its id from list_holds): deliveries resume."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in jobIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.Release(ctx, in.ID)
			return answer(r.Raw, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "set_error_group_state", Annotations: writes("Set an error group's state", false, true),
		Description: "Set an error group's state (open, acknowledged, resolved, ignored), owner, note or link. " +
			"A resolve while replayed copies are pending or failed again is refused unless force."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in stateIn) (*mcp.CallToolResult, any, error) {
			r, err := t.c.SetErrorGroupState(ctx, in.Fingerprint, client.StateChange{Queue: in.Queue, ConsumerGroup: in.ConsumerGroup,
				State: in.State, Owner: in.Owner, Note: in.Note, Link: in.Link, Until: in.Until, UntilCount: in.UntilCount, Force: in.Force})
			return answer(r.Raw, err)
		})
}

// bulk starts a bulk action by filter on a dry run's bound and waits a
// while for its job to end.
func (t tools) bulk(ctx context.Context, tool, kind string, in bulkIn, r client.BulkRequest) (*mcp.CallToolResult, any, error) {
	if in.Bound == nil || strings.TrimSpace(in.Bound.FailedAt) == "" {
		return nil, nil, errNoBound(tool)
	}
	f := in.Filter.client()
	r.Filter, r.All, r.Bound = &f, in.All, in.Bound
	started, err := t.c.StartBulk(ctx, kind, r)
	if err != nil {
		return nil, nil, explain(err)
	}
	wctx, cancel := context.WithTimeout(ctx, t.o.JobWait)
	defer cancel()
	j, err := t.c.WaitJob(wctx, started.Job.ID, t.o.JobPoll, nil)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		// Still running: the job as it is now, for get_job to follow.
		j, err = t.c.Job(ctx, started.Job.ID)
	}
	if err != nil {
		return nil, nil, explain(err)
	}
	return nil, json.RawMessage(j.Raw), nil
}
