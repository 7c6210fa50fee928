package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"golang.org/x/crypto/bcrypt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
	notifysend "github.com/lazarus-dlq/lazarus/notify"
	"github.com/lazarus-dlq/lazarus/password"
	"github.com/lazarus-dlq/lazarus/web"
)

// timeout bounds every wait on the page, in milliseconds: generous,
// because the machine running the tests is shared.
const timeout = 15_000

// screenshotDir is where the run leaves its screenshots for people to
// look at (gitignored).
const screenshotDir = "screenshots"

// clock is the wall clock moved back by an offset, so that fixtures can
// file dead letters hours ago. Tests set the offset before the browser
// comes in and put it back to zero.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) set(offset time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = offset
}

// app is the real server, in-process on 127.0.0.1:0 over a fresh SQLite
// file, wired the way serve.go wires it.
type app struct {
	t      *testing.T
	ctx    context.Context
	url    string
	broker *broker.Broker
	clock  *clock
}

// newApp starts a server for one test; it stops when the test ends.
func newApp(t *testing.T) *app {
	t.Helper()
	return newAppFilled(t, nil)
}

// newAppFilled is newApp with fill run on the store before the broker and
// the server start: for fixtures written around the broker.
func newAppFilled(t *testing.T, fill func(d *db.DB, clk *clock)) *app {
	t.Helper()
	return startApp(t, fill, nil)
}

// newAppNotifying is newApp that sends notifications, as serve does with
// --public-url (its own address) and --notify-allow-private (the test's
// receivers are on the loopback): the broker's whole background work
// (broker.Run: the jobs, maintenance, the sending) runs.
func newAppNotifying(t *testing.T) *app {
	t.Helper()
	return startApp(t, nil, func(publicURL string) broker.Sender {
		return notifysend.New(notifysend.Config{PublicURL: publicURL, AllowPrivate: true, Timeout: 5 * time.Second})
	})
}

// startApp starts the server of newAppFilled; sender, when set, makes
// the broker's Sender from the server's URL.
func startApp(t *testing.T, fill func(d *db.DB, clk *clock), sender func(publicURL string) broker.Sender) *app {
	t.Helper()
	return startAppWith(t, fill, sender, nil)
}

// startAppWith is startApp with single sign-on when sso is set: it makes
// the configuration from the server's URL (the redirect URIs).
func startAppWith(t *testing.T, fill func(d *db.DB, clk *clock), sender func(publicURL string) broker.Sender, sso func(publicURL string) *web.SSOConfig) *app {
	t.Helper()
	if startErr != nil {
		t.Fatalf("no browser: %v", startErr)
	}
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The journeys run on SQLite, or on PostgreSQL when asked
	// (LAZARUS_TEST_STORE=postgres: go tool task test runs some so).
	d, err := db.Open(context.Background(), pgtest.StoreAt(t, "lazarus.db", db.Prepare), db.SyncNormal)
	if err != nil {
		t.Fatalf("open database: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close database: %v", err)
		}
	})
	clk := &clock{}
	if fill != nil {
		fill(d, clk)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	bc := broker.Config{Store: d, Logger: log, Clock: clk}
	if sender != nil {
		bc.Notify = sender("http://" + ln.Addr().String())
	}
	b := broker.New(bc)
	var ssoConfig *web.SSOConfig
	if sso != nil {
		ssoConfig = sso("http://" + ln.Addr().String())
	}
	srv := &http.Server{
		Handler: web.New(web.Config{
			Broker:     b,
			Logger:     log,
			HealthFunc: d.Ping,
			Clock:      clk,
			// The dummy hash that unknown users are checked against
			// costs what the fixtures' hashes cost.
			BcryptCost: bcrypt.MinCost,
			SSO:        ssoConfig,
		}).Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(b.Close)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("shut the server down: %v", err)
		}
		b.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	// The bulk actions' jobs run in the background, as serve runs them.
	jobsCtx, stopJobs := context.WithCancel(context.Background())
	jobsDone := make(chan struct{})
	go func() {
		defer close(jobsDone)
		if sender != nil {
			b.Run(jobsCtx, broker.RunConfig{})
			return
		}
		b.RunJobs(jobsCtx)
	}()
	t.Cleanup(func() {
		stopJobs()
		<-jobsDone
	})
	return &app{t: t, ctx: ctx, url: "http://" + ln.Addr().String(), broker: b, clock: clk}
}

// user creates a dashboard user with a password and returns the password.
// The hash is bcrypt at its least cost: the tests check the login, not
// bcrypt's strength.
func (a *app) user(name string, role broker.Role) string {
	a.t.Helper()
	pw := name + "-correct-horse-battery"
	hash, err := password.Hash(pw, bcrypt.MinCost)
	if err != nil {
		a.t.Fatalf("hash password: %v", err)
	}
	if _, err := a.broker.CreateUser(a.ctx, name, role, hash, "e2e"); err != nil {
		a.t.Fatalf("create user %s: %v", name, err)
	}
	return pw
}

