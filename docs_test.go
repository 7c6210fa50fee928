package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The documentation's examples are run, so that they stay true. In
// README.md and docs/*.md, every ```sh block is marked, on the last
// non-blank line before it, with one of
//
//	<!-- doc-test: run -->            the test runs it
//	<!-- doc-test: skip: <why> -->    not runnable here (a systemd unit, `go run`, a backup)
//
// and an unmarked one fails the test, as does curl in a block of another
// language: nothing is left out by accident. No block uses `curl --json`
// (curl 7.82 and later only; Ubuntu 22.04 has 7.81): bodies go as
// -H "$JSON" -d, which every curl has.
//
// A document's run blocks are pasted, in document order, into one
// `bash -euo pipefail` session (as a reader pastes them into one terminal:
// the variables one block sets, the next one reads), with the working
// directory a temp dir holding ./lazarus, against a `lazarus serve` of its
// own on ./lazarus.db there, started with the environment the README's
// session starts it with (concepts.md's, about the demo: `lazarus demo` on
// its own ./lazarus-demo.db, as `go tool task run` starts it, without that
// environment). http://127.0.0.1:8080 in a block stands for that server's
// address.
//
// After a run block may come a line `→ NNN` (the status of the block's last
// request) and a ```json block (its standard output, one or more JSON
// values) or a ```text one (its lines, "…" in one for any text). Every request of a block answers 2xx, but for the last one when
// a status says otherwise. The answer is compared as parsed JSON: objects
// have exactly the fields shown (in any order), arrays the elements shown,
// values are equal, except that a string with "…" stands for any string
// with the parts around the "…" in that order, and a time written as
// RFC 3339 in UTC with milliseconds for any time written so. A ```json
// block that follows no run block must be marked skip too.
func TestDocsExamplesRunAgainstTheServer(t *testing.T) {
	t.Parallel()
	realCurl := needDocTools(t)
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{"README.md"}, docs...)
	var bin string
	for _, name := range docs {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		examples, err := parseDocExamples(string(src))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(examples) == 0 {
			continue
		}
		if bin == "" {
			bin = docBinary(t)
		}
		t.Run(strings.TrimSuffix(filepath.Base(name), ".md"), func(t *testing.T) {
			t.Parallel()
			runDocExamples(t, bin, realCurl, name, examples)
		})
	}
}

