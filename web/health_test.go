package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/version"
	"github.com/lazarus-dlq/lazarus/web"
)

// /health and /metrics tell a full disk (the health function says
// broker.ErrNoSpace) from a database that does not answer, and say when
// it is over.
func TestHealthAndMetricsReportAFullDisk(t *testing.T) {
	t.Parallel()
	var state atomic.Value // error of the health function; nil: healthy
	state.Store(errBox{})
	s := setup(t, func(c *web.Config) {
		c.HealthFunc = func(context.Context) error { return state.Load().(errBox).err }
		c.MetricsPublic = true
	})
	gauge := func() string {
		for _, l := range strings.Split(string(s.request(s.ctx, "GET", "/metrics", "", nil).want(http.StatusOK).body), "\n") {
			if strings.HasPrefix(l, "lazarus_disk_full ") {
				return l
			}
		}
		return "(none)"
	}
	s.request(s.ctx, "GET", "/health", "", nil).want(http.StatusOK)
	if g := gauge(); g != "lazarus_disk_full 0" {
		t.Fatalf("healthy: %s", g)
	}

	state.Store(errBox{fmt.Errorf("write: %w: database or disk is full", broker.ErrNoSpace)})
	s.request(s.ctx, "GET", "/health", "", nil).wantError(http.StatusInsufficientStorage, "disk full: ")
	if g := gauge(); g != "lazarus_disk_full 1" {
		t.Fatalf("disk full: %s", g)
	}

	state.Store(errBox{errors.New("unable to open database file")})
	s.request(s.ctx, "GET", "/health", "", nil).wantError(http.StatusServiceUnavailable, "database unavailable")
	if g := gauge(); g != "lazarus_disk_full 0" {
		t.Fatalf("another failure: %s", g)
	}

	state.Store(errBox{})
	s.request(s.ctx, "GET", "/health", "", nil).want(http.StatusOK)
}

// errBox lets an atomic.Value hold a nil error.
type errBox struct{ err error }

// /health and every page's footer say which build answers.
func TestHealthAndFooterSayTheVersion(t *testing.T) {
	t.Parallel()
	s := setup(t)
	want := version.Get()
	var h struct{ Status, Version, Commit string }
	s.request(s.ctx, "GET", "/health", "", nil).want(http.StatusOK).decode(&h)
	if h.Status != "healthy" || h.Version == "" || h.Version != want.Version || h.Commit != want.Commit {
		t.Fatalf("health %+v, want the build's %+v", h, want)
	}
	b, _ := s.loggedIn(broker.RoleViewer)
	if got := b.get("/").want(http.StatusOK).testid("footer"); !strings.Contains(got, "Lazarus "+want.Version) {
		t.Fatalf("footer %q, want it to name %s", got, want.Version)
	}
}
