package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// chromiumPath is Debian's chromium: the tests never download a browser.
const chromiumPath = "/usr/bin/chromium"

// driverVersion is the playwright-core version that playwright-go
// v0.5200.1 drives; e2e/package.json pins the same.
const driverVersion = "1.52.0"

// setupHint is how to get what the tests need.
const setupHint = "run `go tool task setup` at the repository root (it installs Debian's chromium, the pinned playwright-core in e2e/node_modules and links .driver/)"

// The browser, started once by TestMain and shared by every test; each
// test works in its own browser context. When it could not start,
// startErr says why and every test fails with it: a skipped browser test
// would pass unnoticed.
var (
	browser  playwright.Browser
	startErr error
)

func TestMain(m *testing.M) {
	pw, err := start()
	if err != nil {
		startErr = err
		fmt.Fprintln(os.Stderr, "e2e: the browser did not start:", err)
	}
	code := pgtest.Main(m) // m.Run, and the throwaway PostgreSQL stopped after it
	if browser != nil {
		_ = browser.Close()
	}
	if pw != nil {
		_ = pw.Stop()
	}
	os.Exit(code)
}

// start runs the playwright driver of .driver/ and launches chromium,
// after checking that both are there (playwright.Run would otherwise
// create an empty driver directory and fail obscurely).
func start() (*playwright.Playwright, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	driver := filepath.Join(root, ".driver")
	for _, p := range []string{filepath.Join(driver, "node"), filepath.Join(driver, "package", "cli.js")} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("the playwright driver is missing (%w): %s", err, setupHint)
		}
	}
	if out, err := exec.Command(filepath.Join(driver, "node"), filepath.Join(driver, "package", "cli.js"), "--version").Output(); err != nil || !strings.Contains(string(out), driverVersion) {
		return nil, fmt.Errorf("the playwright driver in %s is not version %s (it says %q, %v): %s", driver, driverVersion, strings.TrimSpace(string(out)), err, setupHint)
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		return nil, fmt.Errorf("chromium is missing (%w): %s", err, setupHint)
	}
	pw, err := playwright.Run(&playwright.RunOptions{
		DriverDirectory:     driver,
		SkipInstallBrowsers: true,
		Verbose:             false,
	})
	if err != nil {
		return nil, fmt.Errorf("start the playwright driver: %w: %s", err, setupHint)
	}
	browser, err = pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromiumPath),
		Headless:       playwright.Bool(true),
		Args: []string{
			"--no-sandbox", // needed as root
			"--disable-gpu",
			// Without these chromium keeps calling hosts it cannot reach.
			"--disable-background-networking",
			"--disable-component-update",
			"--disable-sync",
		},
		Timeout: playwright.Float(60_000),
	})
	if err != nil {
		_ = pw.Stop()
		return nil, fmt.Errorf("launch %s: %w: %s", chromiumPath, err, setupHint)
	}
	return pw, nil
}

// repoRoot is the directory of go.mod above the test's directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the e2e tests")
		}
		dir = parent
	}
}
