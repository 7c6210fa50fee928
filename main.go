// Command lazarus is the Lazarus message broker: its state in SQLite, its
// JSON API and the dead-letter dashboard served over HTTP.
//
// Usage:
//
//	lazarus serve [--addr 127.0.0.1:8080] [--db ./lazarus.db] [--sync full|normal] [--demo]
//	lazarus demo  [same flags]   serve a database of its own with demo traffic
//	lazarus user add NAME --role viewer|operator|admin [--password-stdin] [--db PATH]
//	lazarus token create --user NAME --name TOKENNAME [--db PATH]
//	lazarus archive import FILE [--db PATH]
//	lazarus dlq|jobs|groups|hold|release ...   talk to a running server (docs/cli.md)
//	lazarus mcp [--server URL]   the Model Context Protocol on stdio, for agents (docs/agents.md)
//	lazarus help
//
// This package reads the flags and the environment into a Config and wires
// db → broker → web; nothing else in the project reads either.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/lazarus-dlq/lazarus/internal/gcfloor"
	"github.com/lazarus-dlq/lazarus/version"
)

const usage = `Lazarus: a message broker on SQLite, with dead letters you can see
and replay.

Usage:
  lazarus serve [flags]   serve the broker's API and dashboard (--demo adds
                          demo traffic)
  lazarus demo [flags]    serve a database of its own (default
                          ./lazarus-demo.db) with demo traffic: dead letters
                          pile up within seconds
  lazarus user add NAME --role ROLE [--password-stdin] [--db PATH]
                          add a dashboard user, ROLE viewer, operator or
                          admin; the password is asked for on the terminal,
                          read from stdin, or generated and printed once
  lazarus token create --user NAME --name TOKENNAME [--db PATH]
                          make an API token acting with the user's role;
                          printed once
  lazarus archive import FILE [--db PATH]
                          file the dead letters of an archive file (or an
                          NDJSON export) again as dead letters; says how many
                          were imported and skipped
  lazarus dlq list|show|replay|delete|export [flags]
                          a running server's dead letters: list, show,
                          replay or delete (by id, or by filter after a dry
                          run and a question), export
  lazarus jobs list|show|pause|resume|cancel [flags]
                          its bulk jobs
  lazarus groups list|show|set [flags]
                          its error groups and their state
  lazarus hold --queue Q [--consumer-group G] --reason WHY
                          hold a queue's deliveries (hold list: the holds)
  lazarus release ID      release a hold
  lazarus mcp [--server URL]
                          serve the Model Context Protocol on standard input
                          and output, for an agent (docs/agents.md)
  lazarus version         print the version and the commit it was built from
  lazarus help            print this help

Flags of serve and demo (flags win over the environment):
  --addr                  listen address (env LAZARUS_ADDR,
                          default 127.0.0.1:8080)
  --db                    SQLite database file, created if missing, or a
                          postgres:// URL (docs/postgres.md); serve: env
                          LAZARUS_DB, default ./lazarus.db; demo: --db only
                          (LAZARUS_DB is ignored), default ./lazarus-demo.db
  --sync                  full or normal (env LAZARUS_SYNC, default full)
  --db-wait               PostgreSQL: how long to keep trying at start while
                          the server cannot be reached (env LAZARUS_DB_WAIT,
                          default 1m; 0: fail at once)
  --busy-timeout          how long a write waits for a lock another process
                          holds on the database before it is answered 503
                          (env LAZARUS_BUSY_TIMEOUT, default 5s)
  --log-format            text or json (env LAZARUS_LOG_FORMAT, default text)
  --log-level             debug, info, warn or error (env LAZARUS_LOG_LEVEL,
                          default info)
  --archive-dir           where dead letters of queues with deadLetterArchive
                          are written before they expire
                          (env LAZARUS_ARCHIVE_DIR, default none)
  --restore-window        how long a deleted dead letter can be restored
                          (env LAZARUS_RESTORE_WINDOW, default 24h)
  --maintenance-every     how often maintenance (retention, expiry, sweeps)
                          runs (env LAZARUS_MAINTENANCE_EVERY, default 1m)
  --audit-retention       how long audit entries are kept; 0 for ever
                          (env LAZARUS_AUDIT_RETENTION, default 400d)
  --public-url            the dashboard's base URL, for the links in
                          notifications (env LAZARUS_PUBLIC_URL, default
                          the listen address, with a warning)
  --notify-allow-private  notification channels may reach loopback,
                          link-local and metadata addresses (default off)
  --demo                  serve only: also run demo traffic

Single sign-on, serve only (docs/sso.md; flags win over the environment):
  --oidc-issuer           the OpenID Connect provider's issuer URL; needs
                          --public-url (env LAZARUS_OIDC_ISSUER)
  --oidc-client-id        the client id registered there
                          (env LAZARUS_OIDC_CLIENT_ID)
  --oidc-client-secret-file
                          a file holding the client's secret
                          (env LAZARUS_OIDC_CLIENT_SECRET_FILE)
  --oidc-scopes           scopes beside openid (env LAZARUS_OIDC_SCOPES,
                          default profile,email)
  --oidc-name-claim       the claim naming a new user
                          (env LAZARUS_OIDC_NAME_CLAIM, default
                          preferred_username)
  --oidc-claim            the claim mapped to roles and queues
                          (env LAZARUS_OIDC_CLAIM, default groups)
  --oidc-role VALUE=ROLE  repeatable: members of VALUE get ROLE
                          (env LAZARUS_OIDC_ROLES, VALUE=ROLE;VALUE=ROLE)
  --oidc-queues VALUE=PATTERNS
                          repeatable: members of VALUE see only those
                          queues (env LAZARUS_OIDC_QUEUES,
                          VALUE=PATTERNS;VALUE=PATTERNS)
  --oidc-label            the login page's button (env LAZARUS_OIDC_LABEL)

Environment only:
  LAZARUS_ADMIN_PASSWORD  creates the user admin at start, or resets its
                          password; without it, a database with no user gets
                          an admin whose generated password is printed once
  LAZARUS_ADMIN_TOKEN     when set, accepted as an admin bearer token on the
                          API
  LAZARUS_SECURE_COOKIES  true: the dashboard's cookies are always Secure
  LAZARUS_API_OPEN        true: the API needs no token (UNSAFE, local
                          development only)
  LAZARUS_METRICS_PUBLIC  true: /metrics answers without a bearer token
  LAZARUS_MAX_PAYLOAD_BYTES
                          the largest payload a push may carry
                          (default 4194304)
  LAZARUS_OIDC_CLIENT_SECRET
                          the single sign-on client's secret (or
                          --oidc-client-secret-file: never a flag's value)

The commands that talk to a running server (dlq, jobs, groups, hold,
release) take --server URL (env LAZARUS_SERVER, default
http://localhost:8080) and --json (the API's JSON instead of a table), and
read the API token from LAZARUS_TOKEN only (a flag would show it in the
process list). Their exit status (docs/cli.md):
  0                       done
  1                       failed (the server unreachable, a job failed)
  2                       usage: the command line, or input the server
                          refused (400)
  3                       refused: no valid token (401), or its role may
                          not do this (403)
  4                       not found (404)
  5                       a bulk action's dry run counted more than --max
  6                       not confirmed: answered no, or no terminal to ask
                          on and no --yes; nothing was changed
  7                       refused by the server's rules (409)
  8                       the job paused or was cancelled before its end

Run 'lazarus serve --help' (or any command with --help) for the details
of each flag.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once, mid-shutdown
	}()
	defer gcfloor.Start(gcfloor.Floor, os.Getenv)() // the process's collector: internal/gcfloor
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lazarus:", err)
		os.Exit(exitCode(err))
	}
}

// usageError marks a command line that could not be understood.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitCode is the exit status of a command that failed: 2 for a usage
// error, the client commands' own (cli_remote.go) for theirs, else 1.
func exitCode(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.As(err, new(usageError)) {
		return 2
	}
	if code := remoteExitCode(err); code != 0 {
		return code
	}
	return 1
}

// run is the whole program; ctx is cancelled on SIGINT or SIGTERM.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{errors.New("a command is required")}
	}
	switch cmd := args[0]; cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "--version":
		fmt.Fprintln(stdout, version.Get())
		return nil
	case "serve", "demo":
		cfg, err := parseConfig(cmd, args[1:], getenv, stderr)
		if errors.Is(err, errHelp) {
			return nil
		}
		if err != nil {
			return usageError{err}
		}
		log := newLogger(cfg, stderr)
		if err := serve(ctx, cfg, log, stderr, nil); err != nil {
			return err
		}
		log.Info("stopped")
		return nil
	case "user", "token":
		return runAccounts(ctx, args, getenv, stdin, stdout, stderr)
	case "archive":
		return runArchive(ctx, args, getenv, stdout, stderr)
	case "dlq", "jobs", "groups", "hold", "release":
		return runRemote(ctx, args, getenv, stdin, stdout, stderr)
	case "mcp":
		return runMCP(ctx, args, getenv, stdin, stdout, stderr)
	default:
		fmt.Fprint(stderr, usage)
		return usageError{fmt.Errorf("unknown command %q", cmd)}
	}
}