// configure sets a queue's options.
func (a *app) configure(queue string, opts map[string]any) {
	a.t.Helper()
	raw := map[string]json.RawMessage{}
	for k, v := range opts {
		b, err := json.Marshal(v)
		if err != nil {
			a.t.Fatal(err)
		}
		raw[k] = b
	}
	if _, err := a.broker.Configure(a.ctx, queue, raw, "e2e"); err != nil {
		a.t.Fatalf("configure %s: %v", queue, err)
	}
}

// msg is a message a producer pushes.
type msg struct {
	Tx, Partition, Trace string
	Payload              string // JSON
}

// push stores messages in queue, a thousand per call.
func (a *app) push(queue string, msgs ...msg) {
	a.t.Helper()
	for len(msgs) > 0 {
		n := min(len(msgs), broker.MaxPushItems)
		items := make([]broker.PushItem, n)
		for i, m := range msgs[:n] {
			items[i] = broker.PushItem{Queue: queue, Partition: m.Partition, TransactionID: m.Tx, TraceID: m.Trace, Payload: json.RawMessage(m.Payload)}
		}
		if _, err := a.broker.Push(a.ctx, items); err != nil {
			a.t.Fatalf("push to %s: %v", queue, err)
		}
		msgs = msgs[n:]
	}
}

// consume is a consumer group working through everything in queue, the
// way a worker would: it pops batches and acknowledges each message,
// "failed" with the error errs gives for its transactionId (so that it is
// retried, then dead-lettered after the queue's retries), "completed"
// otherwise. With dlq set the failures go to the dead letters at once.
func (a *app) consume(queue, group string, errs map[string]string, dlq bool) {
	a.t.Helper()
	status := broker.AckFailed
	if dlq {
		status = broker.AckDLQ
	}
	for range 100_000 {
		res, err := a.broker.Pop(a.ctx, broker.PopRequest{Queue: queue, Group: group, Batch: broker.MaxBatch})
		if err != nil {
			a.t.Fatalf("pop %s for %s: %v", queue, group, err)
		}
		if len(res.Messages) == 0 {
			return
		}
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}
			if e, ok := errs[m.TransactionID]; ok {
				acks[i].Status, acks[i].Error = status, e
			}
		}
		results, err := a.broker.AckBatch(a.ctx, group, acks)
		if err != nil {
			a.t.Fatalf("ack %s for %s: %v", queue, group, err)
		}
		for _, r := range results {
			if !r.Success {
				a.t.Fatalf("ack %s of %s for %s refused: %s", r.TransactionID, queue, group, r.Error)
			}
		}
	}
	a.t.Fatalf("consume %s for %s: the queue never emptied", queue, group)
}

// count is how many dead letters q selects, straight from the broker.
func (a *app) count(q broker.DLQQuery) int64 {
	a.t.Helper()
	q.Limit, q.WithTotal = 1, true
	page, err := a.broker.DeadLetters(a.ctx, q)
	if err != nil {
		a.t.Fatalf("count dead letters: %v", err)
	}
	return page.Total
}

// gone fails unless the message has no dead letter left.
func (a *app) gone(id string) {
	a.t.Helper()
	_, err := a.broker.DeadLetter(a.ctx, id, "")
	if !errors.Is(err, broker.ErrNotFound) {
		a.t.Errorf("dead letter %s: want it gone, got err %v", id, err)
	}
}

// visit is one person at a browser: a fresh browser context and its page.
type visit struct {
	t      *testing.T
	app    *app
	ctx    playwright.BrowserContext
	page   playwright.Page
	expect playwright.PlaywrightAssertions

	mu       sync.Mutex
	problems []string // uncaught script errors and CSP violations
	notes    []string // console messages and failed requests, shown when the test fails
}

