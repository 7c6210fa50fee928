package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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
	"unsafe"

	"github.com/lazarus-dlq/lazarus/db"
)

// space is a way to run out of disk space under a server and get it back.
type space struct {
	// dir is where the database goes.
	dir string
	// fill takes the space away from the server whose process is pid.
	fill func(t *testing.T, pid int)
	// free gives it back.
	free func(t *testing.T, pid int)
}

// tmpfsSpace is a small tmpfs of its own (root only): fill writes a file
// until the file system is full, free removes it.
func tmpfsSpace(t *testing.T) space {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; the FileSizeLimit case runs the same journey without it")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount -t tmpfs: %v: %s (the FileSizeLimit case runs the same journey)", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	filler := filepath.Join(dir, "filler")
	return space{
		dir: dir,
		fill: func(t *testing.T, _ int) {
			f, err := os.Create(filler)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			block := make([]byte, 64<<10)
			for {
				if _, err := f.Write(block); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("fill: %v", err)
					}
					return
				}
			}
		},
		free: func(t *testing.T, _ int) {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// fileSizeSpace needs no privilege: fill sets the server process's file
// size limit (RLIMIT_FSIZE, with prlimit) just above its files' sizes, so
// that writes past it fail with EFBIG as they would on a full disk (Go
// ignores the SIGXFSZ that comes with it); free lifts the limit.
func fileSizeSpace(t *testing.T) space {
	dir := t.TempDir()
	return space{
		dir: dir,
		fill: func(t *testing.T, pid int) {
			var largest int64
			for _, name := range []string{"lazarus.db", "lazarus.db-wal"} {
				if st, err := os.Stat(filepath.Join(dir, name)); err == nil {
					largest = max(largest, st.Size())
				}
			}
			prlimitFSize(t, pid, uint64(largest+64<<10))
		},
		free: func(t *testing.T, pid int) { prlimitFSize(t, pid, ^uint64(0)) },
	}
}

// prlimitFSize sets the soft file size limit of process pid (the hard
// limit stays unlimited, so the soft one can be lifted again).
func prlimitFSize(t *testing.T, pid int, soft uint64) {
	t.Helper()
	lim := syscall.Rlimit{Cur: soft, Max: ^uint64(0)}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, uintptr(unsafe.Pointer(&lim)), 0, 0, 0); e != 0 {
		t.Fatalf("prlimit(%d, RLIMIT_FSIZE, %d): %v", pid, soft, e)
	}
}

