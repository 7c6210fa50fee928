package web

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/lazarus-dlq/lazarus/broker"
)

// metrics is what /metrics exposes: the broker's numbers, read at scrape
// time from the maintained counters, and the server's request latencies.
type metrics struct {
	registry *prometheus.Registry
	latency  *prometheus.HistogramVec
}

func newMetrics(b *broker.Broker, clock broker.Clock, health func(context.Context) error, leading func() bool, textIndex func(context.Context) (broker.TextIndexState, error)) *metrics {
	if leading == nil {
		leading = func() bool { return true }
	}
	m := &metrics{
		registry: prometheus.NewRegistry(),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lazarus_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route (the route's pattern, not the path).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"method", "route", "code"}),
	}
	waiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lazarus_pops_waiting",
		Help: "Pops of this process waiting for messages now (long-polls with nothing to hand out yet).",
	}, func() float64 { return float64(b.Waiting()) })
	leads := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lazarus_leading",
		Help: "1 while this process leads the background work (bulk jobs, maintenance): of several processes on one PostgreSQL database, one does; else 0.",
	}, func() float64 {
		if leading() {
			return 1
		}
		return 0
	})
	m.registry.MustRegister(m.latency, waiting, leads, brokerCollector{b, clock}, storageCollector{health}, errorGroupCollector{b}, groupStateCollector{b}, maintenanceCollector{b}, maintenanceModeCollector{b}, archiveCollector{b}, spaceCollector{b},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if textIndex != nil {
		m.registry.MustRegister(textIndexCollector{textIndex})
	}
	return m
}

// observe records each request's latency.
func (m *metrics) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		code := c.Response().Status
		if err != nil {
			code, _, _ = statusOf(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.latency.WithLabelValues(c.Request().Method, route, strconv.Itoa(code)).Observe(time.Since(start).Seconds())
		return err
	}
}

