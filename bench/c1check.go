package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// C1 is only true of the module graph it was measured on: a new module
// changes what a cold first run downloads and compiles. c1Stale tells
// whether bench/c1.json still describes the checkout at repo, so that a
// test (TestC1DescribesThisModuleGraph) fails when go.sum changed since
// the measurement and cold-run.sh has to be run again.
//
// Two checks, because a checkout does not always carry its history:
//   - go.sum's SHA-256 against the one cold-run.sh recorded (goSum): needs
//     no git, so it holds in a shallow clone (CI's may be one) or a tarball,
//     and it sees an uncommitted change too;
//   - where the recorded commit is in the history, git's own account: go.sum
//     at that commit must be the one recorded (the record belongs to its
//     commit), and the commits since that changed go.sum are named.
//
// problems say what is wrong (the test fails on them); notes say what could
// not be checked and why (a shallow clone, no git), which the test logs.
func c1Stale(repo string, c c1Record) (problems, notes []string, err error) {
	if c.GoSum == "" {
		return []string{"c1.json has no goSum (go.sum's SHA-256 at its commit): run sh bench/cold-run.sh"}, nil, nil
	}
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		return nil, nil, err
	}
	if got := sha256Hex(sum); got != c.GoSum {
		problems = append(problems, fmt.Sprintf("go.sum changed since C1 was measured on commit %s (SHA-256 %s, recorded %s): run sh bench/cold-run.sh and commit bench/c1.json", c.Commit, short(got), short(c.GoSum)))
	}

	gitRaw := func(args ...string) ([]byte, error) {
		return exec.Command("git", append([]string{"-C", repo}, args...)...).Output()
	}
	git := func(args ...string) (string, error) {
		out, err := gitRaw(args...)
		return strings.TrimSpace(string(out)), err
	}
	if _, err := exec.LookPath("git"); err != nil {
		return problems, append(notes, "no git here: the record's commit is not checked against the history (go.sum's hash is)"), nil
	}
	if _, err := git("rev-parse", "--git-dir"); err != nil {
		return problems, append(notes, repo+" is not a git checkout: the record's commit is not checked against the history (go.sum's hash is)"), nil
	}
	if _, err := git("cat-file", "-e", c.Commit+"^{commit}"); err != nil {
		if shallow, _ := git("rev-parse", "--is-shallow-repository"); shallow == "true" {
			return problems, append(notes, fmt.Sprintf("shallow clone: commit %s is not in its history, so only go.sum's hash is checked (git fetch --unshallow checks the history too)", c.Commit)), nil
		}
		return append(problems, fmt.Sprintf("c1.json names commit %q, which is not in this repository's history (rebased away, or a typo): run sh bench/cold-run.sh", c.Commit)), notes, nil
	}
	then, err := gitRaw("show", c.Commit+":go.sum")
	if err != nil {
		return nil, nil, fmt.Errorf("go.sum at %s: %w", c.Commit, err)
	}
	if got := sha256Hex(then); got != c.GoSum {
		problems = append(problems, fmt.Sprintf("c1.json's goSum (%s) is not go.sum at its commit %s (%s): the record does not belong to that commit", short(c.GoSum), c.Commit, short(got)))
	}
	changed, err := git("log", "--format=%h %s", c.Commit+"..HEAD", "--", "go.sum")
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, nil, fmt.Errorf("git log %s..HEAD -- go.sum: %s", c.Commit, exit.Stderr)
		}
		return nil, nil, err
	}
	if changed != "" {
		problems = append(problems, fmt.Sprintf("go.sum changed in these commits since C1 was measured on %s: run sh bench/cold-run.sh\n%s", c.Commit, changed))
	}
	return problems, notes, nil
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
