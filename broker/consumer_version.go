package broker

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// checkConsumerVersion refuses an ack's consumerVersion (SPEC section 7)
// that is not text a page and a filter can show: more than
// MaxConsumerVersion bytes, not UTF-8, or holding a control character
// (a NUL, a newline, an escape). "" is no version.
func checkConsumerVersion(v string) error {
	if len(v) > MaxConsumerVersion {
		return fmt.Errorf("consumerVersion is at most %d bytes, got %d", MaxConsumerVersion, len(v))
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("consumerVersion must be UTF-8 text")
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("consumerVersion must not hold control characters (got %U)", r)
		}
	}
	return nil
}
