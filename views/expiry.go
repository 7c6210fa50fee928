package views

import "time"

// ExpiresIn says when a dead letter expires, from now: "expires in 3 h",
// or "expiring now" once it is due (the next maintenance removes it).
func ExpiresIn(t, now time.Time) string {
	if !t.After(now) {
		return "expiring now"
	}
	return "expires in " + Age(t.Sub(now))
}

// expiringCount says the count of an ExpiringNote: "312", "more than
// 10,000", "none".
func expiringCount(e ExpiringNote) string {
	switch {
	case e.More:
		return "More than " + Count(e.Count)
	case e.Count == 0:
		return "None"
	}
	return Count(e.Count)
}
