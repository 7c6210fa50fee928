package main

import (
	"go/build"
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
		// Only the files of the binary people run: a file of a build
		// tag of the tests' own (clock_faults.go, -tags faults) reads
		// variables that binary has not.
		if ok, err := build.Default.MatchFile(".", f); err != nil || !ok || strings.HasSuffix(f, "_test.go") {
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

// The help is a table a person scans: every description starts in
// column 27 (a name too long for it has its description on the lines
// below), continuation lines too, and no line is wider than 80.
func TestHelpIsAligned(t *testing.T) {
	t.Parallel()
	const col = 26 // spaces before a description
	entry := regexp.MustCompile(`^  (\S.*?)(\s*)$`)
	for i, l := range strings.Split(usage, "\n") {
		n := i + 1
		if len(l) > 80 {
			t.Errorf("line %d is %d wide: %q", n, len(l), l)
		}
		if l == "" || !strings.HasPrefix(l, " ") {
			continue // blank, or a heading
		}
		if strings.HasPrefix(l, strings.Repeat(" ", col)) {
			if l[col] == ' ' {
				t.Errorf("line %d is indented past column %d: %q", n, col+1, l)
			}
			continue
		}
		// "  name   description": the description at col, or none.
		m := entry.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line %d is neither an entry nor a continuation: %q", n, l)
			continue
		}
		name, desc, found := strings.Cut(m[1], "  ")
		if !found {
			if len(name)+2 <= col-2 {
				t.Errorf("line %d: %q has room for its description on its line", n, name)
			}
			continue
		}
		if got := 2 + len(name) + 2 + len(desc) - len(strings.TrimLeft(desc, " ")); got != col {
			t.Errorf("line %d: its description starts in column %d, want %d: %q", n, got+1, col+1, l)
		}
	}
}

// The defaults the help states are those of the flags themselves
// (`lazarus serve --help`, `lazarus demo --help`), written as they are
// typed: 24h, not 24h0m0s.
func TestHelpStatesTheFlagsDefaults(t *testing.T) {
	t.Parallel()
	flagHelp := regexp.MustCompile(`(?m)^  -([a-z-]+).*\n((?:    \t.*\n?)+)`)
	def := regexp.MustCompile(`\(default "([^"]*)"\)`)
	for _, cmd := range []string{"serve", "demo"} {
		var stdout, stderr strings.Builder
		noEnv := func(string) string { return "" }
		if err := run(t.Context(), []string{cmd, "--help"}, noEnv, strings.NewReader(""), &stdout, &stderr); err != nil {
			t.Fatalf("%s --help: %v", cmd, err)
		}
		flags := flagHelp.FindAllStringSubmatch(stderr.String(), -1)
		if len(flags) < 10 {
			t.Fatalf("%s --help names %d flags:\n%s", cmd, len(flags), stderr.String())
		}
		for _, f := range flags {
			name, text := f[1], strings.Join(strings.Fields(f[2]), " ")
			if strings.Contains(text, "m0s") || strings.Contains(text, "h0m") {
				t.Errorf("%s --help -%s: a duration as time.Duration writes it: %s", cmd, name, text)
			}
			d := def.FindStringSubmatch(text)
			if d == nil {
				continue // no default (empty), or a boolean
			}
			if e := helpEntry(usage, name); !strings.Contains(e, "default "+d[1]) {
				t.Errorf("lazarus help says of --%s %q; %s's default is %s", name, e, cmd, d[1])
			}
		}
	}
}

// helpEntry is the text of the help's entry for the flag --name, its
// continuation lines joined.
func helpEntry(help, name string) string {
	var lines []string
	in := false
	for _, l := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(l, "  --"+name+" "):
			in = true
		case in && strings.HasPrefix(l, strings.Repeat(" ", 26)):
		default:
			in = false
		}
		if in {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}