// A full disk: writes answer 507 with a message that names the cause,
// /health answers 507 and /metrics says lazarus_disk_full 1, reads go
// on; once space is freed everything recovers by itself (health first,
// with no write needed), and nothing that was acknowledged is lost, even
// through a kill -9, while nothing refused was kept.
func TestDiskFullAnswers507AndRecovers(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	for _, tc := range []struct {
		name  string
		space func(*testing.T) space
	}{{"Tmpfs", tmpfsSpace}, {"FileSizeLimit", fileSizeSpace}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sp := tc.space(t)
			path := filepath.Join(sp.dir, "lazarus.db")
			cmd, base := startBinary(t, bin, path, "full")
			c := &diskClient{t: t, base: base}

			payload := fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 4000))
			var acked []string
			for i := range 5 {
				txid := fmt.Sprintf("before-%d", i)
				c.push(txid, payload).want(http.StatusCreated)
				acked = append(acked, txid)
			}
			c.get("/health").want(http.StatusOK)

			// A reader holds the write-ahead log while the space is gone,
			// so that no checkpoint lets the log start over in the space
			// it already has (SQLite reuses it): that is room to write
			// again, which health's probe would truly find, and the full
			// disk would end before the test has seen it.
			release := holdTheLog(t, path)
			sp.fill(t, cmd.Process.Pid)
			// Pushes go on while the log has room, then fail.
			var refused string
			var r reply
			for i := range 5000 {
				txid := fmt.Sprintf("full-%d", i)
				if r = c.push(txid, payload); r.status != http.StatusCreated {
					refused = txid
					break
				}
				acked = append(acked, txid)
			}
			r.want(http.StatusInsufficientStorage)
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(r.body), &e); err != nil || !strings.HasPrefix(e.Error, "disk full: ") || !strings.Contains(e.Error, "nothing was changed") {
				t.Fatalf("507 body %s, want an error that starts with \"disk full: \"", r.body)
			}
			if h := c.get("/health").want(http.StatusInsufficientStorage); !strings.Contains(h.body, "disk full") {
				t.Fatalf("health on a full disk says %s, want disk full", h.body)
			}
			if m := c.metrics(); !strings.Contains(m, "\nlazarus_disk_full 1\n") {
				t.Fatalf("metrics on a full disk have no lazarus_disk_full 1:\n%s", grepLines(m, "disk_full"))
			}
			c.get("/api/v1/resources/queues/q").want(http.StatusOK) // reads go on
			// Another push while the space is still gone is refused as well,
			// unless a checkpoint has meanwhile let the write-ahead log start
			// over in the space it already has (SQLite reuses it; seen under
			// load): then it is acknowledged, and must be kept.
			refusedTx := []string{refused}
			switch r := c.push("refused-again", payload); r.status {
			case http.StatusInsufficientStorage:
				refusedTx = append(refusedTx, "refused-again")
			case http.StatusCreated:
				acked = append(acked, "refused-again")
			default:
				r.want(http.StatusInsufficientStorage)
			}

			release()
			sp.free(t, cmd.Process.Pid)
			// Health finds the space again by itself, before any write.
			c.get("/health").want(http.StatusOK)
			if m := c.metrics(); !strings.Contains(m, "\nlazarus_disk_full 0\n") {
				t.Fatalf("metrics after space came back have no lazarus_disk_full 0:\n%s", grepLines(m, "disk_full"))
			}
			for i := range 5 {
				txid := fmt.Sprintf("after-%d", i)
				c.push(txid, payload).want(http.StatusCreated)
				acked = append(acked, txid)
			}

			// kill -9, then count what the file holds.
			if err := cmd.Process.Signal(os.Kill); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			kept := transactionIDs(t, path)
			for _, txid := range acked {
				if !kept[txid] {
					t.Errorf("acknowledged push %s is lost", txid)
				}
			}
			for _, txid := range refusedTx {
				if kept[txid] {
					t.Errorf("push %s was answered 507 but kept", txid)
				}
			}
			if len(kept) != len(acked) {
				t.Errorf("the database holds %d messages, %d were acknowledged", len(kept), len(acked))
			}
			t.Logf("%d pushes acknowledged, %s refused with 507 and nothing lost", len(acked), refused)
		})
	}
}

// diskClient calls a server with the admin token.
type diskClient struct {
	t    *testing.T
	base string
}

// reply is a status and a body.
type reply struct {
	t      *testing.T
	req    string
	status int
	body   string
}

// want fails the test unless the reply has the status.
func (r reply) want(status int) reply {
	r.t.Helper()
	if r.status != status {
		r.t.Fatalf("%s: %d %s, want %d", r.req, r.status, r.body, status)
	}
	return r
}

func (c *diskClient) do(method, path, body string) reply {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+killToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return reply{t: c.t, req: method + " " + path, status: resp.StatusCode, body: string(b)}
}

func (c *diskClient) get(path string) reply { return c.do(http.MethodGet, path, "") }

func (c *diskClient) push(txid, payload string) reply {
	return c.do(http.MethodPost, "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":"q","transactionId":%q,"payload":%s}]}`, txid, payload))
}

func (c *diskClient) metrics() string {
	c.t.Helper()
	return c.get("/metrics").want(http.StatusOK).body
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// transactionIDs opens the database at path and returns the
// transactionIds of its messages.
func transactionIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, path, db.SyncNormal)
	if err != nil {
		t.Fatalf("open after the kill: %v", err)
	}
	defer d.Close()
	rows, err := d.WriteDB().QueryContext(ctx, `SELECT transaction_id FROM messages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// holdTheLog begins a read of the database at path in this process and
// keeps it until the returned func is called: SQLite then cannot start
// the write-ahead log over (its checkpoints copy the log, but the log
// goes on growing).
func holdTheLog(t *testing.T, path string) (release func()) {
	t.Helper()
	ctx := context.Background()
	rdb, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			tx.Rollback()
			rdb.Close()
		})
	}
	t.Cleanup(release)
	return release
}
