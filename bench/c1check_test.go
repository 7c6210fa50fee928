package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestC1DescribesThisModuleGraph fails when go.sum changed since bench/c1.json
// was measured: C1 must then be measured again (sh bench/cold-run.sh).
func TestC1DescribesThisModuleGraph(t *testing.T) {
	c, err := readC1(c1File)
	if err != nil {
		t.Fatal(err)
	}
	problems, notes, err := c1Stale("..", c)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range notes {
		t.Log(n)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestC1StaleFollowsGoSum runs c1Stale on throwaway git repositories: a full
// one, where go.sum changes after the measured commit, and a shallow clone,
// where that commit is not in the history.
func TestC1StaleFollowsGoSum(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed for this test (and by the checkout it runs in)")
	}
	repo := t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(repo, "init", "-q")
	write("go.sum", "example.com/a v1.0.0 h1:x=\n")
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "measured")
	measured := git(repo, "rev-parse", "--short", "HEAD")
	rec := c1Record{Commit: measured, GoSum: sha256Hex([]byte("example.com/a v1.0.0 h1:x=\n"))}
	write("README", "a commit that leaves go.sum alone\n")
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "docs")

	check := func(name, dir string, c c1Record, wantProblems []string, wantNote string) {
		t.Helper()
		problems, notes, err := c1Stale(dir, c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(problems) != len(wantProblems) {
			t.Fatalf("%s: problems %q, want %d containing %q", name, problems, len(wantProblems), wantProblems)
		}
		for i, w := range wantProblems {
			if !strings.Contains(problems[i], w) {
				t.Errorf("%s: problem %q does not say %q", name, problems[i], w)
			}
		}
		if wantNote == "" && len(notes) != 0 || wantNote != "" && (len(notes) != 1 || !strings.Contains(notes[0], wantNote)) {
			t.Errorf("%s: notes %q, want one saying %q", name, notes, wantNote)
		}
	}

	check("unchanged", repo, rec, nil, "")
	check("no goSum recorded", repo, c1Record{Commit: measured}, []string{"no goSum"}, "")
	check("a commit not in the history", repo, c1Record{Commit: "0000000", GoSum: rec.GoSum}, []string{"not in this repository's history"}, "")
	check("a hash that is not the commit's", repo, c1Record{Commit: measured, GoSum: sha256Hex([]byte("other\n"))},
		[]string{"go.sum changed since", "does not belong to that commit"}, "")

	write("go.sum", "example.com/a v1.0.0 h1:x=\nexample.com/b v1.2.0 h1:y=\n")
	check("go.sum edited, not committed", repo, rec, []string{"go.sum changed since C1 was measured"}, "")
	git(repo, "commit", "-q", "-am", "a new module")
	check("go.sum changed in a commit", repo, rec, []string{"go.sum changed since C1 was measured", "a new module"}, "")

	// A shallow clone of the last commit: the measured one is not in it,
	// so only the hash speaks, and the note says why.
	shallow := filepath.Join(t.TempDir(), "shallow")
	git(repo, "clone", "-q", "--depth", "1", "file://"+repo, shallow)
	check("shallow, go.sum changed", shallow, rec, []string{"go.sum changed since C1 was measured"}, "shallow clone")
	newSum, err := os.ReadFile(filepath.Join(shallow, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	check("shallow, measured on this go.sum", shallow, c1Record{Commit: measured, GoSum: sha256Hex(newSum)}, nil, "shallow clone")

	// Outside git (a tarball): the hash alone.
	plain := t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "go.sum"), newSum, 0o644); err != nil {
		t.Fatal(err)
	}
	check("no git checkout", plain, c1Record{Commit: measured, GoSum: sha256Hex(newSum)}, nil, "not a git checkout")
}