func (m *metrics) handler() echo.HandlerFunc {
	all := echo.WrapHandler(promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return func(c echo.Context) error {
		sc := scopeOf(c.Request().Context())
		if sc.All() {
			return all(c)
		}
		return m.scoped(c, sc)
	}
}

// scoped writes the metrics a principal limited to sc may see: the
// series of the other queues (a "queue" label out of sc) are left out,
// as if absent; the series of no queue stay.
func (m *metrics) scoped(c echo.Context, sc broker.QueueScope) error {
	families, err := m.registry.Gather()
	if err != nil && len(families) == 0 {
		return err
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain) // every scraper reads it
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, format)
	for _, f := range families {
		kept := f.Metric[:0]
		for _, mt := range f.Metric {
			in := true
			for _, l := range mt.GetLabel() {
				if l.GetName() == "queue" && !sc.Allows(l.GetValue()) {
					in = false
				}
			}
			if in {
				kept = append(kept, mt)
			}
		}
		if len(kept) == 0 {
			continue
		}
		f.Metric = kept
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	if closer, ok := enc.(expfmt.Closer); ok {
		if err := closer.Close(); err != nil {
			return err
		}
	}
	return c.Blob(http.StatusOK, string(format), buf.Bytes())
}

var (
	labelsQG       = []string{"queue", "group"}
	descDepth      = prometheus.NewDesc("lazarus_dlq_depth", "Dead letters waiting, per queue and consumer group.", labelsQG, nil)
	descOldest     = prometheus.NewDesc("lazarus_dlq_oldest_age_seconds", "Age of the oldest dead letter waiting (0 when none).", labelsQG, nil)
	descFiled      = prometheus.NewDesc("lazarus_dead_lettered_total", "Messages filed into the dead letters.", labelsQG, nil)
	descReplayed   = prometheus.NewDesc("lazarus_replayed_total", "Dead letters replayed.", labelsQG, nil)
	descDeleted    = prometheus.NewDesc("lazarus_deleted_total", "Dead letters deleted.", labelsQG, nil)
	descDropped    = prometheus.NewDesc("lazarus_dropped_total", "Messages dropped instead of dead-lettered (queues without a DLQ).", labelsQG, nil)
	descMsgExpired = prometheus.NewDesc("lazarus_messages_expired_total", "Messages retentionSeconds deleted before the consumer group had settled them (expired unread).", labelsQG, nil)
	descDLExpired  = prometheus.NewDesc("lazarus_dead_letters_expired_total", "Dead letters deadLetterRetentionSeconds expired (removed for good by maintenance).", labelsQG, nil)
	descAcks       = prometheus.NewDesc("lazarus_acks_total", "Acknowledgements by outcome: completed or failed.", []string{"queue", "group", "status"}, nil)
	descReplayEnds = prometheus.NewDesc("lazarus_replay_outcomes_total", "Replayed copies settled, by outcome: completed or failed (dead-lettered again or dropped).", []string{"queue", "group", "outcome"}, nil)
	descHeld       = prometheus.NewDesc("lazarus_held", "1 while a hold holds the deliveries of the consumer group (group \"\": a hold of the whole queue no group has read yet), else 0; for each group the other series list, and each held one.", labelsQG, nil)
	descBreached   = prometheus.NewDesc("lazarus_threshold_breached", "1 when a queue is past a monitoring threshold (depth, oldest, failures, replays), else 0.", []string{"queue", "metric"}, nil)
)

// The maintenance tasks' numbers (broker.Maintain), per task.
var (
	descMaintRemoved = prometheus.NewDesc("lazarus_maintenance_removed_total", "Rows the maintenance task removed since the start (history: also restore windows ended; space: free pages given back to the file system).", []string{"task"}, nil)
	descMaintTook    = prometheus.NewDesc("lazarus_maintenance_last_duration_seconds", "How long the maintenance task's last run took (longer than --maintenance-every: it falls behind).", []string{"task"}, nil)
	descMaintErrors  = prometheus.NewDesc("lazarus_maintenance_errors_total", "Runs of the maintenance task that ended in an error since the start (the error is logged; the other tasks still ran).", []string{"task"}, nil)
)

// maintenanceCollector reads the maintenance totals kept in memory.
type maintenanceCollector struct{ b *broker.Broker }

func (maintenanceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descMaintRemoved
	ch <- descMaintTook
	ch <- descMaintErrors
}

func (mc maintenanceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range mc.b.MaintenanceTotals() {
		ch <- prometheus.MustNewConstMetric(descMaintRemoved, prometheus.CounterValue, float64(t.Removed), t.Task)
		ch <- prometheus.MustNewConstMetric(descMaintTook, prometheus.GaugeValue, t.LastTook.Seconds(), t.Task)
		ch <- prometheus.MustNewConstMetric(descMaintErrors, prometheus.CounterValue, float64(t.Errors), t.Task)
	}
}

// descMaintenanceMode is the gauge of maintenance mode (Queen's), by
// scope.
var descMaintenanceMode = prometheus.NewDesc("lazarus_maintenance", "1 while maintenance mode's scope is on (push or pop: either holds every delivery; pushes are stored), else 0.", []string{"scope"}, nil)

// maintenanceModeCollector reads maintenance mode at each scrape (one
// read of the settings).
type maintenanceModeCollector struct{ b *broker.Broker }

func (maintenanceModeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descMaintenanceMode }

func (mc maintenanceModeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := mc.b.Maintenance(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descMaintenanceMode, err)
		return
	}
	for _, s := range []struct {
		scope broker.MaintenanceScope
		on    bool
	}{{broker.MaintenancePush, m.Push.On}, {broker.MaintenancePop, m.Pop.On}} {
		ch <- prometheus.MustNewConstMetric(descMaintenanceMode, prometheus.GaugeValue, gaugeOf(s.on), string(s.scope))
	}
}

