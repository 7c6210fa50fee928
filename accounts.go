package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/password"
)

// cliActor names the command line in the audit trail.
const cliActor = "cli"

// runAccounts runs the commands that manage users and API tokens:
// `lazarus user add` and `lazarus token create`.
func runAccounts(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := strings.Join(args[:min(2, len(args))], " ")
	var err error
	switch cmd {
	case "user add":
		var o userAddOptions
		if o, err = parseUserAdd(args[2:], getenv, stderr); err == nil {
			return userAdd(ctx, o, stdin, stdout, stderr)
		}
	case "token create":
		var o tokenCreateOptions
		if o, err = parseTokenCreate(args[2:], getenv, stderr); err == nil {
			return tokenCreate(ctx, o, stdout, stderr)
		}
	default:
		fmt.Fprint(stderr, usage)
		return usageError{fmt.Errorf("unknown command %q", cmd)}
	}
	if errors.Is(err, errHelp) {
		return nil
	}
	return usageError{err}
}

// userAddOptions are the arguments of `lazarus user add`.
type userAddOptions struct {
	DBPath        string
	Name          string
	Role          broker.Role
	Queues        broker.QueueScope // the queues the user sees; zero: every queue
	PasswordStdin bool
	cost          int // bcrypt cost; 0: password.DefaultCost
}

func parseUserAdd(args []string, getenv func(string) string, stderr io.Writer) (userAddOptions, error) {
	var o userAddOptions
	fs := accountFlags("user add NAME --role viewer|operator|admin [--queues PATTERNS] [--password-stdin] [--db PATH]",
		"Adds a dashboard user. The password is asked for (twice, not shown) when standard input is a\n"+
			"terminal, read from its first line with --password-stdin, or else generated and printed once.",
		&o.DBPath, getenv, stderr)
	var role string
	fs.StringVar(&role, "role", "", "viewer (reads everything), operator (also replays and deletes) or admin (also users and tokens)")
	fs.BoolVar(&o.PasswordStdin, "password-stdin", false, "read the password from the first line of standard input")
	var queues string
	fs.StringVar(&queues, "queues", "", "the queues the user sees, names or patterns with * (e.g. 'orders*,billing'); others are as if absent (default every queue)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return o, err
	}
	if o.Queues, err = broker.ParseQueueScope(queues); err != nil {
		return o, fmt.Errorf("--queues: %w", err)
	}
	if len(pos) != 1 {
		return o, errors.New("user add takes one user name")
	}
	o.Name, o.Role = pos[0], broker.Role(role)
	if !broker.ValidUserName(o.Name) {
		return o, fmt.Errorf("user name %q must be 1-255 letters, digits, '.', '_', '-', '@' or '+'", o.Name)
	}
	if !o.Role.Valid() {
		return o, fmt.Errorf("--role must be viewer, operator or admin, got %q", role)
	}
	return o, nil
}

// userAdd adds a user, with a password from the terminal, from standard
// input, or generated and printed once.
func userAdd(ctx context.Context, o userAddOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	b, closeDB, err := openBroker(ctx, o.DBPath)
	if err != nil {
		return err
	}
	defer closeDB()
	if _, err := b.UserByName(ctx, o.Name); err == nil {
		return fmt.Errorf("user %s already exists", o.Name)
	} else if !errors.Is(err, broker.ErrNotFound) {
		return err
	}
	pw, generated, err := choosePassword(o.Name, o.PasswordStdin, stdin, stderr)
	if err != nil {
		return err
	}
	hash, err := password.Hash(pw, o.cost)
	if err != nil {
		return err
	}
	u, err := b.CreateUserWith(ctx, broker.UserParams{Name: o.Name, Role: o.Role, PasswordHash: hash, Queues: &o.Queues}, cliActor)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Created user %s with the role %s", u.Name, u.Role)
	if !u.Queues.All() {
		fmt.Fprintf(stdout, ", seeing the queues %s only", u.Queues)
	}
	fmt.Fprintln(stdout, ".")
	if generated {
		fmt.Fprintf(stdout, "Password (shown only this once): %s\n", pw)
	}
	return nil
}

