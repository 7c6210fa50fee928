package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// killToken is the admin token of the servers these tests start.
const killToken = "kill-test-token"

// authed sends a request with the admin token.
func authed(method, url, body string) (*http.Response, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+killToken)
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

// built is the lazarus binary the tests of one run share: built once, on
// the first call of binary, into a directory TestMain removes.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// binary builds the lazarus binary (once per test run: each test runs
// its own processes of the one binary) and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "lazarus-test-bin-"); built.err != nil {
			return
		}
		// In a directory of its own inside: a test may open the binary's
		// directory and its parent to others (letOthersIn).
		if built.err = os.Mkdir(filepath.Join(built.dir, "bin"), 0o700); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "bin", "lazarus")
		// -buildvcs=auto, whatever GOFLAGS says: stamped with its commit
		// in a git checkout, as a release build is (TestVersionSaysTheCommit).
		if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// removeBinary removes what binary built (TestMain, after the tests).
func removeBinary() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// startBinary runs `lazarus serve` on a free port and returns its URL.
func startBinary(t *testing.T, bin, dbPath, sync string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", dbPath, "--sync", sync, "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), "LAZARUS_ADMIN_TOKEN="+killToken)
	return cmd, startListening(t, cmd, 20*time.Second)
}

// startListening starts cmd, a lazarus serve or demo logging JSON, kills
// it at the end of the test, and returns the URL its "listening" line
// gives; it fails the test when none comes within wait.
func startListening(t *testing.T, cmd *exec.Cmd, wait time.Duration) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	deadline := time.AfterFunc(wait, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	for lines.Scan() {
		var l struct {
			Msg string `json:"msg"`
			URL string `json:"url"`
		}
		if json.Unmarshal(lines.Bytes(), &l) == nil && l.Msg == "listening" {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return l.URL
		}
	}
	t.Fatal("the server never said where it listens")
	return ""
}

// A push answered 201 survives a kill -9 of the server, in both durability
// modes: WAL commits are in the operating system's hands before the answer.
func TestPushSurvivesKill9(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	for _, sync := range []string{"full", "normal"} {
		t.Run(sync, func(t *testing.T) {
			dbPath := filepath.Join(t.TempDir(), "lazarus.db")
			cmd, url := startBinary(t, bin, dbPath, sync)
			const n = 200
			for i := 0; i < n; i++ {
				body := fmt.Sprintf(`{"items":[{"queue":"durable","partition":"p%d","transactionId":"t%d","payload":{"i":%d}}]}`, i%4, i, i)
				resp, err := authed(http.MethodPost, url+"/api/v1/push", body)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					t.Fatalf("push %d: %d", i, resp.StatusCode)
				}
			}
			// No graceful anything: SIGKILL right after the last 201.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			_, url = startBinary(t, bin, dbPath, sync)
			got := map[string]bool{}
			for {
				resp, err := authed(http.MethodGet, url+"/api/v1/pop/queue/durable?batch=1000&autoAck=true&consumerGroup=check", "")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusNoContent {
					break
				}
				var res struct {
					Messages []struct {
						TransactionID string          `json:"transactionId"`
						Data          json.RawMessage `json:"data"`
					} `json:"messages"`
				}
				if err := json.Unmarshal(b, &res); err != nil {
					t.Fatalf("pop: %v: %s", err, b)
				}
				for _, m := range res.Messages {
					got[m.TransactionID] = true
					if !bytes.HasPrefix(m.Data, []byte(`{"i":`)) {
						t.Fatalf("payload changed: %s", m.Data)
					}
				}
			}
			if len(got) != n {
				t.Fatalf("%d of %d acknowledged pushes survived kill -9", len(got), n)
			}
		})
	}
}