// docBinary builds lazarus as the README's `go run . serve` does: without
// the commit (so /health's answer is the same on every machine).
func docBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lazarus")
	out, err := exec.Command("go", "build", "-buildvcs=false", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The admin token and password the README's session starts its server
// with (the examples' $AUTH).
const (
	docAdminToken    = "dev-token-not-for-production"
	docAdminPassword = "correct-horse-battery-staple"
)

// docServer is how a document's server is started: its command line
// (beyond --addr and --log-format) and whether it gets the README's admin
// token and password.
type docServer struct {
	args      []string
	readmeEnv bool
}

// docServers are the documents whose server is not the README's:
// concepts.md's example is about the demo, started as `go tool task run`
// starts it (`lazarus demo`, its default database, the password it makes).
var docServers = map[string]docServer{"docs/concepts.md": {args: []string{"demo"}}}

// readmeServer is the README's session's server.
var readmeServer = docServer{args: []string{"serve", "--db", "./lazarus.db"}, readmeEnv: true}

// docExample is a run block of a document with what it should answer.
type docExample struct {
	line   int    // of the ```sh fence, 1-based
	script string // the block's text
	status int    // of the block's last request; 0: every request 2xx
	want   string // the ```json or ```text block after it; "": not compared
	text   bool   // want is text: compared line by line
}

var (
	docFence  = regexp.MustCompile("^```([a-z]*)\\s*$")
	docMarker = regexp.MustCompile(`^<!-- doc-test: (run|skip: .+) -->$`)
	docStatus = regexp.MustCompile(`^→ ([0-9]{3})\b`)
	// curl's --json: in a curl command (continued over lines ending in
	// \ or not), not another program's --json (lazarus dlq list --json).
	docCurlJSON = regexp.MustCompile(`\bcurl\b(?:[^|;&\n]|\\\n)*\s--json\b`)
)

// parseDocExamples finds the run blocks of a Markdown document, with the
// status and the answer after each, and refuses an unmarked ```sh block,
// curl in another block, and an answer that follows no run block.
func parseDocExamples(src string) ([]docExample, error) {
	lines := strings.Split(src, "\n")
	var (
		examples []docExample
		errs     []error
		// what the last non-blank line outside a block was: a marker, a
		// status, or the end of a run block (for the status and answer
		// that follow it)
		marker   string
		afterRun bool
		status   int
	)
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		m := docFence.FindStringSubmatch(l)
		if m == nil {
			switch {
			case l == "":
			case docMarker.MatchString(l):
				marker = docMarker.FindStringSubmatch(l)[1]
			case afterRun && docStatus.MatchString(l):
				status, _ = strconv.Atoi(docStatus.FindStringSubmatch(l)[1])
				examples[len(examples)-1].status = status
			default:
				marker, afterRun, status = "", false, 0
			}
			continue
		}
		start := i
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: the block never ends", start+1)
		}
		text := strings.Join(body, "\n") + "\n"
		lang := m[1]
		switch {
		case lang == "sh" && docCurlJSON.MatchString(text):
			errs = append(errs, fmt.Errorf("line %d: curl --json needs curl 7.82 or later: send the body with -H \"$JSON\" -d", start+1))
		case lang == "sh" && marker == "run":
			examples = append(examples, docExample{line: start + 1, script: text})
			marker, afterRun, status = "", true, 0
			continue
		case marker == "run":
			errs = append(errs, fmt.Errorf("line %d: <!-- doc-test: run --> before a ```%s block: only ```sh blocks run", start+1, lang))
		case lang == "sh" && marker == "":
			errs = append(errs, fmt.Errorf("line %d: a ```sh block without <!-- doc-test: run --> or <!-- doc-test: skip: why --> before it", start+1))
		case (lang == "json" || lang == "text") && afterRun && marker == "":
			examples[len(examples)-1].want = text
			examples[len(examples)-1].text = lang == "text"
		case lang == "json" && marker == "":
			errs = append(errs, fmt.Errorf("line %d: a ```json block that is no run block's answer, and not marked <!-- doc-test: skip: why -->", start+1))
		case lang != "sh" && strings.Contains(text, "curl "):
			errs = append(errs, fmt.Errorf("line %d: curl in a ```%s block: make it a marked ```sh block", start+1, lang))
		}
		marker, afterRun, status = "", false, 0
	}
	return examples, errors.Join(errs...)
}

// needDocTools returns the path of curl after checking that curl and jq
// are installed: the examples need them, and a missing one fails the test
// rather than skipping it. Any curl will do: no example uses --json.
func needDocTools(t *testing.T) string {
	t.Helper()
	const install = "the documentation's examples need curl and jq: `go tool task setup` installs them (Debian: apt-get install curl jq)"
	for _, tool := range []string{"bash", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v; %s", tool, err, install)
		}
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl: %v; %s", err, install)
	}
	return curl
}

// curlWrapper stands in for curl in the examples' PATH: it runs the real
// one and notes the status of its last response, with the block it was
// sent from.
const curlWrapper = `#!/bin/sh
h=$(mktemp "$DOCTEST_DIR/headers.XXXXXX")
"$DOCTEST_CURL" --dump-header "$h" "$@"
rc=$?
printf '%s %s\n' "$DOCTEST_BLOCK" "$(sed -n 's/^HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p' "$h" | tail -n 1)" >>"$DOCTEST_DIR/statuses"
rm -f "$h"
exit $rc
`

