package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
)

// The hot bodies (a push, an ack, a batch of acks) are decoded by hand,
// without reflection, in one pass over the body that also checks each
// payload's JSON syntax. The hand decoders are a fast path only: on
// anything they do not handle exactly as encoding/json's strict decoding
// would (an error of any kind, null, a duplicate or case-folded key, a
// string with escapes they do not undo themselves, deep nesting), they
// give up and the body goes through decodeJSON's reflective decoder
// (decodeReader), which decides and words the error. So a body is
// accepted with the same values, or refused with the same message, as
// before; json_fast_test.go's differential fuzz tests check that the fast
// path agrees with the reflective one wherever it accepts.

// maxFastDepth is the nesting of a payload the fast path takes; deeper
// ones go to encoding/json, which refuses a document nested more than
// 10,000 levels.
const maxFastDepth = 1000

// decodeFast reads the request body and decodes it with fast, or, where
// fast gives up, with the reflective decoder into dst (decodeReader: the
// same rules and messages as decodeJSON).
func decodeFast(c echo.Context, dst any, fast func([]byte) bool) error {
	r := c.Request()
	body, err := readBody(r)
	if err != nil {
		// What encoding/json's decoder would have seen: the bytes that came,
		// then the error (a body over the cap, a timeout), so that the answer
		// is the one decodeJSON gave.
		return decodeReader(io.MultiReader(bytes.NewReader(body), errReader{err}), dst)
	}
	if fast(body) {
		return nil
	}
	return decodeReader(bytes.NewReader(body), dst)
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// maxBodyUpFront is the most readBody allocates before the bytes come: a
// Content-Length is a promise, and a client that makes it and sends
// nothing must not hold a buffer of the whole cap.
const maxBodyUpFront = 64 << 10

// readBody reads the whole body, in one allocation when the request says
// its length and it is at most maxBodyUpFront.
func readBody(r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n < 0 || n > maxBodyUpFront {
		n = 512
	}
	buf := make([]byte, 0, n+1) // +1: the read that finds the end
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// fastPush decodes a push body into req; false when it gives up.
func fastPush(body []byte, req *pushRequest) bool {
	d := fastDecoder{b: body}
	if !d.pushBody(req) || !d.end() {
		*req = pushRequest{}
		return false
	}
	return true
}

func (d *fastDecoder) pushBody(req *pushRequest) bool {
	empty, ok := d.open('{', '}')
	if !ok || empty {
		return ok
	}
	if key, ok := d.key(); !ok || string(key) != "items" {
		return false
	}
	if req.Items, ok = fastArray(d, 16, d.pushItem); !ok {
		return false
	}
	more, ok := d.more('}') // a second member: a duplicate or unknown key
	return ok && !more
}

// pushItem reads an item into it; prev is the item before it, whose
// strings are shared where they are the same (a batch's queue and
// partition).
func (d *fastDecoder) pushItem(it, prev *pushItem) bool {
	empty, ok := d.open('{', '}')
	if !ok || empty {
		return ok
	}
	for more := true; more; { // a duplicate key: the last wins, as in encoding/json
		key, ok := d.key()
		if !ok {
			return false
		}
		var dst *string
		var same string
		switch string(key) {
		case "queue":
			dst, same = &it.Queue, prev.Queue
		case "partition":
			dst, same = &it.Partition, prev.Partition
		case "transactionId":
			dst = &it.TransactionID
		case "traceId":
			dst, same = &it.TraceID, prev.TraceID
		case "payload":
		case "producerSub": // dropped (pushItem.ProducerSub)
			if !d.value(0) {
				return false
			}
			if more, ok = d.more('}'); !ok {
				return false
			}
			continue
		default:
			return false
		}
		if dst != nil {
			if !d.string(dst, same) {
				return false
			}
		} else {
			d.space()
			start := d.i
			if !d.value(0) {
				return false
			}
			it.Payload = json.RawMessage(d.b[start:d.i:d.i])
		}
		if more, ok = d.more('}'); !ok {
			return false
		}
	}
	return true
}

// ack decodes the members of one acknowledgement into a; prev is the one
// before it, whose strings are shared where they are the same (a batch's
// lease, partition, status and group).
func (d *fastDecoder) ack(a, prev *ackRequest) bool {
	empty, ok := d.open('{', '}')
	if !ok || empty {
		return ok
	}
	for more := true; more; { // a duplicate key: the last wins, as in encoding/json
		key, ok := d.key()
		if !ok {
			return false
		}
		var dst *string
		var same string
		switch string(key) {
		case "transactionId":
			dst = &a.TransactionID
		case "partitionId":
			dst, same = &a.PartitionID, prev.PartitionID
		case "leaseId":
			dst, same = &a.LeaseID, prev.LeaseID
		case "status":
			dst, same = &a.Status, prev.Status
		case "error":
			dst, same = &a.Error, prev.Error
		case "consumerGroup":
			dst, same = &a.ConsumerGroup, prev.ConsumerGroup
		case "consumerVersion":
			dst, same = &a.ConsumerVersion, prev.ConsumerVersion
		default:
			return false
		}
		if !d.string(dst, same) {
			return false
		}
		if more, ok = d.more('}'); !ok {
			return false
		}
	}
	return true
}

// fastAck decodes the body of one ack into req; false when it gives up.
func fastAck(body []byte, req *ackRequest) bool {
	d := fastDecoder{b: body}
	if !d.ack(req, &ackRequest{}) || !d.end() {
		*req = ackRequest{}
		return false
	}
	return true
}

// fastAckBatch decodes a batch of acks into req; false when it gives up.
func fastAckBatch(body []byte, req *ackBatchRequest) bool {
	d := fastDecoder{b: body}
	if !d.ackBatch(req) || !d.end() {
		*req = ackBatchRequest{}
		return false
	}
	return true
}

func (d *fastDecoder) ackBatch(req *ackBatchRequest) bool {
	empty, ok := d.open('{', '}')
	if !ok || empty {
		return ok
	}
	acks := false
	for more := true; more; {
		key, ok := d.key()
		if !ok {
			return false
		}
		switch string(key) {
		case "consumerGroup":
			if !d.string(&req.ConsumerGroup, "") {
				return false
			}
		case "consumerVersion":
			if !d.string(&req.ConsumerVersion, "") {
				return false
			}
		case "acknowledgments":
			if acks { // encoding/json would decode into the first one's elements
				return false
			}
			acks = true
			if req.Acknowledgments, ok = fastArray(d, 128, d.ack); !ok {
				return false
			}
		default:
			return false
		}
		if more, ok = d.more('}'); !ok {
			return false
		}
	}
	return true
}

// fastArray reads a JSON array whose elements item reads; item is given
// the element before, whose strings it may share.
func fastArray[T any](d *fastDecoder, capacity int, item func(it, prev *T) bool) ([]T, bool) {
	empty, ok := d.open('[', ']')
	if !ok {
		return nil, false
	}
	out := make([]T, 0, capacity)
	for more := !empty; more; {
		var zero T
		out = append(out, zero)
		// The first element is its own "before": still zero, it offers
		// only empty strings to share.
		prev := &out[max(len(out)-2, 0)]
		if !item(&out[len(out)-1], prev) {
			return nil, false
		}
		if more, ok = d.more(']'); !ok {
			return nil, false
		}
	}
	return out, true
}

// fastDecoder reads JSON from b at i. Its methods return false where it
// gives up: on invalid JSON, and on valid JSON it leaves to encoding/json.
type fastDecoder struct {
	b []byte
	i int
	// spaced says white space was skipped somewhere (appendCompact then
	// has some to take out; else it copies the value as it is).
	spaced bool
}

// space skips JSON's white space.
func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
			d.spaced = true
		default:
			return
		}
	}
}

