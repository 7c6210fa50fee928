package main

// The client commands (`lazarus dlq|jobs|groups|hold|release`) talk to a
// running server through its JSON API, with the typed client of package
// client (which the MCP server uses too). They share what is here: the
// --server and --json flags, the token from LAZARUS_TOKEN, the exit codes,
// tables, the question a bulk action asks and the progress bar of a job.
//
// Libraries, and why:
//   - flags: the standard flag package, as every other command here
//     (parseInterleaved lets flags follow positional arguments). A flags
//     library (cobra, kong) would give this binary two ways of parsing
//     for one small tree of subcommands, and nothing a user sees that
//     flag.FlagSet does not: each command's --help is its FlagSet's.
//   - tables: text/tabwriter of the standard library aligns the columns;
//     the tables are plain (no borders, no colour) so that they can be
//     read in a log or piped to grep, and --json is there for programs.
//   - progress: github.com/schollz/progressbar/v3, well kept and widely
//     used, draws the bar, its rate and its estimate, and redraws it in
//     place on a terminal; only drawn when standard output is one.
//   - terminals: golang.org/x/term (already a dependency, for passwords)
//     says whether standard input and output are terminals.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/client"
)

// Exit codes of the client commands, for scripts (docs/cli.md). 0 is
// done, 1 a failure (the server could not be reached, an internal error,
// a job that failed), 2 a usage error (the command line, or input the
// server refused with 400).
const (
	exitRefused      = 3 // 401 or 403: no valid token, or its role may not do this
	exitNotFound     = 4 // 404: no such dead letter, job, error group or hold
	exitOverMax      = 5 // a bulk action's dry run counted more than --max
	exitNotConfirmed = 6 // the question was answered no, or could not be asked: nothing changed
	exitConflict     = 7 // 409: the server's rules refused it (a finished job, a resolve with copies pending)
	exitUnfinished   = 8 // the job paused (a person, or its canary) or was cancelled
)

// exitError is an error with its exit code.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// remoteExitCode is the exit code of an answer of the API that is not a
// success; 0 when err is not one (or has a status with no code of its
// own).
func remoteExitCode(err error) int {
	switch s := client.StatusOf(err); {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return exitRefused
	case s == http.StatusNotFound:
		return exitNotFound
	case s == http.StatusConflict:
		return exitConflict
	case s == http.StatusBadRequest || s == http.StatusUnprocessableEntity || s == http.StatusRequestEntityTooLarge:
		return 2
	}
	return 0
}

// pollEvery is how often a job is read while it is waited for.
const pollEvery = 250 * time.Millisecond

// remote is a client command's connection to its server and its output.
type remote struct {
	c      *client.Client
	json   bool
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// poll is how often a job is read while waited for.
	poll time.Duration
}

// remoteOptions are the flags every client command has.
type remoteOptions struct {
	server string
	json   bool
}

