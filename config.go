package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/password"
	"github.com/lazarus-dlq/lazarus/web"
)

// Config is everything the binary is told by flags and the environment.
// It is built here and nowhere else; the packages get plain values.
type Config struct {
	Addr   string  // listen address; port 0 picks a free one
	DBPath string  // SQLite file, created if missing
	Sync   db.Sync // how hard a commit waits for the disk
	// BusyTimeout bounds how long a request waits for a lock that another
	// process holds on the database before it is answered 503.
	BusyTimeout time.Duration
	Demo        bool // run demo traffic beside the server
	// DemoHistory: lazarus demo, which writes a week of synthetic history
	// for the charts into a database that has none and nothing else yet
	// (no bucket, message or dead letter: broker.WriteDemoHistory), never
	// under serve --demo.
	DemoHistory bool
	AdminToken  string // accepted as an admin bearer token on the API; empty: none
	LogFormat   string // "text" or "json"
	LogLevel    slog.Level
	// AdminPassword, when set, creates the user admin (role admin) at
	// start, or resets its password and role.
	AdminPassword string
	// SecureCookies marks the dashboard's cookies Secure on every response
	// (they are anyway behind TLS or X-Forwarded-Proto: https).
	SecureCookies bool
	// OpenAPI lets API requests without credentials in as an anonymous
	// admin. UNSAFE: for local development only.
	OpenAPI bool
	// MetricsPublic serves /metrics without a bearer token.
	MetricsPublic bool
	// MaxPayloadBytes caps each pushed payload, as sent; 0:
	// web.DefaultMaxPayloadBytes (4 MiB).
	MaxPayloadBytes int64
	// RestoreWindow is how long a deleted dead letter can be restored
	// (default broker.RestoreWindow, 24 h).
	RestoreWindow time.Duration
	// MaintenanceEvery is how often the maintenance tasks run
	// (broker.Maintain; default broker.DefaultMaintenanceEvery).
	MaintenanceEvery time.Duration
	// AuditRetention is how long audit entries are kept; 0: for ever.
	AuditRetention time.Duration
	// DBWait is how long serve waits for a PostgreSQL server that
	// cannot be reached yet at start (db.Options.Wait); 0: one try.
	DBWait time.Duration
	// ArchiveDir is where the dead letters of queues with
	// deadLetterArchive are written before they expire; empty: none
	// (such queues keep their dead letters, and say why).
	ArchiveDir string
	// PublicURL is the dashboard's base URL as people reach it (behind
	// a proxy: the proxy's), put before the paths in notifications to
	// make their links; empty: derived from the listen address, with a
	// warning at start (serve.go: publicURL).
	PublicURL string
	// NotifyAllowPrivate lets notification channels reach loopback,
	// link-local and cloud metadata addresses (notify.Config).
	NotifyAllowPrivate bool
	// SSO is single sign-on through an OpenID Connect provider (the
	// --oidc-* flags, sso_config.go); nil: local passwords only.
	SSO *web.SSOConfig

	// bcryptCost is the cost of the password hashes made at start (0:
	// password.DefaultCost); tests lower it.
	bcryptCost int
	// readHeaderTimeout and readTimeout bound how long a client may take
	// to send its request headers, and its whole request (0: the defaults
	// of serve.go); tests shorten them.
	readHeaderTimeout, readTimeout time.Duration
}

// Defaults. The demo command keeps its messages in a file of its own so
// that trying it out never mixes demo traffic into real data.
const (
	defaultAddr   = "127.0.0.1:8080"
	defaultDB     = "./lazarus.db"
	defaultDemoDB = "./lazarus-demo.db"
	// defaultDBWait covers PostgreSQL starting on the same machine at
	// boot, or a failover.
	defaultDBWait = time.Minute
)

// envHelp lists the settings that only the environment gives.
const envHelp = `
Environment only:
  LAZARUS_ADMIN_PASSWORD  creates the user admin (role admin) at start, or resets its
                          password and role; 12 characters at least
  LAZARUS_ADMIN_TOKEN     accepted as an admin bearer token on the API
  LAZARUS_SECURE_COOKIES  true: the dashboard's cookies are always Secure (they are
                          anyway over TLS or with X-Forwarded-Proto: https)
  LAZARUS_API_OPEN        true: API requests without a token act as an anonymous admin.
                          UNSAFE, for local development only
  LAZARUS_METRICS_PUBLIC  true: /metrics answers without a bearer token (it needs a
                          viewer's token otherwise)
  LAZARUS_MAX_PAYLOAD_BYTES  the largest payload a push may carry, in bytes
                          (default 4194304, at most 8388608; a request body may be
                          64 KiB larger)
`

