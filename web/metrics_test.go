package web_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// metricValue finds the sample of family name whose labels include want.
func metricValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func scrape(t *testing.T, s *bundle, header http.Header) map[string]*dto.MetricFamily {
	t.Helper()
	r := s.request(s.ctx, "GET", "/metrics", "", header).want(http.StatusOK)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, r.body)
	}
	return fams
}

func TestMetricsParseBackWithTheNumbers(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MetricsPublic = true })
	d := s.fail("orders", "p1", "billing", "t1", `{"n":1}`, "declined")
	s.fail("orders", "p1", "billing", "t2", `{"n":2}`, "declined")
	s.clock.Advance(90 * time.Second)
	s.call("POST", "/api/v1/dlq/"+d.ID+"/replay", "").want(http.StatusOK)

	fams := scrape(t, s, nil)
	qg := map[string]string{"queue": "orders", "group": "billing"}
	cases := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"lazarus_dlq_depth", qg, 1},
		{"lazarus_dead_lettered_total", qg, 2},
		{"lazarus_replayed_total", qg, 1},
		{"lazarus_deleted_total", qg, 0},
		{"lazarus_acks_total", map[string]string{"queue": "orders", "group": "billing", "status": "failed"}, 2},
		{"lazarus_dlq_oldest_age_seconds", qg, 90},
		{"lazarus_threshold_breached", map[string]string{"queue": "orders", "metric": "depth"}, 0},
	}
	for _, tc := range cases {
		got, ok := metricValue(t, fams, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if n, ok := metricValue(t, fams, "lazarus_http_request_duration_seconds", map[string]string{"route": "/api/v1/dlq/:id/replay", "code": "200"}); !ok || n != 1 {
		t.Errorf("latency of the replay route: %v %v", n, ok)
	}
}

func TestMetricsNeedATokenUnlessPublic(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.OpenAPI = false; c.AdminToken = "secret-admin-token" })
	s.request(s.ctx, "GET", "/metrics", "", nil).wantError(http.StatusUnauthorized)
	scrape(t, s, http.Header{"Authorization": {"Bearer secret-admin-token"}})
}

// /metrics exposes each maintenance task's rows removed and last duration.
func TestMetricsMaintenance(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MetricsPublic = true })
	for range 3 {
		if err := s.broker.Record(s.ctx, "user:a", broker.AuditReplay, "old"); err != nil {
			t.Fatal(err)
		}
	}
	s.clock.Advance(broker.DefaultAuditRetention + time.Hour)
	if _, err := s.broker.Maintain(s.ctx); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, s, nil)
	for _, task := range broker.MaintenanceTasks {
		if _, ok := metricValue(t, fams, "lazarus_maintenance_last_duration_seconds", map[string]string{"task": task}); !ok {
			t.Errorf("no duration of task %s", task)
		}
	}
	// The audit of setup's requests is young; the 3 old entries go.
	if got, ok := metricValue(t, fams, "lazarus_maintenance_removed_total", map[string]string{"task": broker.TaskAudit}); !ok || got < 3 {
		t.Errorf("audit rows removed %v (found %v), want 3 at least", got, ok)
	}
	if got, ok := metricValue(t, fams, "lazarus_maintenance_removed_total", map[string]string{"task": broker.TaskSessions}); !ok || got != 0 {
		t.Errorf("sessions removed %v (found %v), want 0", got, ok)
	}
	for _, task := range broker.MaintenanceTasks {
		if got, ok := metricValue(t, fams, "lazarus_maintenance_errors_total", map[string]string{"task": task}); !ok || got != 0 {
			t.Errorf("errors of task %s: %v (found %v), want 0", task, got, ok)
		}
	}
	// A run that fails (here: stopped before its first task) counts an
	// error of the task it stopped in.
	stopped, cancel := context.WithCancel(s.ctx)
	cancel()
	if _, err := s.broker.Maintain(stopped); err == nil {
		t.Fatal("maintenance with a cancelled context: no error")
	}
	fams = scrape(t, s, nil)
	if got, ok := metricValue(t, fams, "lazarus_maintenance_errors_total", map[string]string{"task": broker.TaskStats}); !ok || got != 1 {
		t.Errorf("errors of the stats task %v (found %v), want 1", got, ok)
	}
}
