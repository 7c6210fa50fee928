package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// untilDemoTraffic waits until the demo's traffic has filed a dead
// letter: the synthetic history, when there is one, is written before the
// traffic starts.
func untilDemoTraffic(t *testing.T, s *server) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, body := s.do(http.MethodGet, "/api/v1/dlq", "", nil)
		var page struct {
			Total int `json:"total"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil {
			t.Fatalf("GET /api/v1/dlq: %d %s", resp.StatusCode, body)
		}
		if page.Total > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no dead letter after 20s of demo traffic")
}

// demoMarkOf stops nothing: it opens the database of a stopped server and
// returns its synthetic history's mark and how many audit entries say
// one was written.
func demoMarkOf(t *testing.T, path string) (broker.DemoHistory, int) {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, path, db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	mark, err := b.DemoHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := b.Audit(ctx, broker.AuditFilter{Action: broker.AuditDemoHistory}, broker.Page{})
	if err != nil {
		t.Fatal(err)
	}
	return mark, len(entries)
}

// lazarus demo writes a week of history at the first start of a database
// it creates, and never again.
func TestDemoWritesAWeekOfHistoryAtTheFirstStartOnly(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("demo", []string{"--db", filepath.Join(t.TempDir(), "lazarus-demo.db")}, envOf(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AdminToken = "s3cret-token"
	s := startServer(t, cfg)
	untilDemoTraffic(t, s)
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}
	first, n := demoMarkOf(t, cfg.DBPath)
	if first.Until.IsZero() || first.Until.Sub(first.From) != 7*24*time.Hour || n != 1 {
		t.Fatalf("after the first start: mark %+v, %d audit entries; want a week, one entry", first, n)
	}

	s = startServer(t, cfg)
	untilDemoTraffic(t, s)
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}
	if again, n := demoMarkOf(t, cfg.DBPath); again != first || n != 1 {
		t.Errorf("after a second start: mark %+v, %d audit entries; want the first's %+v, one entry", again, n, first)
	}
}

// lazarus demo writes the week into a database that is blank and
// unmarked, whether or not its file existed (a first start that stopped
// before its traffic, on a taken port say, leaves a blank file with its
// admin user); never into one with traffic of its own, and serve --demo
// never writes one.
func TestDemoHistoryOnlyOnABlankDatabaseUnderDemo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		cmd      string
		existing string // "", "blank" or "traffic"
		want     bool
	}{
		{"ServeDemoOnANewFile", "serve", "", false},
		{"DemoOnABlankFileThatExisted", "demo", "blank", true},
		{"DemoOnAFileWithTraffic", "demo", "traffic", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "lazarus.db")
			switch c.existing {
			case "blank":
				createDatabase(t, path)
			case "traffic":
				withBroker(t, path, func(b *broker.Broker) {
					if _, err := b.Push(context.Background(), []broker.PushItem{{Queue: "mine", Partition: "p", Payload: []byte(`{}`), TransactionID: "t-1"}}); err != nil {
						t.Fatal(err)
					}
				})
			}
			args := []string{"--db", path}
			if c.cmd == "serve" {
				args = append(args, "--demo")
			}
			cfg, err := parseConfig(c.cmd, args, envOf(nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg.AdminToken = "s3cret-token"
			s := startServer(t, cfg)
			untilDemoTraffic(t, s)
			if err := s.shutdown(); err != nil {
				t.Fatal(err)
			}
			mark, n := demoMarkOf(t, path)
			if got := mark != (broker.DemoHistory{}); got != c.want || n != map[bool]int{true: 1}[c.want] {
				t.Errorf("mark %+v, %d audit entries; want a history: %v", mark, n, c.want)
			}
		})
	}
}

// withBroker runs fn on a broker over the database at path, then closes it.
func withBroker(t *testing.T, path string, fn func(*broker.Broker)) {
	t.Helper()
	d, err := db.Open(context.Background(), path, db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fn(broker.New(broker.Config{Store: d}))
}