// runDocExamples runs a document's examples in one bash session against a
// server of its own and checks each one's statuses and answer.
func runDocExamples(t *testing.T, bin, realCurl, doc string, examples []docExample) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work") // the examples' working directory
	tools := filepath.Join(dir, "bin")
	for _, d := range []string{work, tools} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(bin, filepath.Join(work, "lazarus")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "curl"), []byte(curlWrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, ok := docServers[doc]
	if !ok {
		srv = readmeServer
	}
	base := startDocServer(t, work, srv)

	var script strings.Builder
	for n, ex := range examples {
		// A block's output goes to files of its own; { } keeps the
		// variables it sets for the blocks after it.
		fmt.Fprintf(&script, "export DOCTEST_BLOCK=%d\n{\n%s} >%q 2>%q\n", n,
			strings.ReplaceAll(ex.script, "http://127.0.0.1:8080", base),
			filepath.Join(dir, fmt.Sprintf("out.%d", n)), filepath.Join(dir, fmt.Sprintf("err.%d", n)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script.String())
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DOCTEST_DIR="+dir, "DOCTEST_CURL="+realCurl)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	runErr := cmd.Run()

	statuses := map[int][]string{}
	if b, err := os.ReadFile(filepath.Join(dir, "statuses")); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			n, status, _ := strings.Cut(l, " ")
			i, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("statuses: line %q", l)
			}
			statuses[i] = append(statuses[i], status)
		}
	}
	for n, ex := range examples {
		out, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out.%d", n)))
		if err != nil {
			t.Fatalf("%s:%d was not run: an earlier block stopped the session (%v)\n%s", doc, ex.line, runErr, stderr.String())
		}
		errOut, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("err.%d", n)))
		report := fmt.Sprintf("%s:%d\n%s\nanswered (statuses %v):\n%s%s", doc, ex.line, ex.script, statuses[n], out, errOut)
		if n == len(examples)-1 && runErr != nil || n < len(examples)-1 && !fileExists(filepath.Join(dir, fmt.Sprintf("out.%d", n+1))) {
			t.Fatalf("%s\nthe block failed: %v %s", report, runErr, stderr.String())
		}
		for i, s := range statuses[n] {
			code, _ := strconv.Atoi(s)
			want := "2xx"
			ok := code >= 200 && code < 300
			if i == len(statuses[n])-1 && ex.status != 0 {
				want, ok = strconv.Itoa(ex.status), code == ex.status
			}
			if !ok {
				t.Errorf("%s\nrequest %d of the block answered %q, want %s", report, i+1, s, want)
			}
		}
		if ex.status != 0 && len(statuses[n]) == 0 {
			t.Errorf("%s\nthe block sent no request, want one answered %d", report, ex.status)
		}
		if ex.want == "" {
			continue
		}
		if ex.text {
			if diffs := matchDocText(ex.want, string(out)); len(diffs) > 0 {
				t.Errorf("%s\nthe answer differs from the document's:\n%s", report, strings.Join(diffs, "\n"))
			}
			continue
		}
		want, err := jsonValues(ex.want)
		if err != nil {
			t.Errorf("%s:%d: the answer shown is not JSON: %v", doc, ex.line, err)
			continue
		}
		got, err := jsonValues(string(out))
		if err != nil {
			t.Errorf("%s\nthe answer is not JSON: %v", report, err)
			continue
		}
		if diffs := matchDocJSON("", want, got); len(diffs) > 0 {
			t.Errorf("%s\nthe answer differs from the document's:\n%s", report, strings.Join(diffs, "\n"))
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// startDocServer starts ./lazarus in dir as srv says, on a free port, and
// returns its URL.
func startDocServer(t *testing.T, dir string, srv docServer) string {
	t.Helper()
	cmd := exec.Command("./lazarus", append(slices.Clone(srv.args), "--addr", "127.0.0.1:0", "--log-format", "json")...)
	cmd.Dir = dir
	// None of the caller's LAZARUS_ settings (LAZARUS_API_OPEN=true would
	// turn the 401 into a 200), and the README's when srv wants them.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "LAZARUS_") })
	if srv.readmeEnv {
		cmd.Env = append(cmd.Env, "LAZARUS_ADMIN_TOKEN="+docAdminToken, "LAZARUS_ADMIN_PASSWORD="+docAdminPassword)
	}
	return startListening(t, cmd, 30*time.Second)
}

// jsonValues parses a sequence of JSON values, numbers kept as written.
func jsonValues(s string) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var vs []any
	for {
		var v any
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			return vs, nil
		} else if err != nil {
			return nil, fmt.Errorf("value %d: %w", len(vs)+1, err)
		}
		vs = append(vs, v)
	}
}

