package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `lazarus version` says the version and, for a binary built from a git
// checkout, the commit it was built from.
func TestVersionSaysTheCommit(t *testing.T) {
	t.Parallel()
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	// Stamped as a release build is (this machine's GOFLAGS may say
	// -buildvcs=false; the flag wins).
	bin := filepath.Join(t.TempDir(), "lazarus")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("lazarus version: %v\n%s", err, out)
	}
	if got, want := string(out), "commit "+string(head[:12]); !strings.HasPrefix(got, "lazarus ") || !strings.Contains(got, want) {
		t.Fatalf("lazarus version printed %q, want it to start with \"lazarus \" and name %s", got, want)
	}
}

// The version command answers without a database or flags.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"version"}, func(string) string { return "" }, nil, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "lazarus ") || stderr.Len() != 0 {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}