// The archive of dead letters before they expire (deadLetterArchive), per
// queue that archived or tried to since the start.
var (
	descArchiveWritten  = prometheus.NewDesc("lazarus_archive_written_total", "Dead letters written to the archive before they expired, since the start.", []string{"queue"}, nil)
	descArchiveFailures = prometheus.NewDesc("lazarus_archive_failures_total", "Writes to the archive that failed since the start; each kept its dead letters unexpired (retried at the next maintenance run).", []string{"queue"}, nil)
)

// archiveCollector reads the archive's statuses kept in memory.
type archiveCollector struct{ b *broker.Broker }

func (archiveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descArchiveWritten
	ch <- descArchiveFailures
}

func (ac archiveCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range ac.b.ArchiveStatuses() {
		ch <- prometheus.MustNewConstMetric(descArchiveWritten, prometheus.CounterValue, float64(st.Written), st.Queue)
		ch <- prometheus.MustNewConstMetric(descArchiveFailures, prometheus.CounterValue, float64(st.Failures), st.Queue)
	}
}

// The database's size and free space (broker.Space: the database
// header, read at each scrape; no table is read).
var (
	descDBBytes   = prometheus.NewDesc("lazarus_database_bytes", "Size of the database: SQLite's pages, free ones included (the write-ahead log not counted); on PostgreSQL, Lazarus's tables with their indexes.", nil, nil)
	descDBFree    = prometheus.NewDesc("lazarus_database_free_bytes", "Free pages of the SQLite database: reused by new rows, and past a margin given back by maintenance (0 on PostgreSQL, whose free room vacuum keeps inside the tables).", nil, nil)
	descDBReclaim = prometheus.NewDesc("lazarus_database_gives_space_back", "1 when the SQLite database can give free pages back to the file system (auto_vacuum=INCREMENTAL), 0 when it only reuses them (not converted yet: see the log at start; and always on PostgreSQL, where VACUUM FULL is the administrator's).", nil, nil)
)

// spaceCollector reads the database's size and free pages at each scrape.
type spaceCollector struct{ b *broker.Broker }

func (spaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDBBytes
	ch <- descDBFree
	ch <- descDBReclaim
}

func (sc spaceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sc.b.Space(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descDBBytes, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descDBBytes, prometheus.GaugeValue, float64(s.Bytes()))
	ch <- prometheus.MustNewConstMetric(descDBFree, prometheus.GaugeValue, float64(s.FreeBytes()))
	ch <- prometheus.MustNewConstMetric(descDBReclaim, prometheus.GaugeValue, gaugeOf(s.Reclaims))
}

// The search file's (SQLite's full-text indexes of dead letters, kept
// apart from the database and brought up to date after its commits).
var (
	descSearchBytes   = prometheus.NewDesc("lazarus_search_file_bytes", "Size of the search file beside the SQLite database (<db>-search: the full-text indexes of dead letters' error texts and payload words), its write-ahead log included; not counted in lazarus_database_bytes.", nil, nil)
	descSearchBehind  = prometheus.NewDesc("lazarus_search_index_behind", "Dead letters filed and not yet in the search file's indexes: a search waits for them (30 s at most). Usually 0, or a burst's few for some milliseconds; one that grows means the indexer cannot keep up or is failing.", nil, nil)
	descSearchFailing = prometheus.NewDesc("lazarus_search_index_failing", "1 while the search file's indexes cannot be brought up to date (a full disk, a damaged search file: see the log), when searches answer 503; else 0.", nil, nil)
)

// textIndexCollector reads the search file's state at each scrape (its
// size from the file system, one read of the log's last row).
type textIndexCollector struct {
	state func(context.Context) (broker.TextIndexState, error)
}

func (textIndexCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSearchBytes
	ch <- descSearchBehind
	ch <- descSearchFailing
}

