package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// S3: export every dead letter of the big group as NDJSON over HTTP from
// `lazarus serve` in a process of its own (the shipped binary, its
// background work running), on a copy of the dashboard fixture, reading
// the download as fast as the loopback allows, and measure the server's
// memory: its peak RSS (VmHWM, reset just before the export through
// /proc/<pid>/clear_refs) and its RSS before the export. Run in the
// bench's own process, the figure had counted the client, the earlier
// cases' leftovers and the fixture's generation (586 MB once), not the
// export's.
func caseS3(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqCache(ctx)
	if err != nil {
		return nil, err
	}
	path := e.path("s3-serve")
	if err := copyFile(f.cache, path); err != nil {
		return nil, err
	}
	if err := prepareServeDB(ctx, path); err != nil {
		return nil, err
	}
	p, srv, err := startServe(ctx, e, e.sync, path, false, "")
	if err != nil {
		return nil, err
	}
	defer p.stop()
	pid := p.cmd.Process.Pid
	// No request before the export: a dashboard read fills its
	// connection's page cache (32 MB at most, one a connection), which is
	// the cache's memory, not the export's (docs/performance.md, S3).
	rssBefore, err := procStatus(pid, "VmRSS:")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return nil, fmt.Errorf("S3: reset the server's peak RSS: %w", err)
	}
	start := time.Now()
	rows, bytes, err := exportAll(ctx, srv, url.Values{"queue": {dlqQueue}, "consumerGroup": {dlqGroup0}, "format": {"ndjson"}})
	elapsed := time.Since(start)
	if err != nil {
		return nil, err
	}
	if rows != int64(f.inGroup()) {
		return nil, fmt.Errorf("S3: exported %d dead letters, want %d", rows, f.inGroup())
	}
	rss, err := procStatus(pid, "VmHWM:")
	if err != nil {
		return nil, err
	}
	note := fmt.Sprintf("%s; `lazarus serve` in a process of its own, %s; %d rows, %.1f MB of NDJSON in %.1f s; the server's RSS before the export %.1f MB, %.1f MB more at the peak (the export's reader's page cache, 2 MB at most since issue 37, and the Go heap)",
		f.describe(), strings.ToLower(string(e.sync)), rows, float64(bytes)/1e6, elapsed.Seconds(), float64(rssBefore)/1e6, (float64(rss)-float64(rssBefore))/1e6)
	r := Row{Case: "S3", Measure: "export of a group as NDJSON over HTTP: peak RSS of the server", Unit: "MB",
		Ours: ptr(float64(rss) / 1e6), Reps: 1, Note: note,
		Must: atMost("ours", 64, "≤ 64 MB RSS"), Goal: atMost("ours", 32, "streamed, ≤ 32 MB")}
	b := Row{Case: "S3", Measure: "  the server's RSS before the export (info)", Unit: "MB", Ours: ptr(float64(rssBefore) / 1e6), Reps: 1,
		Verdict: verdictInfo, Note: "the server listening, no request served yet; the peak above is measured from it"}
	return []Row{r, b}, nil
}

// exportAll reads GET /api/v1/dlq/export?q to its end, counting lines.
// Its client allows the download exportTimeout, not the harness's 60 s
// a request: S3 measures memory, and on a loaded machine (load 35 on 2
// cores) its million rows took longer than a minute.
func exportAll(ctx context.Context, s *server, q url.Values) (rows, n int64, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+"/api/v1/dlq/export?"+q.Encode(), nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	client := *s.client
	client.Timeout = exportTimeout
	res, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
		return 0, 0, fmt.Errorf("export: %d %s", res.StatusCode, b)
	}
	r := bufio.NewReaderSize(res.Body, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		n += int64(len(line))
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			return rows, n, nil
		}
		if err != nil {
			return rows, n, err
		}
		rows++
	}
}

// exportTimeout bounds exportAll's download.
const exportTimeout = 15 * time.Minute

// procStatus is the field of /proc/<pid>/status named key (VmRSS:,
// VmHWM:) in bytes (Linux).
func procStatus(pid int, key string) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}
