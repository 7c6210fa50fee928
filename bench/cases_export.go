package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// S3: export every dead letter of the big group as NDJSON over HTTP,
// reading the download as fast as the loopback allows, and measure the
// memory: the peak of the Go heap's live objects while it runs (sampled
// every 2 ms from runtime/metrics) and the process's peak RSS (VmHWM,
// reset before the export through /proc/self/clear_refs). Client and
// server share this process, and so its RSS: the figure is an upper bound
// for the server alone.
func caseS3(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	debug.FreeOSMemory()
	base := heapLive()
	resetPeakRSS()
	rssBefore := peakRSS()
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				peak = max(peak, heapLive())
			}
		}
	}()
	start := time.Now()
	rows, bytes, err := exportAll(ctx, f.srv, url.Values{"queue": {dlqQueue}, "consumerGroup": {dlqGroup0}, "format": {"ndjson"}})
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if rows != int64(f.inGroup()) {
		return nil, fmt.Errorf("S3: exported %d dead letters, want %d", rows, f.inGroup())
	}
	rss := peakRSS()
	note := fmt.Sprintf("%s; %d rows, %.1f MB of NDJSON in %.1f s; heap before %.1f MB; RSS before %.1f MB (more when the fixture was generated in this run: SQLite's memory is not given back), %.1f MB more at the peak (the export's reader's page cache, 2 MB at most since issue 37, and the Go heap)", f.describe(), rows, float64(bytes)/1e6, elapsed.Seconds(), float64(base)/1e6, float64(rssBefore)/1e6, (float64(rss)-float64(rssBefore))/1e6)
	r := Row{Case: "S3", Measure: "export of a group as NDJSON over HTTP: peak RSS of the process (client and server)", Unit: "MB",
		Ours: ptr(float64(rss) / 1e6), Reps: 1, Note: note,
		Must: atMost("ours", 64, "≤ 64 MB RSS"), Goal: atMost("ours", 32, "streamed, ≤ 32 MB")}
	h := Row{Case: "S3", Measure: "  peak Go heap (live objects) during the export", Unit: "MB", Ours: ptr(float64(peak) / 1e6), Reps: 1,
		Verdict: verdictInfo, Note: fmt.Sprintf("%.1f MB above the heap before it", (float64(peak)-float64(base))/1e6)}
	return []Row{r, h}, nil
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

// heapLive is the bytes of live and not yet swept heap objects.
func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// resetPeakRSS starts VmHWM again from the current RSS (Linux).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is VmHWM in bytes (0 when unknown).
func peakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
