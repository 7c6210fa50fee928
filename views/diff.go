package views

import (
	"fmt"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// DiffContext is how many unchanged lines a diff shows around each change.
const DiffContext = 3

// MaxDiffRows is how many rows of a diff a page shows; the counts are of
// all of it.
const MaxDiffRows = 2000

// maxDiffLines bounds the texts LineDiff compares: go-diff numbers the
// distinct lines with runes (about a million at most), and a diff longer
// than this is no help to read in a page anyway.
const maxDiffLines = 1_000_000

// DiffOp is what happened to a line.
type DiffOp string

// A diff's lines.
const (
	DiffSame    DiffOp = " " // in both
	DiffRemoved DiffOp = "-" // in the original only
	DiffAdded   DiffOp = "+" // in the edited text only
	DiffSkip    DiffOp = "…" // unchanged lines left out (Text says how many)
)

// DiffLine is one row of a diff.
type DiffLine struct {
	Op DiffOp
	// Old and New are the line's numbers in the original and the edited
	// text (0 where it has none).
	Old, New int
	Text     string
}

// Diff is a line diff of two texts, as the edit page shows it.
type Diff struct {
	Lines          []DiffLine
	Added, Removed int
	// LeftOut is how many rows past MaxDiffRows are not in Lines.
	LeftOut int
	// TooLong: the texts have more lines than a diff is made of; only
	// the counts of lines are compared.
	TooLong bool
}

// Same reports whether the texts are equal line for line.
func (d Diff) Same() bool { return d.Added == 0 && d.Removed == 0 && !d.TooLong }

// Summary says what changed, in words: "2 lines removed, 3 added".
func (d Diff) Summary() string {
	switch {
	case d.TooLong:
		return fmt.Sprintf("The texts are too long to compare line by line (over %s lines).", Count(maxDiffLines))
	case d.Same():
		return "No change: the edited text is the original, line for line."
	}
	return fmt.Sprintf("%s removed, %s added.", Plural(int64(d.Removed), "line", "lines"), Plural(int64(d.Added), "line", "lines"))
}

// LineDiff compares two texts line by line (github.com/sergi/go-diff, in
// its line mode) and keeps context unchanged lines around each change;
// longer unchanged runs become one DiffSkip row.
func LineDiff(a, b string, context int) Diff {
	if strings.Count(a, "\n")+strings.Count(b, "\n") > maxDiffLines {
		return Diff{TooLong: a != b}
	}
	dmp := diffmatchpatch.New()
	ra, rb, lines := dmp.DiffLinesToRunes(a, b)
	diffs := dmp.DiffCharsToLines(dmp.DiffMainRunes(ra, rb, false), lines)
	var all []DiffLine
	var d Diff
	oldN, newN := 0, 0
	for _, x := range diffs {
		for _, line := range splitLines(x.Text) {
			switch x.Type {
			case diffmatchpatch.DiffEqual:
				oldN++
				newN++
				all = append(all, DiffLine{Op: DiffSame, Old: oldN, New: newN, Text: line})
			case diffmatchpatch.DiffDelete:
				oldN++
				d.Removed++
				all = append(all, DiffLine{Op: DiffRemoved, Old: oldN, Text: line})
			case diffmatchpatch.DiffInsert:
				newN++
				d.Added++
				all = append(all, DiffLine{Op: DiffAdded, New: newN, Text: line})
			}
		}
	}
	d.Lines = withContext(all, context)
	if len(d.Lines) > MaxDiffRows {
		d.LeftOut, d.Lines = len(d.Lines)-MaxDiffRows, d.Lines[:MaxDiffRows]
	}
	return d
}

// splitLines cuts a run of whole lines (each but perhaps the last ending
// in a line break) into lines without their breaks.
func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return []string{""}
	}
	return strings.Split(s, "\n")
}

// withContext keeps the changed lines and context unchanged lines either
// side of each; each run left out is one DiffSkip row.
func withContext(all []DiffLine, context int) []DiffLine {
	keep := make([]bool, len(all))
	for i, l := range all {
		if l.Op == DiffSame {
			continue
		}
		for j := max(0, i-context); j <= min(len(all)-1, i+context); j++ {
			keep[j] = true
		}
	}
	var out []DiffLine
	for i := 0; i < len(all); {
		if keep[i] {
			out = append(out, all[i])
			i++
			continue
		}
		j := i
		for j < len(all) && !keep[j] {
			j++
		}
		out = append(out, DiffLine{Op: DiffSkip, Old: all[i].Old, New: all[i].New,
			Text: Plural(int64(j-i), "unchanged line", "unchanged lines")})
		i = j
	}
	return out
}
