package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/lazarus-dlq/lazarus/archive"
	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/demo"
	"github.com/lazarus-dlq/lazarus/notify"
	"github.com/lazarus-dlq/lazarus/web"
)

// HTTP server limits.
const (
	// maxBodyBytes caps a request body: a push of many items fits, a runaway
	// upload does not.
	maxBodyBytes = 8 << 20
	// maxPopWait is the longest long-poll the broker accepts (broker.Pop
	// refuses a timeout over 10 minutes). The write timeout must outlast
	// it, or the server would cut a long-poll that is waiting as asked.
	maxPopWait = 10 * time.Minute
	// shutdownTimeout bounds how long a stop waits for requests in flight.
	// Long-polls are released at once (broker.Close), so only real work is
	// waited for.
	shutdownTimeout = 20 * time.Second
	// readHeaderTimeout and readTimeout bound how long a client may take
	// to send its request headers, and its whole request.
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
)

// orDefault is d, or def when d is 0.
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// serve opens the database, builds the broker, starts its background work
// (broker.Run), the HTTP server (and the demo traffic when asked), and
// runs until ctx is cancelled. Then it stops in this order: the HTTP
// server stops accepting, releases long-polls and finishes the requests
// in flight; the demo stops; the background work stops (the jobs between
// chunks, then the last counts are written); the database closes.
// onListen, when not nil, is told the address listened on.
func serve(ctx context.Context, cfg Config, log *slog.Logger, stderr io.Writer, onListen func(net.Addr)) (err error) {
	// The address first: a start that cannot listen (the port is taken)
	// must stop before it creates the admin user, whose password it
	// shows only once it listens.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close() // Serve closes it too; this covers a return before Serve
	// Exclusive: one server per database file (db/sqlite/lock.go).
	d, err := db.OpenWith(ctx, cfg.DBPath, db.Options{Sync: cfg.Sync, BusyTimeout: cfg.BusyTimeout, Logger: log.With("component", "db"), Exclusive: true, Wait: cfg.DBWait})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := d.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close database: %w", cerr)
		}
	}()

	auditKeep := cfg.AuditRetention
	if auditKeep == 0 {
		auditKeep = broker.KeepForever
	}
	bc := broker.Config{Store: d, Logger: log, RestoreWindow: cfg.RestoreWindow, AuditRetention: auditKeep, Clock: faultClock()}
	if n := d.Notifier(); n != nil {
		bc.Notifier = n // PostgreSQL: news between the processes of the database
	}
	if cfg.ArchiveDir != "" {
		a, err := archive.New(cfg.ArchiveDir)
		if err != nil {
			return fmt.Errorf("--archive-dir: %w", err)
		}
		bc.Archive = a
		log.Info("archive of dead letters before they expire", "dir", cfg.ArchiveDir)
	}
	host, _, _ := net.SplitHostPort(cfg.Addr)
	urls, wildcard := reachableURLs(ln.Addr(), host, net.InterfaceAddrs)
	// The links of notifications: the --public-url, or the first URL
	// this server answers on (people elsewhere may not reach it).
	public, derived := cfg.PublicURL, cfg.PublicURL == ""
	if derived {
		public = urls[0]
	}
	bc.Notify = notify.New(notify.Config{PublicURL: public, AllowPrivate: cfg.NotifyAllowPrivate, Logger: log.With("component", "notify")})
	if derived {
		log.Warn("no --public-url: the links in notifications use the listen address, which people elsewhere may not reach; set --public-url to the dashboard's address as people open it",
			"public_url", public)
	}
	if cfg.NotifyAllowPrivate {
		log.Warn("--notify-allow-private: notification channels may reach loopback, link-local and cloud metadata addresses")
	}
	b := broker.New(bc)
	if cfg.ArchiveDir == "" {
		warnNoArchive(ctx, b, log, "at start")
	}
	firstPassword, err := whileUnavailable(ctx, cfg.DBWait, log, "admin user", func() (string, error) { return ensureAdmin(ctx, b, cfg) })
	if err != nil {
		return fmt.Errorf("admin user: %w", err)
	}
	if cfg.AdminPassword != "" {
		log.Info("user admin set from LAZARUS_ADMIN_PASSWORD")
	}
	if cfg.SSO != nil {
		log.Info("single sign-on through an OpenID Connect provider, beside the local passwords",
			"issuer", cfg.SSO.Issuer, "client_id", cfg.SSO.ClientID, "redirect_url", cfg.SSO.RedirectURL,
			"claim", cfg.SSO.Mapping.Claim, "groups", len(cfg.SSO.Mapping.Groups))
	}
	if cfg.OpenAPI {
		log.Warn("LAZARUS_API_OPEN: the API takes requests without a token, as an admin; for local development only")
	}
	srv := &http.Server{
		Handler: web.New(web.Config{
			Broker:          b,
			Logger:          log,
			HealthFunc:      d.Health,
			LeadingFunc:     d.Leading,
			TextIndexFunc:   d.TextIndexFunc(),
			AdminToken:      cfg.AdminToken,
			OpenAPI:         cfg.OpenAPI,
			MetricsPublic:   cfg.MetricsPublic,
			SecureCookies:   cfg.SecureCookies,
			BcryptCost:      cfg.bcryptCost,
			MaxBodyBytes:    max(maxBodyBytes, cfg.MaxPayloadBytes+web.EnvelopeBytes), // a payload at its limit fits
			MaxPayloadBytes: cfg.MaxPayloadBytes,
			SSO:             cfg.SSO,
		}).Handler(),
		// A slow client (one that trickles its headers or its body) is cut
		// off: it cannot hold a connection for long.
		ReadHeaderTimeout: orDefault(cfg.readHeaderTimeout, readHeaderTimeout),
		// A body of maxBodyBytes arrives well within this on any real link.
		ReadTimeout: orDefault(cfg.readTimeout, readTimeout),
		// Counted from the end of the request headers to the end of the
		// response, so it must cover a full long-poll plus the time to
		// write its answer; a slow reader is still cut off eventually.
		WriteTimeout: maxPopWait + time.Minute,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Shutdown closes the listeners first and then runs this, so waiting
	// pops return (empty) instead of holding the stop for minutes.
	srv.RegisterOnShutdown(b.Close)

	log.Info("listening",
		"addr", ln.Addr().String(),
		"url", urls[0],
		"urls", urls,
		"db", db.Describe(cfg.DBPath),
		"sync", string(cfg.Sync),
		"demo", cfg.Demo,
		"admin_token", cfg.AdminToken != "",
		"open_api", cfg.OpenAPI)
	if wildcard {
		log.Warn("listening on every interface over plain HTTP: the dashboard's logins and the API's tokens cross the network in clear; listen on 127.0.0.1 behind a reverse proxy with TLS (docs/operations.md), or firewall the port",
			"addr", cfg.Addr)
	}
	if firstPassword != "" {
		printFirstAdmin(stderr, urls[0], firstPassword)
	}
	if onListen != nil {
		onListen(ln.Addr())
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	// The background work (broker.Run): maintenance and the bulk jobs in
	// the process that leads (a SQLite file's one process; of several on
	// one PostgreSQL database, the one db.Lead chose), the counts waiting
	// in memory written every broker.StatsDelay in each. Not ended by the
	// signal: by stopBackground, once requests and the demo are done, so
	// that the jobs stop (between chunks) before the database closes and
	// the last counts are written after the last write.
	bgCtx, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()
	background := broker.RunConfig{MaintenanceEvery: cfg.MaintenanceEvery}
	if cfg.ArchiveDir == "" && db.IsPostgres(cfg.DBPath) {
		background.OnLead = func(ctx context.Context) { warnNoArchive(ctx, b, log, "on taking the lead") }
	}
	var bgDone sync.WaitGroup
	bgDone.Go(func() { b.Run(bgCtx, background) })

	// The demo stops before the database closes.
	demoCtx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	var demoDone sync.WaitGroup
	if cfg.Demo {
		demoDone.Go(func() {
			if err := demo.Run(demoCtx, demo.Config{Broker: b, Logger: log.With("component", "demo"), History: cfg.DemoHistory}); err != nil {
				log.Error("demo stopped", "err", err)
			}
		})
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "timeout", shutdownTimeout.String())
	case err := <-serveErr:
		runErr = fmt.Errorf("serve: %w", err) // never http.ErrServerClosed here: only Shutdown causes that
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("requests still running at shutdown timeout; closing their connections", "err", err)
		srv.Close()
	}
	b.Close() // also when Serve failed and Shutdown had no listener to close
	stopDemo()
	demoDone.Wait()
	stopBackground() // the jobs stop, then the last counts are written
	bgDone.Wait()
	if runErr == nil {
		if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("serve: %w", err)
		}
	}
	return runErr
}