// errHelp is returned when the user asked for usage: printed, exit 0.
var errHelp = errors.New("help requested")

// parseConfig reads the flags of the serve and demo commands. Flags win
// over the environment, which wins over the defaults.
func parseConfig(cmd string, args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("lazarus "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var syncMode, level, busy, restore, every, auditKeep, dbWait string
	fs.StringVar(&cfg.Addr, "addr", env("LAZARUS_ADDR", defaultAddr), "listen address, host:port (env LAZARUS_ADDR)")
	// lazarus demo takes its database from --db only: LAZARUS_DB names
	// the user's own database, which demo traffic must never go into.
	dbDefault, dbUsage := env("LAZARUS_DB", defaultDB), "SQLite database file, or a postgres:// URL or libpq key=value string (host=... dbname=...) for PostgreSQL (env LAZARUS_DB)"
	if cmd == "demo" {
		dbDefault, dbUsage = defaultDemoDB, "SQLite database file (LAZARUS_DB is ignored: demo traffic never goes into the file it names)"
	}
	fs.StringVar(&cfg.DBPath, "db", dbDefault, dbUsage)
	fs.StringVar(&syncMode, "sync", env("LAZARUS_SYNC", "full"), "durability: full (fsync every commit) or normal (env LAZARUS_SYNC)")
	fs.StringVar(&busy, "busy-timeout", env("LAZARUS_BUSY_TIMEOUT", shortDuration(db.DefaultBusyTimeout)),
		"how long a write waits for another process's lock on the database before it is answered 503, e.g. 5s or 500ms (env LAZARUS_BUSY_TIMEOUT)")
	fs.StringVar(&dbWait, "db-wait", env("LAZARUS_DB_WAIT", shortDuration(defaultDBWait)),
		"PostgreSQL: how long to wait at start, trying again, for a server that cannot be reached yet (booting with Lazarus), e.g. 60s; 0: fail at once (env LAZARUS_DB_WAIT)")
	fs.StringVar(&restore, "restore-window", env("LAZARUS_RESTORE_WINDOW", shortDuration(broker.RestoreWindow)),
		"how long a deleted dead letter can be restored, e.g. 24h or 30m; after it, it is gone for good (env LAZARUS_RESTORE_WINDOW)")
	fs.StringVar(&every, "maintenance-every", env("LAZARUS_MAINTENANCE_EVERY", shortDuration(broker.DefaultMaintenanceEvery)),
		"how often maintenance runs (retention sweeps, stats compaction), from 1s to 1h (env LAZARUS_MAINTENANCE_EVERY)")
	fs.StringVar(&auditKeep, "audit-retention", env("LAZARUS_AUDIT_RETENTION", "400d"),
		"how long audit entries are kept, in days (400d) or as a duration of 24h at least; 0 keeps them for ever (env LAZARUS_AUDIT_RETENTION)")
	fs.StringVar(&cfg.ArchiveDir, "archive-dir", env("LAZARUS_ARCHIVE_DIR", ""),
		"directory of the archive of dead letters before they expire (queues with deadLetterArchive): <dir>/<queue>/<YYYY-MM-DD>.ndjson.gz, created if missing; empty: none, and such queues keep their dead letters (env LAZARUS_ARCHIVE_DIR)")
	fs.StringVar(&cfg.PublicURL, "public-url", env("LAZARUS_PUBLIC_URL", ""),
		"the dashboard's base URL as people reach it, e.g. https://lazarus.example.com, for the links in notifications; empty: http://<listen address>, with a warning (env LAZARUS_PUBLIC_URL)")
	fs.BoolVar(&cfg.NotifyAllowPrivate, "notify-allow-private", false,
		"let notification channels (Slack, webhooks, SMTP) reach loopback, link-local and cloud metadata addresses; off: refused, since a channel's URL is a way into the network")
	fs.StringVar(&cfg.LogFormat, "log-format", env("LAZARUS_LOG_FORMAT", "text"), "log format: text or json (env LAZARUS_LOG_FORMAT)")
	fs.StringVar(&level, "log-level", env("LAZARUS_LOG_LEVEL", "info"), "log level: debug, info, warn or error (env LAZARUS_LOG_LEVEL)")
	var sso *ssoFlags
	if cmd == "serve" {
		fs.BoolVar(&cfg.Demo, "demo", false, "also run demo traffic against the broker")
		sso = defineSSOFlags(fs, env)
	}
	fs.Usage = func() {
		switch cmd {
		case "demo":
			fmt.Fprintf(fs.Output(), "Usage: lazarus demo [flags]\n\nServes Lazarus on a database of its own (default %s) with demo traffic.\n\nFlags:\n", defaultDemoDB)
		default:
			fmt.Fprint(fs.Output(), "Usage: lazarus serve [flags]\n\nServes the broker's API (and, with --demo, demo traffic).\n\nFlags:\n")
		}
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), envHelp)
		if cmd == "serve" {
			fmt.Fprint(fs.Output(), ssoEnvHelp)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, errHelp
		}
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cmd == "demo" {
		cfg.Demo, cfg.DemoHistory = true, true
	}
	cfg.AdminToken = getenv("LAZARUS_ADMIN_TOKEN")
	cfg.AdminPassword = getenv("LAZARUS_ADMIN_PASSWORD")
	if cfg.AdminPassword != "" {
		if err := password.Validate(cfg.AdminPassword); err != nil {
			return Config{}, fmt.Errorf("LAZARUS_ADMIN_PASSWORD: %w", err)
		}
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{{"LAZARUS_SECURE_COOKIES", &cfg.SecureCookies}, {"LAZARUS_API_OPEN", &cfg.OpenAPI}, {"LAZARUS_METRICS_PUBLIC", &cfg.MetricsPublic}} {
		v := getenv(b.key)
		if v == "" {
			continue
		}
		on, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s must be true or false, got %q", b.key, v)
		}
		*b.dst = on
	}
	if v := getenv("LAZARUS_MAX_PAYLOAD_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > maxBodyBytes {
			return Config{}, fmt.Errorf("LAZARUS_MAX_PAYLOAD_BYTES must be a whole number of bytes from 1 to %d, got %q", maxBodyBytes, v)
		}
		cfg.MaxPayloadBytes = n
	}

	switch strings.ToLower(syncMode) {
	case "full":
		cfg.Sync = db.SyncFull
	case "normal":
		cfg.Sync = db.SyncNormal
	default:
		return Config{}, fmt.Errorf("sync must be full or normal, got %q", syncMode)
	}
	cfg.LogFormat = strings.ToLower(cfg.LogFormat)
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return Config{}, fmt.Errorf("log format must be text or json, got %q", cfg.LogFormat)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(level)); err != nil {
		return Config{}, fmt.Errorf("log level must be debug, info, warn or error, got %q", level)
	}
	d, err := time.ParseDuration(busy)
	if err != nil || d < time.Millisecond || d > time.Minute {
		return Config{}, fmt.Errorf("busy timeout must be a duration from 1ms to 1m, got %q", busy)
	}
	cfg.BusyTimeout = d
	if cfg.DBWait, err = time.ParseDuration(dbWait); err != nil || cfg.DBWait < 0 || cfg.DBWait > time.Hour {
		return Config{}, fmt.Errorf("db wait must be a duration from 0 to 1h, got %q", dbWait)
	}
	if cfg.RestoreWindow, err = time.ParseDuration(restore); err != nil || cfg.RestoreWindow < time.Minute || cfg.RestoreWindow > 90*24*time.Hour {
		return Config{}, fmt.Errorf("restore window must be a duration from 1m to 2160h (90 days), got %q", restore)
	}
	if cfg.MaintenanceEvery, err = time.ParseDuration(every); err != nil || cfg.MaintenanceEvery < time.Second || cfg.MaintenanceEvery > time.Hour {
		return Config{}, fmt.Errorf("maintenance interval must be a duration from 1s to 1h, got %q", every)
	}
	if cfg.AuditRetention, err = parseRetention(auditKeep); err != nil {
		return Config{}, fmt.Errorf("audit retention %w, got %q", err, auditKeep)
	}
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return Config{}, fmt.Errorf("public url must be an http or https URL such as https://lazarus.example.com, got %q", cfg.PublicURL)
		}
		cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	}
	if sso != nil {
		if cfg.SSO, err = sso.config(getenv, cfg.PublicURL); err != nil {
			return Config{}, err
		}
	}
	if cfg.Addr == "" || cfg.DBPath == "" {
		return Config{}, errors.New("addr and db must not be empty")
	}
	return cfg, nil
}

// maxRetention bounds a retention setting: 100 years.
const maxRetention = 36500 * 24 * time.Hour

// shortDuration writes a default as a person would type it: 24h and 1m,
// not time.Duration's 24h0m0s and 1m0s (it parses back the same).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// parseRetention reads a retention: a number of days ("400d"), a
// duration ("9600h"), or 0 (kept for ever); at least a day.
func parseRetention(s string) (time.Duration, error) {
	errBad := errors.New("must be 0 (for ever), days (400d) or a duration from 24h to 36500d")
	if s == "0" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 1 || n > 36500 {
			return 0, errBad
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, errBad
		}
	}
	if d < 24*time.Hour || d > maxRetention {
		return 0, errBad
	}
	return d, nil
}

// newLogger builds the process's logger; everything logs through it.
func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
