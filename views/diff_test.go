package views_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/views"
)

// render writes a diff as +/-/space rows, "…N" for a skip.
func renderDiff(d views.Diff) string {
	var b strings.Builder
	for _, l := range d.Lines {
		if l.Op == views.DiffSkip {
			fmt.Fprintf(&b, "… %s\n", l.Text)
			continue
		}
		fmt.Fprintf(&b, "%s%d,%d %s\n", l.Op, l.Old, l.New, l.Text)
	}
	return b.String()
}

func TestLineDiff(t *testing.T) {
	t.Parallel()
	lines := func(n int, change map[int]string) string {
		var out []string
		for i := 1; i <= n; i++ {
			if c, ok := change[i]; ok {
				if c != "" {
					out = append(out, c)
				}
				continue
			}
			out = append(out, fmt.Sprintf("l%d", i))
		}
		return strings.Join(out, "\n")
	}
	cases := []struct {
		name, a, b, want string
		added, removed   int
	}{
		{name: "Same", a: "a\nb", b: "a\nb", want: "… 2 unchanged lines\n"},
		{name: "OneLineChanged", a: "{\n \"amount\": 1\n}", b: "{\n \"amount\": 2\n}", added: 1, removed: 1,
			want: " 1,1 {\n-2,0  \"amount\": 1\n+0,2  \"amount\": 2\n 3,3 }\n"},
		{name: "Added", a: "a\nc", b: "a\nb\nc", added: 1, want: " 1,1 a\n+0,2 b\n 2,3 c\n"},
		{name: "FromNothing", a: "", b: "x", added: 1, want: "+0,1 x\n"},
		{name: "LongRunsSkipped", a: lines(20, nil), b: lines(20, map[int]string{10: "ten"}), added: 1, removed: 1,
			want: "… 6 unchanged lines\n 7,7 l7\n 8,8 l8\n 9,9 l9\n-10,0 l10\n+0,10 ten\n 11,11 l11\n 12,12 l12\n 13,13 l13\n… 7 unchanged lines\n"},
		{name: "Removed", a: lines(5, nil), b: lines(5, map[int]string{3: ""}), removed: 1,
			want: " 1,1 l1\n 2,2 l2\n-3,0 l3\n 4,3 l4\n 5,4 l5\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := views.LineDiff(c.a, c.b, views.DiffContext)
			if got := renderDiff(d); got != c.want {
				t.Errorf("diff\n%s\nwant\n%s", got, c.want)
			}
			if d.Added != c.added || d.Removed != c.removed {
				t.Errorf("added %d removed %d, want %d %d", d.Added, d.Removed, c.added, c.removed)
			}
		})
	}
}

func TestLineDiffShowsAtMostMaxDiffRows(t *testing.T) {
	t.Parallel()
	var a, b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	d := views.LineDiff(a.String(), b.String(), views.DiffContext)
	if len(d.Lines) != views.MaxDiffRows || d.LeftOut != 6000-views.MaxDiffRows || d.Added != 3000 || d.Removed != 3000 {
		t.Fatalf("%d rows, %d left out, +%d -%d", len(d.Lines), d.LeftOut, d.Added, d.Removed)
	}
}

func TestLineDiffTooLong(t *testing.T) {
	t.Parallel()
	a := strings.Repeat("x\n", 600_000)
	d := views.LineDiff(a, a+"y", views.DiffContext)
	if !d.TooLong || d.Same() || len(d.Lines) != 0 || !strings.Contains(d.Summary(), "too long") {
		t.Fatalf("%+v", d.Summary())
	}
}

// BenchmarkLineDiff is a preview of a large payload (half the default
// payload limit): 2 MiB of
// indented JSON (about 80,000 lines), one field changed in the middle.
func BenchmarkLineDiff(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("[\n")
	for i := 0; sb.Len() < 2<<20; i++ {
		fmt.Fprintf(&sb, "  {\n    \"orderId\": \"ord_%d\",\n    \"amount\": %d\n  },\n", i, i%1000)
	}
	sb.WriteString("  {}\n]")
	a := sb.String()
	mid := strings.Index(a[len(a)/2:], `"amount": `) + len(a)/2
	edited := a[:mid] + `"amount": -1` + a[strings.IndexByte(a[mid:], '\n')+mid:]
	b.SetBytes(int64(len(a)))
	for b.Loop() {
		d := views.LineDiff(a, edited, views.DiffContext)
		if d.Added != 1 || d.Removed != 1 {
			b.Fatalf("diff %d %d", d.Added, d.Removed)
		}
	}
}
