package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

const noArchiveWarning = "no --archive-dir"

// Of two processes on one PostgreSQL database, one without an archive
// directory, where a queue asks for an archive: that one warns at start,
// and again when it takes the lead (and with it the archiving) from the
// other; the one with a directory never warns.
func TestAProcessWithoutAnArchiveDirWarnsAtStartAndOnTakingTheLead(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t, "lazarus", db.Prepare)
	a := startServer(t, Config{DBPath: dsn, AdminToken: "s3cret-token", ArchiveDir: t.TempDir()})
	if resp, body := a.do(http.MethodPost, "/api/v1/configure", "", map[string]any{"queue": "kept", "options": map[string]any{"deadLetterArchive": true, "deadLetterRetentionSeconds": 86400}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("configure: %d %s", resp.StatusCode, body)
	}
	eventually(t, 10*time.Second, "A leads", func() bool { return strings.Contains(metricText(t, a), "lazarus_leading 1") })
	b := startServer(t, Config{DBPath: dsn, AdminToken: "s3cret-token"})
	if n := strings.Count(b.logs.String(), noArchiveWarning); n != 1 || !strings.Contains(b.logs.String(), `when="at start"`) || !strings.Contains(b.logs.String(), "queues=[kept]") {
		t.Fatalf("B's start: %d warnings, want 1 naming queue kept:\n%s", n, b.logs)
	}
	if err := a.shutdown(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "B warns on taking the lead", func() bool {
		return strings.Contains(b.logs.String(), `when="on taking the lead"`)
	})
	if strings.Contains(a.logs.String(), noArchiveWarning) {
		t.Fatalf("A, with an archive directory, warned:\n%s", a.logs)
	}
}

// On SQLite the one process warns at start.
func TestAServerWithoutAnArchiveDirWarnsAtStart(t *testing.T) {
	t.Parallel()
	s := startServer(t, Config{AdminToken: "s3cret-token"})
	if resp, body := s.do(http.MethodPost, "/api/v1/configure", "", map[string]any{"queue": "kept", "options": map[string]any{"deadLetterArchive": true, "deadLetterRetentionSeconds": 86400}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("configure: %d %s", resp.StatusCode, body)
	}
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.logs.String(), noArchiveWarning) {
		t.Fatalf("warned before any queue asked for an archive:\n%s", s.logs)
	}
	again := startServer(t, Config{DBPath: s.db, AdminToken: "s3cret-token"})
	if n := strings.Count(again.logs.String(), noArchiveWarning); n != 1 {
		t.Fatalf("%d warnings at start, want 1:\n%s", n, again.logs)
	}
}

func metricText(t *testing.T, s *server) string {
	t.Helper()
	_, body := s.do(http.MethodGet, "/metrics", "", nil)
	return string(body)
}