// end reports whether only white space is left.
func (d *fastDecoder) end() bool {
	d.space()
	return d.i == len(d.b)
}

// next skips white space and reports whether the next byte is c,
// consuming it when it is.
func (d *fastDecoder) next(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// open reads the start of an object or array (open, then close at once
// when it is empty).
func (d *fastDecoder) open(open, close byte) (empty, ok bool) {
	if !d.next(open) {
		return false, false
	}
	return d.next(close), true
}

// more reads what follows a member or element: a comma (more) or close.
func (d *fastDecoder) more(close byte) (more, ok bool) {
	if d.next(',') {
		return true, true
	}
	return false, d.next(close)
}

// key reads an object's key and its colon. A key with an escape or a byte
// past ASCII gives up (encoding/json would unescape it).
func (d *fastDecoder) key() ([]byte, bool) {
	if !d.next('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) && d.b[d.i] != '"' {
		if c := d.b[d.i]; c == '\\' || c < 0x20 || c >= 0x80 {
			return nil, false
		}
		d.i++
	}
	if d.i == len(d.b) {
		return nil, false
	}
	key := d.b[start:d.i]
	d.i++
	return key, d.next(':')
}

// string reads a string into dst: as it is when it is plain ASCII (same
// itself when it is the same, allocating nothing), through encoding/json
// when it has escapes or other bytes (so that invalid UTF-8 and lone
// surrogates become U+FFFD as there). null and other types give up.
func (d *fastDecoder) string(dst *string, same string) bool {
	if !d.next('"') {
		return false
	}
	start := d.i
	plain := true
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			switch {
			case plain && string(d.b[start:d.i]) == same:
				*dst = same
			case plain:
				*dst = string(d.b[start:d.i])
			default:
				if json.Unmarshal(d.b[start-1:d.i+1], dst) != nil {
					return false
				}
			}
			d.i++
			return true
		case c == '\\':
			plain = false
			d.i += 2
			continue
		case c < 0x20:
			return false
		case c >= 0x80:
			plain = false
		}
		d.i++
	}
	return false
}

