package broker

import (
	"errors"
	"strings"
	"testing"
)

func TestScopeAllowsByPattern(t *testing.T) {
	cases := []struct {
		scope string
		queue string
		want  bool
	}{
		{"", "anything", true},
		{"  ", "anything", true},
		{"orders*", "orders", true},
		{"orders*", "orders-eu", true},
		{"orders*", "my-orders", false},
		{"*-eu", "orders-eu", true},
		{"*-eu", "orders-us", false},
		{"billing", "billing", true},
		{"billing", "billing2", false},
		{"orders*, billing", "billing", true},
		{"orders*, billing", "payments", false},
		{"o*s", "orders", true},
		{"o*s", "ordersx", false},
		{"*", "x", true},
		{"Orders*", "orders", false}, // names are case-sensitive
	}
	for _, c := range cases {
		s, err := ParseQueueScope(c.scope)
		if err != nil {
			t.Fatalf("ParseQueueScope(%q): %v", c.scope, err)
		}
		if got := s.Allows(c.queue); got != c.want {
			t.Errorf("%q allows %q = %v, want %v", c.scope, c.queue, got, c.want)
		}
	}
}

func TestParseScopeRefusesBadPatterns(t *testing.T) {
	for _, s := range []string{"orders,", ",", "a b", "orders?", "[a]", "a/b", `a\*`, strings.Repeat("a", 256), strings.Repeat("a,", 100) + "a"} {
		if _, err := ParseQueueScope(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseQueueScope(%q) = %v, want ErrInvalid", s, err)
		}
	}
}

func TestScopeReadsTheSameHoweverWritten(t *testing.T) {
	a := MustParseQueueScope("orders*, billing, orders*")
	b := MustParseQueueScope("billing,orders*")
	if !a.Equal(b) || a.String() != "billing, orders*" {
		t.Fatalf("a = %q, b = %q: want equal, %q", a, b, "billing, orders*")
	}
	if MustParseQueueScope("").String() != "" || !MustParseQueueScope("").All() {
		t.Fatal("the empty scope is every queue and reads as empty")
	}
}

func TestScopeNarrowAllowsWhatBothAllow(t *testing.T) {
	user := MustParseQueueScope("orders*, billing")
	token := MustParseQueueScope("*-eu, billing")
	n := user.Narrow(token)
	for q, want := range map[string]bool{"orders-eu": true, "billing": true, "orders-us": false, "payments-eu": false} {
		if got := n.Allows(q); got != want {
			t.Errorf("narrowed allows %q = %v, want %v", q, got, want)
		}
	}
	if n.All() {
		t.Fatal("a narrowed scope is not every queue")
	}
	if got := (QueueScope{}).Narrow(user); !got.Equal(user) {
		t.Fatalf("every queue narrowed by %q = %q", user, got)
	}
	if got := user.Narrow(QueueScope{}); !got.Equal(user) {
		t.Fatalf("%q narrowed by every queue = %q", user, got)
	}
	if got := user.Narrow(user); !got.Equal(user) {
		t.Fatalf("%q narrowed by itself = %q", user, got)
	}
	if n.String() != "billing, orders* & *-eu, billing" {
		t.Fatalf("String = %q", n.String())
	}
}
