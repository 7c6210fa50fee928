// Package password hashes, checks and makes the passwords of dashboard
// users. Hashes are bcrypt; the broker stores them and never sees a
// password.
package password

import (
	"bufio"
	"crypto/rand"
	_ "embed" // the list of common passwords
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// DefaultCost is the bcrypt cost of new hashes: about a quarter of a second
// on a current server core. Tests lower it.
const DefaultCost = 12

// Length limits. bcrypt reads at most 72 bytes; a longer password would be
// silently cut, so it is refused instead.
const (
	MinLength = 12
	MaxBytes  = 72
)

// ErrRefused is what every reason Validate gives matches (errors.Is): the
// password is not acceptable, and the message says why in words for the
// person who chose it.
var ErrRefused = errors.New("password refused")

// refusal is a reason Validate refuses a password.
type refusal string

func (r refusal) Error() string { return string(r) }

// Is makes every refusal an ErrRefused.
func (refusal) Is(target error) bool { return target == ErrRefused }

// The reasons Validate refuses a password; each is an ErrRefused.
var (
	ErrTooShort error = refusal(fmt.Sprintf("the password must be at least %d characters", MinLength))
	ErrTooLong  error = refusal(fmt.Sprintf("the password must be at most %d bytes", MaxBytes))
	ErrRepeated error = refusal("the password must not be one character repeated")
	ErrCommon   error = refusal("the password is one of the most common passwords (or one of them repeated, or followed by digits or symbols): choose another")
)

// Validate refuses passwords that are too short or too long for bcrypt,
// one character repeated, or guessed first by anyone who tries: one of
// the most common passwords in any case (common.txt), one repeated
// ("qwertyqwerty"), or one followed by digits and symbols only
// ("password2024!").
func Validate(pw string) error {
	switch {
	case len([]rune(pw)) < MinLength:
		return ErrTooShort
	case len(pw) > MaxBytes:
		return ErrTooLong
	case oneRuneRepeated(pw):
		return ErrRepeated
	case isCommon(pw):
		return ErrCommon
	}
	return nil
}

// oneRuneRepeated reports whether pw is a single character (of any
// script) repeated.
func oneRuneRepeated(pw string) bool {
	rs := []rune(pw)
	for _, r := range rs[1:] {
		if r != rs[0] {
			return false
		}
	}
	return true
}

// commonList is the list of common passwords: Openwall's password.lst
// (John the Ripper, 3,546 passwords seen most often on Unix systems and
// in website leaks up to 2011, in the public domain), as Debian's
// john-data package ships it.
//
//go:embed common.txt
var commonList string

// common is commonList as a set, in lower case; made on first use.
var common = sync.OnceValue(func() map[string]struct{} {
	set := make(map[string]struct{}, 3600)
	sc := bufio.NewScanner(strings.NewReader(commonList))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#!comment") {
			continue
		}
		set[strings.ToLower(line)] = struct{}{}
	}
	return set
})

// isCommon reports whether pw, in any case, is a common password, one
// repeated, or one followed by nothing but digits and symbols.
func isCommon(pw string) bool {
	set := common()
	lower := strings.ToLower(pw)
	if _, ok := set[lower]; ok {
		return true
	}
	// One followed by digits and symbols: "password2024!", "dragon1234567".
	if core := strings.TrimRightFunc(lower, func(r rune) bool { return r < 0x80 && !isLetter(byte(r)) }); core != lower && core != "" {
		if _, ok := set[core]; ok {
			return true
		}
	}
	// One repeated: "qwertyqwerty", "123456123456".
	for n := 1; n <= len(lower)/2; n++ {
		if len(lower)%n == 0 && strings.Repeat(lower[:n], len(lower)/n) == lower {
			if _, ok := set[lower[:n]]; ok {
				return true
			}
		}
	}
	return false
}

func isLetter(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }

// Hash validates pw and returns its bcrypt hash at cost (DefaultCost when 0).
func Hash(pw string, cost int) (string, error) {
	if err := Validate(pw); err != nil {
		return "", err
	}
	if cost == 0 {
		cost = DefaultCost
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// Match reports whether pw is the password of hash. It takes as long as
// hash's cost says whatever the answer; a malformed hash never matches.
func Match(hash, pw string) bool {
	err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw))
	return err == nil
}

// alphabet leaves out look-alikes (0/O, 1/l/I) so that a generated
// password can be read off a screen and typed.
const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// GeneratedLength is the length of a generated password: 24 characters of
// a 57-letter alphabet, about 140 bits.
const GeneratedLength = 24

// Generate makes a strong random password.
func Generate() (string, error) {
	b := make([]byte, GeneratedLength)
	max := big.NewInt(int64(len(alphabet)))
	for i := range b {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", fmt.Errorf("generate password: %w", err)
		}
		b[i] = alphabet[n.Int64()]
	}
	return string(b), nil
}