// choosePassword returns the new user's password and whether it was made
// up here (and must be shown).
func choosePassword(name string, fromStdin bool, stdin io.Reader, stderr io.Writer) (string, bool, error) {
	if fromStdin {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", false, fmt.Errorf("read password: %w", err)
		}
		pw := strings.TrimRight(line, "\r\n")
		if pw == "" {
			return "", false, errors.New("--password-stdin: no password on standard input")
		}
		return pw, false, password.Validate(pw)
	}
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		ask := func(prompt string) (string, error) {
			fmt.Fprint(stderr, prompt)
			b, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(stderr)
			return string(b), err
		}
		pw, err := ask(fmt.Sprintf("Password for %s (%d characters at least): ", name, password.MinLength))
		if err != nil {
			return "", false, fmt.Errorf("read password: %w", err)
		}
		if err := password.Validate(pw); err != nil {
			return "", false, err
		}
		again, err := ask("The same again: ")
		if err != nil {
			return "", false, fmt.Errorf("read password: %w", err)
		}
		if again != pw {
			return "", false, errors.New("the two passwords differ")
		}
		return pw, false, nil
	}
	pw, err := password.Generate()
	return pw, true, err
}

// tokenCreateOptions are the arguments of `lazarus token create`.
type tokenCreateOptions struct {
	DBPath string
	User   string
	Name   string
	Queues broker.QueueScope // within the user's; zero: the user's
}

func parseTokenCreate(args []string, getenv func(string) string, stderr io.Writer) (tokenCreateOptions, error) {
	var o tokenCreateOptions
	fs := accountFlags("token create --user NAME --name TOKENNAME [--queues PATTERNS] [--db PATH]",
		"Makes an API token for a user: a bearer token for the JSON API that acts with the user's\n"+
			"role. The token is printed on standard output, once; only its hash is kept.",
		&o.DBPath, getenv, stderr)
	fs.StringVar(&o.User, "user", "", "the user the token acts for")
	fs.StringVar(&o.Name, "name", "", "what the token is for, e.g. ci-replays")
	var queues string
	fs.StringVar(&queues, "queues", "", "limit the token to these queues, names or patterns with * (e.g. 'orders*'), within its user's (default the user's)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return o, err
	}
	if o.Queues, err = broker.ParseQueueScope(queues); err != nil {
		return o, fmt.Errorf("--queues: %w", err)
	}
	if len(pos) > 0 {
		return o, fmt.Errorf("unexpected argument %q", pos[0])
	}
	if o.User == "" || o.Name == "" {
		return o, errors.New("token create needs --user and --name")
	}
	return o, nil
}

// tokenCreate makes an API token and prints it, alone on its line, so that
// a script can take it: TOKEN=$(lazarus token create ...).
func tokenCreate(ctx context.Context, o tokenCreateOptions, stdout, stderr io.Writer) error {
	b, closeDB, err := openExisting(ctx, o.DBPath)
	if err != nil {
		return err
	}
	defer closeDB()
	u, err := b.UserByName(ctx, o.User)
	if errors.Is(err, broker.ErrNotFound) {
		return fmt.Errorf("there is no user %s (add one with: lazarus user add)", o.User)
	}
	if err != nil {
		return err
	}
	secret, t, err := b.CreateTokenWith(ctx, broker.TokenParams{UserID: u.ID, Name: o.Name, Queues: o.Queues}, cliActor)
	if err != nil {
		return err
	}
	scope := ""
	if sc := t.Scope(); !sc.All() {
		scope = ", queues " + sc.String()
	}
	fmt.Fprintf(stderr, "API token %q for %s (role %s%s), shown only this once:\n", t.Name, t.User, t.Role, scope)
	fmt.Fprintln(stdout, secret)
	return nil
}

