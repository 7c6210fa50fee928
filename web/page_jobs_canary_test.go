package web

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// canaryJob is a replay job of 200 with a canary of 5 in state, its
// copies' outcomes as given (none: not replayed yet).
func canaryJob(jobState, state string, outcomes ...string) broker.Job {
	at := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	c := &broker.JobCanary{Canary: broker.Canary{Count: 5, SettleSeconds: 120, MaxFailed: 0}, State: state, DrawnAt: at, Until: at.Add(2 * time.Minute)}
	for i, o := range outcomes {
		cp := broker.CanaryCopy{DeadLetterID: "0193a0b0-0000-7000-8000-00000000000" + string(rune('1'+i)), Group: "billing", Queue: "payments",
			Partition: "p1", TransactionID: "dlq:charge-" + string(rune('a'+i)), Outcome: o}
		if o == "failed" {
			cp.Error = "gateway timeout <b>again</b>\nat line 2"
		}
		c.Copies = append(c.Copies, cp)
	}
	if state == broker.CanaryFailed {
		c.Reason = "canary: 1 of 5 failed again"
	}
	return broker.Job{ID: 7, Kind: broker.JobReplay, State: jobState, Queue: "payments", Planned: 200, Canary: c}
}

func renderJob(t *testing.T, j broker.Job) (*goquery.Document, string) {
	t.Helper()
	d := views.JobDetail{ID: j.ID, URL: "/jobs/7", Kind: j.Kind, State: j.State, Planned: j.Planned, Canary: canaryStep(j)}
	var b bytes.Buffer
	if err := views.JobProgress(d).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	return doc, b.String()
}

func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// The job page shows the canary as step 1 in each of its states, then
// the rest: what it waits for, each copy's outcome, the one that failed
// again marked and linked, the reason of the pause.
func TestJobPageShowsTheCanaryInEachState(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		job          broker.Job
		summary      string
		rest         string
		rows, failed int
	}{
		{"Drawn", canaryJob(broker.JobRunning, broker.CanaryDrawn), "Drawing 5 of the job's dead letters at random", "Waits for the canary.", 0, 0},
		{"Settling", canaryJob(broker.JobRunning, broker.CanarySettling, "succeeded", "succeeded", "pending", "pending", "pending"),
			"waiting for their outcomes until 2026-12-02 16:02:00.000 UTC (up to 120 s): 2 succeeded, 0 failed again, 3 pending", "Waits for the canary.", 5, 0},
		{"Passed", canaryJob(broker.JobRunning, broker.CanaryPassed, "succeeded", "succeeded", "succeeded", "succeeded", "succeeded"),
			"Passed: 5 succeeded, 0 failed again, 0 pending; at most 0 may fail again.", "Being replayed at the job's rate.", 5, 0},
		{"Failed", canaryJob(broker.JobPaused, broker.CanaryFailed, "succeeded", "failed", "succeeded", "succeeded", "succeeded"),
			"canary: 1 of 5 failed again (at most 0 may): the job paused before replaying the rest. Fix what failed, then Resume", "Waits: Resume replays the rest", 5, 1},
		{"ResumedAfterFailing", canaryJob(broker.JobDone, broker.CanaryFailed, "succeeded", "failed", "succeeded", "succeeded", "succeeded"),
			"canary: 1 of 5 failed again (at most 0 may): the job paused before replaying the rest, and was resumed.", "Replayed: the job is done.", 5, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, html := renderJob(t, tc.job)
			if strings.Contains(html, "<b>again</b>") {
				t.Fatal("a copy's error rendered as markup")
			}
			badge := map[string]string{"Drawn": "drawing", "Settling": "settling", "Passed": "passed", "Failed": "failed: job paused", "ResumedAfterFailing": "failed, then resumed"}[tc.name]
			if got := flat(d.Find(`[data-testid="canary-state"]`).Text()); got != badge {
				t.Errorf("state badge %q, want %q", got, badge)
			}
			step := d.Find(`[data-testid="canary-step"]`)
			if st, _ := step.Attr("data-state"); st != tc.job.Canary.State {
				t.Errorf("step state %q", st)
			}
			if !strings.Contains(flat(step.Find("h2").Text()), "Step 1 · Canary: 5 dead letters at random") {
				t.Errorf("heading %q", flat(step.Find("h2").Text()))
			}
			if got := flat(d.Find(`[data-testid="canary-summary"]`).Text()); !strings.Contains(got, tc.summary) {
				t.Errorf("summary %q, want %q in it", got, tc.summary)
			}
			rest := flat(d.Find(`[data-testid="canary-rest"]`).Text())
			if !strings.Contains(rest, "Step 2 · The rest: ") || !strings.Contains(rest, tc.rest) {
				t.Errorf("rest %q, want %q in it", rest, tc.rest)
			}
			rows := d.Find(`[data-testid="canary-copies"] tbody tr`)
			failed := d.Find(`[data-testid="canary-failed-row"]`)
			if rows.Length() != tc.rows || failed.Length() != tc.failed {
				t.Fatalf("%d copies, %d failed; want %d, %d", rows.Length(), failed.Length(), tc.rows, tc.failed)
			}
			if tc.failed == 1 {
				href, _ := failed.Find(`[data-testid="canary-copy-link"]`).Attr("href")
				if want := searchURL("dlq:charge-b"); href != want {
					t.Errorf("the failed copy links to %q", href)
				}
				if got := flat(failed.Text()); !strings.Contains(got, "failed again gateway timeout <b>again</b> …") {
					t.Errorf("the failed copy's row %q", got)
				}
			}
		})
	}
	// No canary: no steps.
	j := canaryJob(broker.JobRunning, broker.CanaryDrawn)
	j.Canary = nil
	if d, _ := renderJob(t, j); d.Find(`[data-testid="canary-steps"]`).Length() != 0 {
		t.Error("a job without a canary shows its steps")
	}
}

// The bulk form's canary: off unless ticked; ticked, its fields or the
// dialog's defaults; out of range, or with a delete, refused.
func TestFormCanary(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		action string
		form   url.Values
		want   *broker.Canary
		err    string
	}{
		{"Off", "replay", url.Values{}, nil, ""},
		{"Defaults", "replay", url.Values{"canary": {"1"}}, &broker.Canary{Count: 5, SettleSeconds: 120}, ""},
		{"Fields", "replay", url.Values{"canary": {"on"}, "canaryCount": {"10"}, "canarySettleSeconds": {"30"}, "canaryMaxFailed": {"2"}}, &broker.Canary{Count: 10, SettleSeconds: 30, MaxFailed: 2}, ""},
		{"CountTooBig", "replay", url.Values{"canary": {"1"}, "canaryCount": {"101"}}, nil, "count must be a whole number from 1 to 100"},
		{"MaxFailedNotBelowCount", "replay", url.Values{"canary": {"1"}, "canaryCount": {"3"}, "canaryMaxFailed": {"3"}}, nil, "from 0 to 2"},
		{"SettleZero", "replay", url.Values{"canary": {"1"}, "canarySettleSeconds": {"0"}}, nil, "from 1 to 86400"},
		{"Delete", "delete", url.Values{"canary": {"1"}}, nil, "a canary goes with a replay"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := jobOfForm(tc.action, tc.form, "user:ana")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (req.Canary == nil) != (tc.want == nil) || (req.Canary != nil && *req.Canary != *tc.want) {
				t.Errorf("canary %+v, want %+v", req.Canary, tc.want)
			}
		})
	}
}
