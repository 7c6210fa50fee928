// Package password hashes, checks and makes the passwords of dashboard
// users. Hashes are bcrypt; the broker stores them and never sees a
// password.
package password

import (
	"crypto/rand"
	"fmt"
	"math/big"

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

// ErrTooShort and ErrTooLong are the reasons Validate refuses a password.
var (
	ErrTooShort = fmt.Errorf("the password must be at least %d characters", MinLength)
	ErrTooLong  = fmt.Errorf("the password must be at most %d bytes", MaxBytes)
)

// Validate refuses passwords that are too short or too long for bcrypt.
func Validate(pw string) error {
	switch {
	case len([]rune(pw)) < MinLength:
		return ErrTooShort
	case len(pw) > MaxBytes:
		return ErrTooLong
	}
	return nil
}

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