// whileUnavailable runs fn, a step of the start that reads or writes
// the database, again while the database cannot be reached
// (broker.ErrUnavailable, nothing changed: PostgreSQL restarting, the
// connection cut), for up to wait from the first try: the start waits
// for the database as Open does (--db-wait). The fault campaign
// (faults/) found a process restarted while PostgreSQL crashed ending
// here.
func whileUnavailable[T any](ctx context.Context, wait time.Duration, log *slog.Logger, step string, fn func() (T, error)) (T, error) {
	start := time.Now()
	pause := 250 * time.Millisecond
	for try := 1; ; try++ {
		v, err := fn()
		if err == nil || !errors.Is(err, broker.ErrUnavailable) || time.Since(start) >= wait {
			return v, err
		}
		log.Warn("the database went away during the start; trying again", "step", step, "try", try, "retry_in", pause.String(), "err", err)
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// warnNoArchive warns, when a queue asks for an archive of its dead
// letters, that this process has no archive directory: while it leads
// (one of several on PostgreSQL may), maintenance keeps those dead
// letters past their retention rather than archive them.
func warnNoArchive(ctx context.Context, b *broker.Broker, log *slog.Logger, when string) {
	names, err := b.ArchivingQueues(ctx)
	if err != nil || len(names) == 0 {
		return
	}
	const shown = 10
	log.Warn("queues ask for an archive of their dead letters (deadLetterArchive) but this process has no --archive-dir: while it leads, their dead letters are kept past their retention, not archived; give every process the same shared --archive-dir",
		"when", when, "queues", names[:min(len(names), shown)], "count", len(names))
}