// accountFlags is the flag set of an account command, with its --db.
func accountFlags(synopsis, about string, dbPath *string, getenv func(string) string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lazarus "+synopsis, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := getenv("LAZARUS_DB")
	if def == "" {
		def = defaultDB
	}
	fs.StringVar(dbPath, "db", def, "SQLite database file, or a postgres:// URL (env LAZARUS_DB)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: lazarus %s\n\n%s\n\nFlags:\n", synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseInterleaved parses flags that may come before or after positional
// arguments (`user add NAME --role R`) and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// openBroker opens the database for a command and returns a broker on it
// and the function that closes both.
func openBroker(ctx context.Context, path string) (*broker.Broker, func(), error) {
	return openBrokerAt(ctx, path, true)
}

// openExisting is openBroker for a command that reads what a server wrote
// (token create, archive import): a database that is not there is a
// mistaken --db, said as such, and no empty file is left behind.
func openExisting(ctx context.Context, path string) (*broker.Broker, func(), error) {
	return openBrokerAt(ctx, path, false)
}

func openBrokerAt(ctx context.Context, path string, create bool) (*broker.Broker, func(), error) {
	if err := db.CheckName(path); err != nil {
		return nil, nil, err
	}
	if !create && !db.IsPostgres(path) {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("database %s does not exist: is --db (or LAZARUS_DB) right? (lazarus demo's is %s)", path, defaultDemoDB)
		}
	}
	d, err := db.Open(ctx, path, db.SyncFull)
	if err != nil {
		return nil, nil, err
	}
	bc := broker.Config{Store: d}
	if n := d.Notifier(); n != nil {
		bc.Notifier = n
	}
	b := broker.New(bc)
	return b, func() { b.Close(); d.Close() }, nil
}

// adminUser is the user that LAZARUS_ADMIN_PASSWORD sets and that a first
// start creates.
const adminUser = "admin"

// ensureAdmin makes sure somebody can log in. LAZARUS_ADMIN_PASSWORD
// creates the user admin or resets its password and role (a password that
// is already right is left alone, with its sessions). Without it, a
// database with no user at all gets an admin with a generated password,
// returned to be shown once. There is no default password.
func ensureAdmin(ctx context.Context, b *broker.Broker, cfg Config) (generated string, err error) {
	if cfg.AdminPassword != "" {
		u, err := b.UserByName(ctx, adminUser)
		if err == nil && u.Role == broker.RoleAdmin && password.Match(u.PasswordHash, cfg.AdminPassword) {
			return "", nil
		}
		if err != nil && !errors.Is(err, broker.ErrNotFound) {
			return "", err
		}
		hash, err := password.Hash(cfg.AdminPassword, cfg.bcryptCost)
		if err != nil {
			return "", fmt.Errorf("LAZARUS_ADMIN_PASSWORD: %w", err)
		}
		_, err = b.PutUser(ctx, adminUser, broker.RoleAdmin, hash, "system")
		return "", err
	}
	users, err := b.Users(ctx)
	if err != nil || len(users) > 0 {
		return "", err
	}
	pw, err := password.Generate()
	if err != nil {
		return "", err
	}
	hash, err := password.Hash(pw, cfg.bcryptCost)
	if err != nil {
		return "", err
	}
	if _, err := b.CreateUser(ctx, adminUser, broker.RoleAdmin, hash, "system"); err != nil {
		return "", err
	}
	return pw, nil
}

// printFirstAdmin shows the first admin's generated password, once, on the
// terminal (standard error) rather than through the logger: log shippers
// index structured fields, and a password has no business there.
func printFirstAdmin(w io.Writer, url, pw string) {
	line := strings.Repeat("=", 72)
	fmt.Fprintf(w, "\n%s\n  FIRST START: Lazarus created the user admin, with this password:\n\n"+
		"      user name:  %s\n      password:   %s\n\n"+
		"  It is shown only this once. Log in at %s/login\n"+
		"  Lost it? Start again with LAZARUS_ADMIN_PASSWORD=<12+ characters> to reset it.\n%s\n\n",
		line, adminUser, pw, url, line)
}
