package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Wait says a retry's wait exactly enough to read: "200 ms", "1.5 s",
// "2 min 30 s", "1 h 5 min". Under a minute it keeps milliseconds, under
// an hour seconds, above minutes (a wait is at most a day).
func Wait(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return strconv.FormatFloat(float64(d.Milliseconds())/1000, 'f', -1, 64) + " s"
	case d < time.Hour:
		s := int(d.Round(time.Second).Seconds())
		if s%60 == 0 {
			return fmt.Sprintf("%d min", s/60)
		}
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	default:
		m := int(d.Round(time.Minute).Minutes())
		if m%60 == 0 {
			return fmt.Sprintf("%d h", m/60)
		}
		return fmt.Sprintf("%d h %d min", m/60, m%60)
	}
}

// scheduleRuns is how many runs of equal waits a schedule lists before
// it elides the middle (the first ones and the last two are kept).
const scheduleRuns = 8

// RetrySchedule says in words what a message's retries wait, one wait a
// retry, and what comes after the last: "1 s, 2 s, 4 s, then the dead
// letters" (keep), or "…, then dropped". A run of more than three equal
// waits is written once with its count ("5 min (997 times)"); a
// schedule of many different waits keeps its first and last ones around
// an ellipsis.
func RetrySchedule(waits []time.Duration, keep bool) string {
	end := "then the dead letters"
	if !keep {
		end = "then dropped"
	}
	if len(waits) == 0 {
		if keep {
			return "no retry: the first failure goes to the dead letters"
		}
		return "no retry: the first failure is dropped"
	}
	type run struct {
		wait time.Duration
		n    int
	}
	var runs []run
	for _, w := range waits {
		if len(runs) > 0 && runs[len(runs)-1].wait == w {
			runs[len(runs)-1].n++
			continue
		}
		runs = append(runs, run{w, 1})
	}
	say := func(r run) []string {
		if r.n > 3 {
			return []string{fmt.Sprintf("%s (%d times)", Wait(r.wait), r.n)}
		}
		out := make([]string, r.n)
		for i := range out {
			out[i] = Wait(r.wait)
		}
		return out
	}
	var parts []string
	if len(runs) > scheduleRuns {
		for _, r := range runs[:scheduleRuns-2] {
			parts = append(parts, say(r)...)
		}
		parts = append(parts, "…")
		runs = runs[len(runs)-2:]
	}
	for _, r := range runs {
		parts = append(parts, say(r)...)
	}
	return strings.Join(parts, ", ") + ", " + end
}