// remoteFlags is the flag set of a client command, with --server and
// (when withJSON) --json.
func remoteFlags(synopsis, about string, withJSON bool, getenv func(string) string, stderr io.Writer) (*flag.FlagSet, *remoteOptions) {
	o := &remoteOptions{}
	fs := flag.NewFlagSet("lazarus "+synopsis, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := getenv("LAZARUS_SERVER")
	if def == "" {
		def = client.DefaultServer
	}
	fs.StringVar(&o.server, "server", def, "the server's URL (env LAZARUS_SERVER); the token is read from LAZARUS_TOKEN")
	if withJSON {
		fs.BoolVar(&o.json, "json", false, "print the API's JSON instead of a table")
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: lazarus %s\n\n%s\n\nFlags:\n", synopsis, about)
		fs.PrintDefaults()
	}
	return fs, o
}

// connect makes the command's client. The token comes from LAZARUS_TOKEN
// only: a flag's value would show in the process list.
func (o *remoteOptions) connect(getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) (*remote, error) {
	c, err := client.New(o.server, getenv("LAZARUS_TOKEN"))
	if err != nil {
		return nil, usageError{fmt.Errorf("--server: %w", err)}
	}
	return &remote{c: c, json: o.json, stdin: stdin, stdout: stdout, stderr: stderr, poll: pollEvery}, nil
}

// parseRemote parses a client command's flags; errHelp after --help.
func parseRemote(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := parseInterleaved(fs, args)
	if err != nil && !errors.Is(err, errHelp) {
		return nil, usageError{err}
	}
	return pos, err
}

// explain turns an answer of the API that is not a success into the
// command's error: the API's text, a hint where one helps, and the exit
// code (remoteExitCode) kept reachable.
func (r *remote) explain(err error) error {
	if err == nil {
		return nil
	}
	switch client.StatusOf(err) {
	case http.StatusUnauthorized:
		return fmt.Errorf("%w: set LAZARUS_TOKEN to an API token of %s (lazarus token create makes one)", err, r.c.Server())
	case http.StatusForbidden:
		return fmt.Errorf("refused: %w", err)
	case 0:
		if errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("%s: %w", r.c.Server(), err)
	}
	return err
}

// printJSON prints an answer's body as the API sent it, on its own line.
func (r *remote) printJSON(raw json.RawMessage) error {
	_, err := fmt.Fprintf(r.stdout, "%s\n", bytes.TrimRight(raw, "\n"))
	return err
}

// table starts a table on the command's output: columns separated by
// tabs, aligned when flushed.
func (r *remote) table(header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(r.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	return tw
}

// row writes a table row: each cell cleaned of what would break the
// table or drive the terminal.
func row(tw io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = clean(c, 0)
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
}

// clean makes text from a stranger (an error, a payload, a note) safe to
// print on a terminal: control characters (an escape sequence that would
// move the cursor or retitle the window) and bidirectional overrides
// (text that reads otherwise than it is) become U+FFFD, tabs and line
// ends a space; cut to max runes with "…" (0: whole).
func clean(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, c := range s {
		if max > 0 && n == max {
			b.WriteString("…")
			break
		}
		n++
		switch {
		case c == '\t' || c == '\n' || c == '\r':
			b.WriteByte(' ')
		case c == utf8.RuneError || unicode.IsControl(c) || unicode.Is(unicode.Bidi_Control, c):
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// cleanLines is clean for text shown whole over several lines (a
// payload): line ends stay.
func cleanLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = clean(l, 0)
	}
	return strings.Join(lines, "\n")
}

// count writes n with a comma every three digits: 1,234.
func count(n int64) string { return broker.Thousands(n) }

// when writes a time for a table: UTC, to the second; "-" for none.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// orDash is *s, or "-" for nil or "".
func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// isTerminal says whether f (standard input or output) is a terminal.
func isTerminal(f any) bool {
	fd, ok := f.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(fd.Fd()))
}

// confirm asks question on the terminal and returns nil on yes. yes
// (--yes) answers it for a script; without a terminal to ask on, and
// without --yes, the answer is no, said as such: a script never goes
// ahead by accident.
func (r *remote) confirm(ctx context.Context, question string, yes bool) error {
	if yes {
		return nil
	}
	if !isTerminal(r.stdin) {
		return exitError{exitNotConfirmed, errors.New("not confirmed: standard input is not a terminal to ask on; add --yes to go ahead without the question (nothing was changed)")}
	}
	fmt.Fprintf(r.stderr, "%s [y/N] ", question)
	// The answer is read aside, so that Ctrl-C (ctx) ends the question
	// at once rather than after the next line typed.
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(r.stdin).ReadString('\n')
		got <- answer{line, err}
	}()
	var a answer
	select {
	case <-ctx.Done():
		fmt.Fprintln(r.stderr)
		return exitError{exitNotConfirmed, errors.New("interrupted: nothing was changed")}
	case a = <-got:
	}
	if a.err != nil && !errors.Is(a.err, io.EOF) {
		return fmt.Errorf("read the answer: %w", a.err)
	}
	switch strings.ToLower(strings.TrimSpace(a.line)) {
	case "y", "yes":
		return nil
	}
	return exitError{exitNotConfirmed, errors.New("not confirmed: nothing was changed")}
}

// waitJob follows a job until it is finished or paused, with a progress
// bar on standard output when it is a terminal and the output is a
// table, and returns it as it ended. Interrupted (Ctrl-C), it says that
// the job goes on in the server.
func (r *remote) waitJob(ctx context.Context, id int64, verb string) (*client.JobDetail, error) {
	var bar *progressbar.ProgressBar
	var seen func(client.Job)
	if !r.json && isTerminal(r.stdout) {
		seen = func(j client.Job) {
			if bar == nil {
				bar = progressbar.NewOptions64(max(j.Planned, 1), progressbar.OptionSetWriter(r.stdout),
					progressbar.OptionSetDescription(fmt.Sprintf("job %d: %s", id, verb)), progressbar.OptionShowCount(),
					progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetWidth(30))
			}
			if j.Planned > 0 && bar.GetMax64() != j.Planned {
				bar.ChangeMax64(j.Planned)
			}
			_ = bar.Set64(min(j.Done+j.Skipped+j.Failed, max(j.Planned, 1)))
		}
	}
	j, err := r.c.WaitJob(ctx, id, r.poll, seen)
	if bar != nil {
		if err == nil && j.Job.State == client.JobDone {
			_ = bar.Finish()
		}
		fmt.Fprintln(r.stdout)
	}
	if err != nil && ctx.Err() != nil {
		return j, fmt.Errorf("stopped waiting; job %d goes on in the server (lazarus jobs show %d, lazarus jobs cancel %d)", id, id, id)
	}
	return j, r.explain(err)
}

// jobEnd is the error of a job that did not end done: failed (1), or
// paused or cancelled (exitUnfinished).
func jobEnd(j client.Job) error {
	why := ""
	if j.Reason != "" {
		why = ": " + clean(j.Reason, 200)
	}
	switch j.State {
	case client.JobDone:
		return nil
	case client.JobFailed:
		return fmt.Errorf("job %d failed%s; what it did before stays done", j.ID, why)
	}
	return exitError{exitUnfinished, fmt.Errorf("job %d is %s%s (lazarus jobs resume %d goes on)", j.ID, j.State, why, j.ID)}
}

// runRemote runs the client commands: dlq, jobs, groups, hold, release.
func runRemote(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	var err error
	switch args[0] {
	case "dlq":
		err = runDLQ(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "jobs":
		err = runJobs(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "groups":
		err = runGroups(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "hold":
		err = runHold(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "release":
		err = runRelease(ctx, args[1:], getenv, stdin, stdout, stderr)
	}
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// subcommand splits "dlq list ..." into its verb and the rest, or says
// which verbs there are.
func subcommand(cmd string, args []string, verbs ...string) (string, []string, error) {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		return "", nil, usageError{fmt.Errorf("lazarus %s takes one of: %s (each with --help; docs/cli.md)", cmd, strings.Join(verbs, ", "))}
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return "", nil, usageError{fmt.Errorf("lazarus %s needs one of: %s", cmd, strings.Join(verbs, ", "))}
	}
	for _, v := range verbs {
		if args[0] == v {
			return v, args[1:], nil
		}
	}
	return "", nil, usageError{fmt.Errorf("unknown command %q: lazarus %s takes %s", cmd+" "+args[0], cmd, strings.Join(verbs, ", "))}
}

// parseID reads a job's or a hold's id.
func parseID(what, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, usageError{fmt.Errorf("%s must be a positive whole number, got %q", what, s)}
	}
	return id, nil
}

// oneArg checks a command got exactly one positional argument.
func oneArg(pos []string, what string) (string, error) {
	if len(pos) != 1 {
		return "", usageError{fmt.Errorf("give one %s", what)}
	}
	return pos[0], nil
}

// parseNoArgs parses the flags of a command that takes no positional
// argument, and refuses one; hint, when given, says where it belongs.
func parseNoArgs(fs *flag.FlagSet, args []string, hint string) error {
	pos, err := parseRemote(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		if hint != "" {
			return usageError{fmt.Errorf("unexpected argument %q: %s", pos[0], hint)}
		}
		return usageError{fmt.Errorf("unexpected argument %q", pos[0])}
	}
	return nil
}

// parseOne parses the flags of a command that takes one positional
// argument, what, and returns it.
func parseOne(fs *flag.FlagSet, args []string, what string) (string, error) {
	pos, err := parseRemote(fs, args)
	if err != nil {
		return "", err
	}
	return oneArg(pos, what)
}

// parseOneID is parseOne for a command whose argument is an id (a job's,
// a hold's); idWhat names it in the refusal of one that is not.
func parseOneID(fs *flag.FlagSet, args []string, what, idWhat string) (int64, error) {
	arg, err := parseOne(fs, args, what)
	if err != nil {
		return 0, err
	}
	return parseID(idWhat, arg)
}
