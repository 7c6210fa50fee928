// Package jsonscan reads JSON a token at a time, checking its syntax as
// encoding/json's scanner does, for the readers written by hand on the
// hot paths: web's decoders of pushes and acks, which copy a payload out
// as it is, and broker's payload masks, which copy all but the masked
// values. Each walks the containers its own way (what it keeps, how deep
// it goes); the tokens they share are here, written once.
//
// Why by hand: encoding/json decodes a payload to copy it (and escapes
// it again on the way out), and reading one token at a time is what
// lets a reader stop, or copy a value as it stands, where it must.
package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// Scanner reads the JSON of B from I. Its methods move I past what they
// read; those that report false leave I where the input stopped making
// sense, and the caller gives up.
type Scanner struct {
	B []byte
	I int
	// Spaced says white space was skipped somewhere (a reader that copies
	// a value as it is then has some to take out).
	Spaced bool
	// Escaped says a string skipped (SkipString) had an escape.
	Escaped bool
}

// Space skips JSON's white space.
func (s *Scanner) Space() {
	if s.I < len(s.B) && s.B[s.I] > ' ' {
		return // most often: no white space (inlined)
	}
	s.spaces()
}

// spaces is Space past its first test.
func (s *Scanner) spaces() {
	for s.I < len(s.B) {
		switch s.B[s.I] {
		case ' ', '\t', '\r', '\n':
			s.I++
			s.Spaced = true
		default:
			return
		}
	}
}

// Next skips white space and reports whether the next byte is c,
// consuming it when it is.
func (s *Scanner) Next(c byte) bool {
	if s.I < len(s.B) && s.B[s.I] == c {
		s.I++ // most often: no white space before (inlined)
		return true
	}
	return s.nextSpaced(c)
}

// nextSpaced is Next past its first test.
func (s *Scanner) nextSpaced(c byte) bool {
	s.spaces()
	if s.I < len(s.B) && s.B[s.I] == c {
		s.I++
		return true
	}
	return false
}

// End reports whether only white space is left.
func (s *Scanner) End() bool {
	s.Space()
	return s.I == len(s.B)
}

// Literal moves past word; false when it is not at I.
func (s *Scanner) Literal(word string) bool {
	if len(s.B)-s.I < len(word) || string(s.B[s.I:s.I+len(word)]) != word {
		return false
	}
	s.I += len(word)
	return true
}

// SkipString moves past the string that starts at I, checking its
// escapes and that it holds no control character; bytes past ASCII are
// taken as they are, as encoding/json's scanner takes them (a push
// checks that a payload is UTF-8). False where there is no such string.
func (s *Scanner) SkipString() bool {
	b, i := s.B, s.I // locals: the loop runs over every byte of most payloads
	if i == len(b) || b[i] != '"' {
		return false
	}
	for i++; i < len(b); {
		// Eight bytes at a time to the first that is a quote, a backslash
		// or a control character (PlainEnd's test, written out here: a
		// call per string costs a mask walk of short strings a tenth).
		for ; len(b)-i >= 8; i += 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			q, e := x^('"'*ones), x^('\\'*ones)
			if m := ((x - 0x20*ones) &^ x) | ((q - ones) &^ q) | ((e - ones) &^ e); m&highs != 0 {
				i += bits.TrailingZeros64(m&highs) / 8
				break
			}
		}
		if i == len(b) {
			return false
		}
		c := b[i]
		switch {
		case c >= 0x20 && c != '"' && c != '\\':
			i++
			continue
		case c == '"':
			s.I = i + 1
			return true
		case c < 0x20 || i+1 == len(b):
			return false
		}
		s.Escaped = true
		switch b[i+1] { // an escape
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if len(b)-i < 6 || !IsHex(b[i+2]) || !IsHex(b[i+3]) || !IsHex(b[i+4]) || !IsHex(b[i+5]) {
				return false
			}
			i += 6
		default:
			return false
		}
	}
	return false
}

// Number moves past a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// (I is at its first byte, a '-' or a digit).
func (s *Scanner) Number() bool {
	if s.B[s.I] == '-' {
		s.I++
	}
	switch {
	case s.I < len(s.B) && s.B[s.I] == '0':
		s.I++
	case s.I < len(s.B) && '1' <= s.B[s.I] && s.B[s.I] <= '9':
		s.Digits()
	default:
		return false
	}
	if s.I < len(s.B) && s.B[s.I] == '.' {
		s.I++
		if s.Digits() == 0 {
			return false
		}
	}
	if s.I < len(s.B) && (s.B[s.I] == 'e' || s.B[s.I] == 'E') {
		s.I++
		if s.I < len(s.B) && (s.B[s.I] == '+' || s.B[s.I] == '-') {
			s.I++
		}
		if s.Digits() == 0 {
			return false
		}
	}
	return true
}

// Digits moves past decimal digits and returns how many.
func (s *Scanner) Digits() int {
	start := s.I
	for s.I < len(s.B) && '0' <= s.B[s.I] && s.B[s.I] <= '9' {
		s.I++
	}
	return s.I - start
}

// IsHex reports whether c is a hexadecimal digit.
func IsHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// The bytes of a word, each the same (SWAR: "SIMD within a register").
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// PlainEnd returns the index of the first byte of b at or after i that
// a JSON string's reader or writer must look at: '"', '\\', a control
// character (below 0x20) or, when ascii, a byte past ASCII; len(b) when
// there is none. It tests eight bytes at a time: a word has a byte below
// n (n <= 0x80) when (x - n·ones) &^ x has a high bit set (exact as to
// whether there is one), a byte equal to c when x ^ c·ones has a zero
// byte.
func PlainEnd[T string | []byte](b T, i int, ascii bool) int {
	for ; len(b)-i >= 8; i += 8 {
		x := load64(b, i)
		m := (x-0x20*ones)&^x | (x^'"'*ones-ones)&^(x^'"'*ones) | (x^'\\'*ones-ones)&^(x^'\\'*ones)
		if ascii {
			m |= x
		}
		if m&highs != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 || ascii && c >= 0x80 {
			return i
		}
	}
	return i
}

// load64 reads the eight bytes of b from i as a little-endian word (one
// load: the compiler joins the eight).
func load64[T string | []byte](b T, i int) uint64 {
	_ = b[i+7]
	return uint64(b[i]) | uint64(b[i+1])<<8 | uint64(b[i+2])<<16 | uint64(b[i+3])<<24 |
		uint64(b[i+4])<<32 | uint64(b[i+5])<<40 | uint64(b[i+6])<<48 | uint64(b[i+7])<<56
}
