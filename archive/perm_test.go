package archive

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The archive's directories are its owner's alone (0700), and so are
// its files (0600): dead letters hold payloads.
func TestTheArchiveIsTheOwnersAlone(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "archive")
	d, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := d.Archive(context.Background(), "orders", at, []broker.DeadLetter{{ID: 1, Queue: "orders", Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]os.FileMode{
		root:                          0o700,
		filepath.Join(root, "orders"): 0o700,
		filepath.Join(root, FileName("orders", at)): 0o600,
	} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if perm := st.Mode().Perm(); perm != want {
			t.Errorf("%s: mode %#o, want %#o", f, perm, want)
		}
	}
}