// browse opens a fresh browser context on the app: 1280x800, light.
func (a *app) browse() *visit {
	a.t.Helper()
	bctx, err := browser.NewContext(playwright.BrowserNewContextOptions{
		BaseURL:     playwright.String(a.url),
		Viewport:    &playwright.Size{Width: 1280, Height: 800},
		ColorScheme: playwright.ColorSchemeLight,
		Locale:      playwright.String("en-US"),
		TimezoneId:  playwright.String("UTC"),
	})
	if err != nil {
		a.t.Fatalf("new browser context: %v", err)
	}
	bctx.SetDefaultTimeout(timeout)
	bctx.SetDefaultNavigationTimeout(timeout)
	page, err := bctx.NewPage()
	if err != nil {
		a.t.Fatalf("new page: %v", err)
	}
	v := &visit{t: a.t, app: a, ctx: bctx, page: page, expect: playwright.NewPlaywrightAssertions(timeout)}
	page.OnPageError(func(err error) {
		v.problem("uncaught script error: " + err.Error())
	})
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if strings.Contains(m.Text(), "Content Security Policy") {
			v.problem("CSP violation: " + m.Text())
		}
		v.note("console " + m.Type() + ": " + m.Text())
	})
	page.OnResponse(func(r playwright.Response) {
		if r.Status() >= 400 {
			v.note(fmt.Sprintf("%s %s: %d", r.Request().Method(), r.URL(), r.Status()))
		}
	})
	a.t.Cleanup(func() {
		v.mu.Lock()
		for _, p := range v.problems {
			a.t.Errorf("in the page: %s", p)
		}
		if a.t.Failed() {
			for _, n := range v.notes {
				a.t.Logf("browser: %s", n)
			}
		}
		v.mu.Unlock()
		if err := bctx.Close(); err != nil {
			a.t.Errorf("close browser context: %v", err)
		}
	})
	return v
}

func (v *visit) note(s string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.notes = append(v.notes, s)
}

func (v *visit) problem(s string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.problems = append(v.problems, s)
}

// check fails the test at once when a browser step failed.
func (v *visit) check(err error, format string, args ...any) {
	v.t.Helper()
	if err != nil {
		v.t.Fatalf("%s: %v (at %s)", fmt.Sprintf(format, args...), err, v.page.URL())
	}
}

// open goes to a path of the app.
func (v *visit) open(path string) {
	v.t.Helper()
	_, err := v.page.Goto(path)
	v.check(err, "go to %s", path)
}

// id finds elements by data-testid.
func (v *visit) id(testID string) playwright.Locator { return v.page.GetByTestId(testID) }

// see waits until the locator is visible.
func (v *visit) see(l playwright.Locator, what string) {
	v.t.Helper()
	v.check(v.expect.Locator(l).ToBeVisible(), "%s should be visible", what)
}

// count waits until the locator matches n elements.
func (v *visit) count(l playwright.Locator, n int, what string) {
	v.t.Helper()
	v.check(v.expect.Locator(l).ToHaveCount(n), "%s: want %d", what, n)
}

// contains waits until the locator's text contains s.
func (v *visit) contains(l playwright.Locator, s, what string) {
	v.t.Helper()
	v.check(v.expect.Locator(l).ToContainText(s), "%s should contain %q", what, s)
}

// copies clicks the copy button l finds and sees it say "Copied". The
// word stays 1.2 s, less than a loaded machine may take between the click
// and a first look, so the page itself notes that it was shown.
func (v *visit) copies(l playwright.Locator, what string) {
	v.t.Helper()
	_, err := l.Evaluate(`b => {
		window.__copied = false;
		new MutationObserver(() => { if (b.textContent.includes("Copied")) window.__copied = true; })
			.observe(b, {childList: true, characterData: true, subtree: true});
	}`, nil)
	v.check(err, "watch %s", what)
	v.click(l, what)
	_, err = v.page.WaitForFunction(`() => window.__copied === true`, nil, playwright.PageWaitForFunctionOptions{Timeout: playwright.Float(15000)})
	v.check(err, "%s should say Copied", what)
}

// text is the exact text content of the one element l finds.
func (v *visit) text(l playwright.Locator, what string) string {
	v.t.Helper()
	s, err := l.TextContent()
	v.check(err, "read %s", what)
	return s
}

// click clicks the one element l finds.
func (v *visit) click(l playwright.Locator, what string) {
	v.t.Helper()
	v.check(l.Click(), "click %s", what)
}

// fill types s into the input l finds, replacing what was there.
func (v *visit) fill(l playwright.Locator, s, what string) {
	v.t.Helper()
	v.check(l.Fill(s), "fill %s", what)
}

// atPath waits until the page's URL has this path. It waits for the
// navigation to be committed, not for the page's load event: what a test
// checks next waits for its own element, and on a loaded machine the load
// event of a page already shown could take longer than the timeout.
func (v *visit) atPath(path string) {
	v.t.Helper()
	err := v.page.WaitForURL(func(u string) bool {
		return strings.SplitN(strings.TrimPrefix(u, v.app.url), "?", 2)[0] == path
	}, playwright.PageWaitForURLOptions{WaitUntil: playwright.WaitUntilStateCommit})
	v.check(err, "want to be at %s", path)
}

// scripted waits until the page's own scripts have run (they are
// deferred: they run before DOMContentLoaded), so that a key pressed next
// meets their handlers. atPath and an element seen do not wait for them:
// a page's text is there before its scripts run.
func (v *visit) scripted() {
	v.t.Helper()
	v.check(v.page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateDomcontentloaded}), "the page's scripts")
}

