package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// M1: what masking (issue 34: a queue's maskPaths, applied to every
// payload shown) costs the dead-letter pages at 1M dead letters: the
// list of a group (no payload shown: the masks are not even read), one
// dead letter's page (the masks read once, one payload masked) and the
// API's list of 100 (100 payloads masked), each with the queue masking
// three fields (one at any depth) against the same page without masks,
// interleaved: the masks are set before each masked run and taken off
// before each plain one.

// maskPaths are M1's masks: fields of every generated payload.
var maskPaths = json.RawMessage(`["$.card.last4","$..sku","$.customer"]`)

func caseM1(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	if f.page == nil {
		return []Row{{Case: "M1", Measure: "masking's cost", Verdict: verdictError, Note: "could not run: " + f.pageErr.Error()}}, nil
	}
	ids, err := newestIDs(ctx, f.ours.b, 1)
	if err != nil || len(ids) == 0 {
		return nil, fmt.Errorf("the newest dead letter: %v", err)
	}
	list := f.srv.base + "/queues/" + dlqQueue + "/dead-letters?" + url.Values{"group": {dlqGroup0}}.Encode()
	one := f.srv.base + "/queues/" + dlqQueue + "/dead-letters/" + url.PathEscape(ids[0]) + "?" + url.Values{"group": {dlqGroup0}}.Encode()
	api := f.srv.base + "/api/v1/dlq?" + url.Values{"queue": {dlqQueue}, "consumerGroup": {dlqGroup0}, "limit": {"100"}}.Encode()
	apiClient := &http.Client{Transport: bearer{newTransport()}, Timeout: 60 * time.Second}
	configure := func(ctx context.Context, paths json.RawMessage) error {
		_, err := f.srv.api(ctx, "POST", "/api/v1/configure", map[string]any{"queue": dlqQueue, "options": map[string]json.RawMessage{"maskPaths": paths}}, nil)
		return err
	}
	k, budget := e.size(200, 40), e.dur(4*time.Second, 400*time.Millisecond)
	run := func(name, u string, c *http.Client, masked bool) variant {
		return variant{name, func(ctx context.Context, _ int) (float64, error) {
			paths := json.RawMessage("null")
			if masked {
				paths = maskPaths
			}
			if err := configure(ctx, paths); err != nil {
				return 0, err
			}
			l, err := loadPage(ctx, c, u, false, 1, k, budget)
			if err != nil {
				return 0, err
			}
			if l.failed > 0 {
				return 0, fmt.Errorf("%s: %s", name, l.failures())
			}
			return l.p(0.5), nil
		}}
	}
	s, err := interleave(ctx, e, e.reps,
		run("list masked", list, f.page, true), run("list plain", list, f.page, false),
		run("one masked", one, f.page, true), run("one plain", one, f.page, false),
		run("api masked", api, apiClient, true), run("api plain", api, apiClient, false))
	defer func() { _ = configure(context.Background(), json.RawMessage("null")) }()
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, v := range []struct{ name, what string }{
		{"list", "GET dead-letters?group= (50 rows, no payload)"},
		{"one", "GET one dead letter's page (its payload masked)"},
		{"api", "GET /api/v1/dlq limit=100 (100 payloads masked)"},
	} {
		r := compare(s, "M1", v.what+" p50, masked vs plain", "ms", v.name+" masked", v.name+" plain")
		r.Must, r.Goal = atMost("ratio", 1.10, "≤ 1.10×"), atMost("ratio", 1.05, "≤ 1.05×")
		r.Note = "maskPaths " + string(maskPaths) + "; " + f.describe()
		rows = append(rows, r)
	}
	return rows, nil
}

// bearer adds the admin token to every request: the API's client.
type bearer struct{ rt http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+adminToken)
	return b.rt.RoundTrip(r)
}
