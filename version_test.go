package main

import (
	"bytes"
	"context"
	"os/exec"
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
	// The tests' binary, stamped as a release build is (binary builds with
	// -buildvcs=auto, whatever this machine's GOFLAGS says).
	out, err := exec.Command(binary(t), "version").CombinedOutput()
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