func (tc textIndexCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := tc.state(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descSearchBytes, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descSearchBytes, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(descSearchBehind, prometheus.GaugeValue, float64(st.Behind))
	ch <- prometheus.MustNewConstMetric(descSearchFailing, prometheus.GaugeValue, gaugeOf(st.Failing))
}

// descDiskFull is the gauge of a full disk.
var descDiskFull = prometheus.NewDesc("lazarus_disk_full", "1 while writes fail because the database's disk is full (or a quota or file size limit is reached), else 0.", nil, nil)

// storageCollector reads the state of the database's storage at each
// scrape, with the health check: while the disk is full, that tries a
// write, so that the gauge drops as soon as space is freed.
type storageCollector struct {
	health func(context.Context) error
}

func (storageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descDiskFull }

func (sc storageCollector) Collect(ch chan<- prometheus.Metric) {
	full := false
	if sc.health != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		full = errors.Is(sc.health(ctx), broker.ErrNoSpace)
	}
	ch <- prometheus.MustNewConstMetric(descDiskFull, prometheus.GaugeValue, gaugeOf(full))
}

// brokerCollector reads the broker's numbers at each scrape.
type brokerCollector struct {
	b     *broker.Broker
	clock broker.Clock
}

func (brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDepth, descOldest, descFiled, descReplayed, descDeleted, descDropped, descMsgExpired, descDLExpired, descAcks, descReplayEnds, descBreached, descHeld} {
		ch <- d
	}
}

func (bc brokerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	health, _, err := bc.b.Health(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descDepth, err)
		return
	}
	holds, err := bc.b.Holds(ctx, broker.HoldFilter{})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descHeld, err)
		return
	}
	held := map[[2]string]bool{} // (queue, group); group "": the whole queue
	for _, h := range holds {
		held[[2]string{h.Queue, h.Group}] = true
	}
	now := bc.clock.Now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, q := range health {
		for _, g := range q.Stats {
			age := 0.0
			if g.Depth > 0 && !g.OldestFailedAt.IsZero() {
				age = now.Sub(g.OldestFailedAt).Seconds()
			}
			gauge(descDepth, float64(g.Depth), q.Name, g.Group)
			gauge(descOldest, age, q.Name, g.Group)
			counter(descFiled, g.DeadLettered, q.Name, g.Group)
			counter(descReplayed, g.Replayed, q.Name, g.Group)
			counter(descDeleted, g.Deleted, q.Name, g.Group)
			counter(descDropped, g.Dropped, q.Name, g.Group)
			counter(descMsgExpired, g.Expired, q.Name, g.Group)
			counter(descDLExpired, g.DeadLettersExpired, q.Name, g.Group)
			counter(descAcks, g.Completed, q.Name, g.Group, "completed")
			counter(descAcks, g.Failed, q.Name, g.Group, "failed")
			counter(descReplayEnds, g.ReplayCompleted, q.Name, g.Group, "completed")
			counter(descReplayEnds, g.ReplayFailed, q.Name, g.Group, "failed")
			k := [2]string{q.Name, g.Group}
			gauge(descHeld, gaugeOf(held[k] || held[[2]string{q.Name, ""}]), q.Name, g.Group)
			delete(held, k)
		}
		if held[[2]string{q.Name, ""}] && len(q.Stats) == 0 {
			gauge(descHeld, 1, q.Name, "")
		}
		delete(held, [2]string{q.Name, ""})
		breached := map[string]bool{}
		for _, br := range q.Breaches {
			breached[br.Metric] = true
		}
		for _, metric := range []string{"depth", "oldest", "failures", "replays"} {
			gauge(descBreached, gaugeOf(breached[metric]), q.Name, metric)
		}
	}
	for k := range held { // held groups with no numbers yet
		gauge(descHeld, 1, k[0], k[1])
	}
}

// gaugeOf is a yes-or-no gauge's value: 1 for yes, 0 for no.
func gaugeOf(yes bool) float64 {
	if yes {
		return 1
	}
	return 0
}
