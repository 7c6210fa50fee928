package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A hold answered 201 survives a kill -9 of the server: started again,
// the group's pops are 204, GET /holds lists it, and once released the
// message waiting is delivered.
func TestHoldSurvivesKill9(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dbPath := filepath.Join(t.TempDir(), "lazarus.db")
	call := func(url, method, path, body string, want int) string {
		t.Helper()
		resp, err := authed(method, url+path, body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
		}
		return string(b)
	}
	cmd, url := startBinary(t, bin, dbPath, "normal")
	call(url, http.MethodPost, "/api/v1/push", `{"items":[{"queue":"orders","transactionId":"o1","payload":{"n":1}}]}`, http.StatusCreated)
	call(url, http.MethodPost, "/api/v1/holds", `{"queue":"orders","consumerGroup":"billing","reason":"card processor down"}`, http.StatusCreated)
	// No graceful anything: SIGKILL right after the 201.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	_, url = startBinary(t, bin, dbPath, "normal")
	call(url, http.MethodGet, "/api/v1/pop/queue/orders?consumerGroup=billing", "", http.StatusNoContent)
	list := call(url, http.MethodGet, "/api/v1/holds", "", http.StatusOK)
	if !strings.Contains(list, `"queue":"orders","consumerGroup":"billing","kind":"manual","reason":"card processor down"`) {
		t.Fatalf("holds after kill -9: %s", list)
	}
	call(url, http.MethodDelete, "/api/v1/holds/1", "", http.StatusOK)
	if got := call(url, http.MethodGet, "/api/v1/pop/queue/orders?consumerGroup=billing", "", http.StatusOK); !strings.Contains(got, `"transactionId":"o1"`) {
		t.Fatalf("pop once released: %s", got)
	}
}