// login logs in through the login page and waits for the pages.
func (v *visit) login(name, pw string) {
	v.t.Helper()
	v.open("/login")
	v.fill(v.id("login-name"), name, "user name")
	v.fill(v.id("login-password"), pw, "password")
	v.click(v.id("login-submit"), "log in")
	v.contains(v.id("whoami"), name, "who is logged in")
}

// screenshot checks the page's layout and saves the whole page as
// screenshots/NAME.png, for a person to look at.
func (v *visit) screenshot(name string) {
	v.t.Helper()
	v.layoutOK(name)
	v.accessible(name)
	v.shoot(name, true)
}

// screenshotWindow saves what the window shows: for modal dialogs, whose
// backdrop covers the window and not the whole page.
func (v *visit) screenshotWindow(name string) {
	v.t.Helper()
	v.accessible(name)
	v.shoot(name, false)
}

// axeScript is axe-core's script, as e2e/package-lock.json pins it (go
// tool task setup:e2e installs it), read once for every test.
var axeScript = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile(filepath.Join("node_modules", "axe-core", "axe.min.js"))
	return string(b), err
})

// accessible runs axe-core on the page as it is now (in its colour
// scheme) and fails, and goes on, on each violation of impact serious or
// critical, and on table headings without text (a minor one to axe, but
// a column a screen reader cannot name), with the elements it found. The script is evaluated through
// the driver, not added as a script tag: the page's Content-Security-Policy
// refuses inline scripts, and must not be relaxed for the test.
func (v *visit) accessible(where string) {
	v.t.Helper()
	src, err := axeScript()
	if err != nil {
		v.t.Fatalf("axe-core: %v: %s", err, setupHint)
	}
	if loaded, _ := v.eval(`() => typeof window.axe === "object"`).(bool); !loaded {
		_, err := v.page.Evaluate(src + "\n;undefined")
		v.check(err, "inject axe-core")
	}
	out, err := v.page.Evaluate(`async () => {
		const res = await axe.run(document, {resultTypes: ["violations"]});
		return res.violations
			.filter(x => x.impact === "serious" || x.impact === "critical" || x.id === "empty-table-header")
			.map(x => x.impact + " " + x.id + ": " + x.help + "\n" + x.nodes.slice(0, 5)
				.map(n => "    " + n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " ")).join("\n")
				+ (x.nodes.length > 5 ? "\n    ... and " + (x.nodes.length - 5) + " more" : ""));
	}`)
	v.check(err, "run axe-core")
	list, _ := out.([]any)
	for _, x := range list {
		v.t.Errorf("%s: accessibility (axe-core): %v", where, x)
	}
}

func (v *visit) shoot(name string, full bool) {
	v.t.Helper()
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		v.t.Fatalf("screenshot folder: %v", err)
	}
	_, err := v.page.Screenshot(playwright.PageScreenshotOptions{
		Path:       playwright.String(filepath.Join(screenshotDir, name+".png")),
		FullPage:   playwright.Bool(full),
		Animations: playwright.ScreenshotAnimationsDisabled,
		Caret:      playwright.ScreenshotCaretHide,
	})
	v.check(err, "screenshot %s", name)
}

// layoutOK fails (and goes on) when the page is wider than the window, or
// when a table has rows with more or fewer cells than headings: values
// then stand under the wrong heading.
func (v *visit) layoutOK(where string) {
	v.t.Helper()
	if over, ok := v.eval(`() => document.documentElement.scrollWidth - document.documentElement.clientWidth`).(int); ok && over > 0 {
		width, _ := v.eval(`() => document.documentElement.clientWidth`).(int)
		v.t.Errorf("%s: the page is %d px wider than the %d px window: it scrolls sideways", where, over, width)
	}
	bad, _ := v.eval(`() => Array.from(document.querySelectorAll("table")).flatMap(t => {
		const width = r => Array.from(r.cells).reduce((n, c) => n + (c.colSpan || 1), 0);
		const head = t.tHead && t.tHead.rows.length ? width(t.tHead.rows[0]) : 0;
		const name = t.getAttribute("data-testid") || "a table";
		return Array.from(t.tBodies).flatMap(b => Array.from(b.rows))
			.filter(r => head && width(r) !== head)
			.map(r => name + ": a row has " + width(r) + " cells under " + head + " headings");
	}).slice(0, 3)`).([]any)
	for _, b := range bad {
		v.t.Errorf("%s: %v", where, b)
	}
}

// eval runs a JavaScript expression in the page.
func (v *visit) eval(js string) any {
	v.t.Helper()
	out, err := v.page.Evaluate(js)
	v.check(err, "evaluate %s", js)
	return out
}