// docTime is how the API writes a time: RFC 3339, UTC, milliseconds.
var docTime = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$`)

// matchDocJSON says where got differs from the document's want (see
// TestDocsExamplesRunAgainstTheServer for the rules).
func matchDocJSON(path string, want, got any) []string {
	differs := func(format string, args ...any) []string {
		where := path
		if where == "" {
			where = "the answer"
		}
		return []string{where + ": " + fmt.Sprintf(format, args...)}
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return differs("got %s, want an object", compactJSON(got))
		}
		var diffs []string
		for _, k := range sortedKeys(w) {
			if _, ok := g[k]; !ok {
				diffs = append(diffs, differs("field %q is missing", k)...)
				continue
			}
			diffs = append(diffs, matchDocJSON(path+"."+k, w[k], g[k])...)
		}
		for _, k := range sortedKeys(g) {
			if _, ok := w[k]; !ok {
				diffs = append(diffs, differs("field %q (%s) is not in the document", k, compactJSON(g[k]))...)
			}
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return differs("got %s, want %d elements", compactJSON(got), len(w))
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, matchDocJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	case string:
		g, ok := got.(string)
		switch {
		case !ok:
			return differs("got %s, want a string", compactJSON(got))
		case strings.Contains(w, "…"):
			if !matchesEllipsis(w, g) {
				return differs("got %q, want %q (… any text)", g, w)
			}
		case docTime.MatchString(w):
			if _, err := time.Parse(time.RFC3339, g); err != nil || !docTime.MatchString(g) {
				return differs("got %q, want a time like %q", g, w)
			}
		case g != w:
			return differs("got %q, want %q", g, w)
		}
		return nil
	default: // numbers as written, booleans, null
		if compactJSON(got) != compactJSON(want) {
			return differs("got %s, want %s", compactJSON(got), compactJSON(want))
		}
		return nil
	}
}

// matchDocText says where the lines of got differ from those of want, a
// line with "…" standing for any line with the parts around it.
func matchDocText(want, got string) []string {
	w := strings.Split(strings.TrimRight(want, "\n"), "\n")
	g := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if len(w) != len(g) {
		return []string{fmt.Sprintf("got %d lines, want %d", len(g), len(w))}
	}
	var diffs []string
	for i := range w {
		if l := strings.TrimRight(g[i], " "); l != w[i] && !(strings.Contains(w[i], "…") && matchesEllipsis(w[i], l)) {
			diffs = append(diffs, fmt.Sprintf("line %d: got %q, want %q", i+1, l, w[i]))
		}
	}
	return diffs
}

// matchesEllipsis says whether s is pattern with any text for each "…".
func matchesEllipsis(pattern, s string) bool {
	parts := strings.Split(pattern, "…")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, last)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// The rules the documentation's examples are held to, each able to fail.
func TestDocJSONMatching(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, want, got string
		ok              bool
	}{
		{"Equal", `{"a":1,"b":[true,null,"x"]}`, `{"b":[true,null,"x"],"a":1}`, true},
		{"MissingField", `{"a":1,"b":2}`, `{"a":1}`, false},
		{"ExtraField", `{"a":1}`, `{"a":1,"b":2}`, false},
		{"OtherValue", `{"a":1}`, `{"a":2}`, false},
		{"NumberNotString", `{"a":1}`, `{"a":"1"}`, false},
		{"NullNotFalse", `{"a":null}`, `{"a":false}`, false},
		{"ShorterArray", `[1,2]`, `[1]`, false},
		{"EllipsisAnyText", `{"id":"…-000000000001"}`, `{"id":"01a2326c-85a2-7000-8000-000000000001"}`, true},
		{"EllipsisKeepsItsSuffix", `{"id":"…-000000000001"}`, `{"id":"01a2326c-85a2-7000-8000-000000000002"}`, false},
		{"EllipsisKeepsItsPrefix", `{"id":"dlq:…"}`, `{"id":"01a2"}`, false},
		{"EllipsisIsAString", `{"id":"…"}`, `{"id":1}`, false},
		{"TimeAnyTime", `{"at":"2026-12-01T16:25:02.778Z"}`, `{"at":"2027-01-31T00:00:00.000Z"}`, true},
		{"TimeWithoutMilliseconds", `{"at":"2026-12-01T16:25:02.778Z"}`, `{"at":"2026-12-01T16:25:02Z"}`, false},
		{"TimeNotUTC", `{"at":"2026-12-01T16:25:02.778Z"}`, `{"at":"2026-12-01T16:25:02.778+01:00"}`, false},
		{"NoTime", `{"at":"2026-12-01T16:25:02.778Z"}`, `{"at":"2026-13-01T16:25:02.778Z"}`, false},
		{"Sequence", "{\"a\":1}\n{\"a\":2}", `{"a":1}{"a":2}`, true},
		{"SequenceTooShort", "{\"a\":1}\n{\"a\":2}", `{"a":1}`, false},
	}
	for _, tt := range tests {
		want, err := jsonValues(tt.want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := jsonValues(tt.got)
		if err != nil {
			t.Fatal(err)
		}
		if diffs := matchDocJSON("", want, got); (len(diffs) == 0) != tt.ok {
			t.Errorf("%s: %s against %s: %q, want a match: %v", tt.name, tt.got, tt.want, diffs, tt.ok)
		}
	}
	if diffs := matchDocText("a 1\nb{…} 2\n", "a 1\nb{x=\"y\"} 2\n"); len(diffs) > 0 {
		t.Errorf("text: %q", diffs)
	}
	for _, got := range []string{"a 1\n", "a 1\nb{x} 3\n", "a 1\nb{x} 2\nc 3\n"} {
		if diffs := matchDocText("a 1\nb{…} 2\n", got); len(diffs) == 0 {
			t.Errorf("text %q matched", got)
		}
	}
}

func TestParseDocExamples(t *testing.T) {
	t.Parallel()
	const doc = "<!-- doc-test: run -->\n```sh\ncurl -s $API/a\n```\n→ 409\n```json\n{\"error\":\"x\"}\n```\n\n" +
		"<!-- doc-test: skip: a unit -->\n```sh\nsystemctl start lazarus\n```\n\n" +
		"<!-- doc-test: run -->\n```sh\ncurl -s $API/b\n```\nProse.\n```yaml\nkey: value\n```\n"
	got, err := parseDocExamples(doc)
	want := []docExample{{line: 2, script: "curl -s $API/a\n", status: 409, want: "{\"error\":\"x\"}\n"}, {line: 16, script: "curl -s $API/b\n"}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %+v, %v\nwant %+v", got, err, want)
	}
	for name, doc := range map[string]string{
		"Unmarked":           "```sh\ncurl -s $API/a\n```\n",
		"MarkerAboveProse":   "<!-- doc-test: run -->\nProse.\n```sh\ncurl -s $API/a\n```\n",
		"AnswerAfterProse":   "<!-- doc-test: run -->\n```sh\ncurl -s $API/a\n```\nProse.\n```json\n{}\n```\n",
		"AnswerWithoutQuery": "```json\n{}\n```\n",
		"CurlInAnotherBlock": "```\ncurl -s $API/a\n```\n",
		"RunNotSh":           "<!-- doc-test: run -->\n```bash\ncurl -s $API/a\n```\n",
		"Unterminated":       "<!-- doc-test: run -->\n```sh\ncurl -s $API/a\n",
		"CurlJSON":           "<!-- doc-test: run -->\n```sh\ncurl -s --json '{}' $API/a\n```\n",
		"CurlJSONSkipped":    "<!-- doc-test: skip: x -->\n```sh\ncurl -s\\\n  --json @- $API/a\n```\n",
	} {
		if _, err := parseDocExamples(doc); err == nil {
			t.Errorf("%s: no error", name)
		}
	} // Another program's --json is no curl's.
	if _, err := parseDocExamples("<!-- doc-test: run -->\n```sh\n./lazarus dlq list --json | curl -s -d @- $API/a\n```\n"); err != nil {
		t.Errorf("lazarus --json refused: %v", err)
	}
}
