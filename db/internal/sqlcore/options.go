package sqlcore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lazarus-dlq/lazarus/broker"
)

// ErrClosed is the error of an Update after Close.
var ErrClosed = errors.New("database closed")

// Run calls fn, turning a panic into an error: a bug in one request must
// not take the writer down with it.
func Run(fn func(broker.Tx) error, tx broker.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in a write: %v", p)
		}
	}()
	return fn(tx)
}

// SQLiteNumber is a JSON number as SQLite's json_tree gives it as text:
// an integer in decimal (one too big for 64 bits is a real), a real with
// 15 significant digits when they read back as the same number (else 17),
// with a fraction always (100.0) and an exponent below 1e-4 and from 1e17
// (1.5e-07, 1.0e+20). (SQLite reads a few numbers of 15 digits and more
// one unit in the last place apart from Go, and writes those with 17
// digits of its own: their words differ.)
func SQLiteNumber(n string) string {
	if !strings.ContainsAny(n, ".eE") {
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			return strconv.FormatInt(i, 10)
		}
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return n
	}
	if f == 0 {
		f = 0 // -0.0 is 0.0
	}
	s := strconv.FormatFloat(f, 'e', 14, 64)
	if g, _ := strconv.ParseFloat(s, 64); g != f {
		s = strconv.FormatFloat(f, 'e', 16, 64)
	}
	mant, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	neg := strings.HasPrefix(mant, "-")
	digits := strings.TrimRight(strings.Replace(strings.TrimPrefix(mant, "-"), ".", "", 1), "0")
	if digits == "" {
		digits = "0"
	}
	var out string
	if e < -4 || e >= 17 {
		out = digits[:1] + "." + digits[1:]
		if len(digits) == 1 {
			out += "0"
		}
		sign := "+"
		if e < 0 {
			sign, e = "-", -e
		}
		out += fmt.Sprintf("e%s%02d", sign, e)
	} else if e < 0 {
		out = "0." + strings.Repeat("0", -e-1) + digits
	} else {
		whole, frac := digits, ""
		if len(digits) > e+1 {
			whole, frac = digits[:e+1], digits[e+1:]
		} else {
			whole += strings.Repeat("0", e+1-len(digits))
		}
		if frac == "" {
			frac = "0"
		}
		out = whole + "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}
