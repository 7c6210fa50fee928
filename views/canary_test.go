package views_test

import (
	"testing"

	"github.com/lazarus-dlq/lazarus/views"
)

// A bulk replay's confirmation offers the canary, ticked above 100 dead
// letters as it counts them (5 at random, 120 s, none may fail); a
// delete has none.
func TestBulkConfirmOffersTheCanary(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name               string
		action             string
		count, deadLetters int64
		offered, ticked    bool
	}{
		{"ReplayOf100", "replay", 100, 0, true, false},
		{"ReplayOf101", "replay", 101, 0, true, true},
		{"ByFilterCountsDeadLetters", "replay", 90, 120, true, true},
		{"ByFilterOf100DeadLetters", "replay", 150, 100, true, false},
		{"Delete", "delete", 500, 0, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, _ := doc(t, views.BulkConfirmDialog(views.BulkConfirm{Action: tc.action, Count: tc.count, DeadLetters: tc.deadLetters, Queue: "payments", PostURL: "/x", MaxRate: 1000}))
			fs := d.Find(`[data-testid="confirm-canary"]`)
			if (fs.Length() == 1) != tc.offered {
				t.Fatalf("offered: %d fieldsets", fs.Length())
			}
			if !tc.offered {
				return
			}
			_, ticked := fs.Find(`[data-testid="confirm-canary-on"]`).Attr("checked")
			if ticked != tc.ticked {
				t.Errorf("ticked %v, want %v", ticked, tc.ticked)
			}
			for id, want := range map[string]string{"confirm-canary-count": "5", "confirm-canary-settle": "120", "confirm-canary-max-failed": "0"} {
				if v, _ := fs.Find(`[data-testid="` + id + `"]`).Attr("value"); v != want {
					t.Errorf("%s = %q, want %q", id, v, want)
				}
			}
		})
	}
}
