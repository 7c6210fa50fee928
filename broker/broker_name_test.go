package broker

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidNameAgreesWithTheRule checks ValidName against the rule as a
// regular expression (the way SPEC.md states it), over every byte and the
// length limits.
func TestValidNameAgreesWithTheRule(t *testing.T) {
	rule := regexp.MustCompile(`^[A-Za-z0-9._-]{1,255}$`)
	cases := []string{"", "a", "orders", "tenant-1", "a.b_c-D9", strings.Repeat("x", 255), strings.Repeat("x", 256), "é", "a b", "a/b", "a\x00"}
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "ok"+string([]byte{byte(c)}))
	}
	for _, s := range cases {
		if got, want := ValidName(s), rule.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, the rule says %v", s, got, want)
		}
	}
}
