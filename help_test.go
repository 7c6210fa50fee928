package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// `lazarus help` names every environment variable the program reads:
// found in the main package's source, so that a new one that is not in
// the help fails here.
func TestHelpNamesEveryEnvironmentVariable(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"(LAZARUS_[A-Z_]+)"`)
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			if !slices.Contains(names, m[1]) {
				names = append(names, m[1])
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("found only %v in the source", names)
	}
	for _, n := range names {
		if !strings.Contains(usage, n) {
			t.Errorf("lazarus help does not name %s", n)
		}
	}
}