// value reads any JSON value at depth, checking its syntax as
// encoding/json's scanner does.
func (d *fastDecoder) value(depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	d.space()
	if d.i == len(d.b) {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		d.i++
		if d.next('}') {
			return true
		}
		for {
			d.space()
			if !d.skipString() || !d.next(':') || !d.value(depth+1) {
				return false
			}
			if d.next(',') {
				continue
			}
			return d.next('}')
		}
	case c == '[':
		d.i++
		if d.next(']') {
			return true
		}
		for {
			if !d.value(depth + 1) {
				return false
			}
			if d.next(',') {
				continue
			}
			return d.next(']')
		}
	case c == '"':
		return d.skipString()
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	}
	return false
}

// literal reads the literal word.
func (d *fastDecoder) literal(word string) bool {
	if len(d.b)-d.i < len(word) || string(d.b[d.i:d.i+len(word)]) != word {
		return false
	}
	d.i += len(word)
	return true
}

// skipString reads a string, checking its escapes; bytes past ASCII are
// taken as they are, as encoding/json's scanner does (the push checks
// that a payload is UTF-8). Runs of bytes with nothing to check are
// skipped eight at a time (plainEnd).
func (d *fastDecoder) skipString() bool {
	if d.i == len(d.b) || d.b[d.i] != '"' {
		return false
	}
	d.i++
	for {
		d.i = plainEnd(d.b, d.i, false)
		if d.i == len(d.b) {
			return false
		}
		switch d.b[d.i] {
		case '"':
			d.i++
			return true
		case '\\':
			d.i++
			if d.i == len(d.b) {
				return false
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if len(d.b)-d.i < 5 {
					return false
				}
				for _, h := range d.b[d.i+1 : d.i+5] {
					if !isHex(h) {
						return false
					}
				}
				d.i += 5
			default:
				return false
			}
		default: // a control character
			return false
		}
	}
}

// The bytes of a word, each the same (SWAR: "SIMD within a register").
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainEnd returns the index of the first byte of b at or after i that
// a JSON string's reader or writer must look at: '"', '\\', a control
// character (below 0x20) or, when ascii, a byte past ASCII; len(b) when
// there is none. It tests eight bytes at a time: a word has a byte below
// n (n <= 0x80) when (x - n·ones) &^ x has a high bit set (exact as to
// whether there is one), a byte equal to c when x ^ c·ones has a zero
// byte.
func plainEnd[T string | []byte](b T, i int, ascii bool) int {
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

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *fastDecoder) number() bool {
	if d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.i < len(d.b) && '1' <= d.b[d.i] && d.b[d.i] <= '9':
		d.digits()
	default:
		return false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if d.digits() == 0 {
			return false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return false
		}
	}
	return true
}

// digits reads decimal digits and returns how many.
func (d *fastDecoder) digits() int {
	start := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i - start
}
