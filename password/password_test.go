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
		{strings.Repeat("xy", 36), nil},
		{strings.Repeat("xy", 36) + "z", password.ErrTooLong},
		// One character repeated, of any script.
		{strings.Repeat("x", 12), password.ErrRepeated},
		{strings.Repeat("x", 72), password.ErrRepeated},
		{strings.Repeat("ü", 12), password.ErrRepeated},
		{strings.Repeat("1", 20), password.ErrRepeated},
		// Common passwords (common.txt), in any case, repeated, or with
		// digits and symbols after them.
		{"winniethepooh", password.ErrCommon},
		{"WinnieThePooh", password.ErrCommon},
		{"qwertyqwerty", password.ErrCommon},
		{"123456123456", password.ErrCommon},
		{"password2024!", password.ErrCommon},
		{"Dragon1234567", password.ErrCommon},
		{"monkey-monkey", nil},
		{"password-of-ann", nil},
		{"dragon 2024 fire", nil},
	}
	for _, c := range cases {
		if err := password.Validate(c.pw); !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.pw, err, c.want)
		}
	}
	if _, err := password.Hash("short", bcrypt.MinCost); !errors.Is(err, password.ErrTooShort) {
		t.Errorf("Hash of a short password: %v", err)
	}
	if _, err := password.Hash("qwertyqwerty", bcrypt.MinCost); !errors.Is(err, password.ErrCommon) {
		t.Errorf("Hash of a common password: %v", err)
	}
}

// Every reason of a refusal is an ErrRefused, and says what to do in
// words: the dashboard and the command line show it as it is.
func TestRefusalsSayWhy(t *testing.T) {
	t.Parallel()
	for pw, want := range map[string]string{
		"short":                 "at least 12 characters",
		strings.Repeat("a", 80): "at most 72 bytes",
		strings.Repeat("a", 12): "one character repeated",
		"Password123456":        "most common passwords",
		"iloveyouiloveyou":      "most common passwords",
	} {
		err := password.Validate(pw)
		if !errors.Is(err, password.ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%q) = %v, want an ErrRefused saying %q", pw, err, want)
		}
	}
	if err := password.Validate("correct horse battery"); err != nil {
		t.Errorf("a passphrase: %v", err)
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
