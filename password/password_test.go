package password_test

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/lazarus-dlq/lazarus/password"
)

func TestHashAndMatch(t *testing.T) {
	t.Parallel()
	h, err := password.Hash("correct horse battery", bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h, "horse") || !password.Match(h, "correct horse battery") {
		t.Fatalf("hash %q", h)
	}
	for _, wrong := range []string{"", "correct horse batter", "Correct horse battery"} {
		if password.Match(h, wrong) {
			t.Errorf("%q matched", wrong)
		}
	}
	if password.Match("", "") || password.Match("not-bcrypt", "x") {
		t.Error("a malformed hash matched")
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pw   string
		want error
	}{
		{"short", password.ErrTooShort},
		{"elevenchars", password.ErrTooShort},
		{"twelve chars", nil},
		{"ünïcödé-twelve", nil},
		{strings.Repeat("x", 72), nil},
		{strings.Repeat("x", 73), password.ErrTooLong},
	}
	for _, c := range cases {
		if err := password.Validate(c.pw); !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.pw, err, c.want)
		}
	}
	if _, err := password.Hash("short", bcrypt.MinCost); !errors.Is(err, password.ErrTooShort) {
		t.Errorf("Hash of a short password: %v", err)
	}
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	a, err := password.Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := password.Generate()
	if a == b || len(a) != password.GeneratedLength || password.Validate(a) != nil {
		t.Fatalf("%q %q", a, b)
	}
}
