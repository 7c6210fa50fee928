package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// An exclusive database refuses a second exclusive open of the same file
// (ErrInUse, saying which process holds it), lets tools open it beside
// (not exclusive), and is free again once closed.
func TestExclusiveOpenRefusesASecondServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	first, err := OpenWith(ctx, path, Options{Sync: SyncNormal, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	second, err := OpenWith(ctx, path, Options{Sync: SyncNormal, Exclusive: true})
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second exclusive open of the same file succeeded")
	}
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), path+".lock") {
		t.Fatalf("second open: %v; want ErrInUse naming this process and the lock file", err)
	}
	tool, err := Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatalf("a tool's open beside the server: %v", err)
	}
	if err := tool.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := OpenWith(ctx, path, Options{Sync: SyncNormal, Exclusive: true})
	if err != nil {
		t.Fatalf("exclusive open after the first closed: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}
