package broker

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// MessageID makes a message's public id: a UUIDv7 whose 48-bit time is the
// push time and whose 62 random bits are the message's sequence number.
// The id is unique (the sequence is), sorts by time, and maps back to the
// sequence without an index.
func MessageID(created time.Time, seq int64) string {
	var b [16]byte
	ms := uint64(created.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	b[6] = 0x70 // version 7, rand_a 0
	binary.BigEndian.PutUint64(b[8:], uint64(seq)&(1<<62-1))
	b[8] |= 0x80 // variant 10
	return formatUUID(b)
}

// ParseMessageID returns the push time (in milliseconds) and sequence an id
// made by MessageID holds. ok is false for anything else.
func ParseMessageID(id string) (ms int64, seq int64, ok bool) {
	b, ok := parseUUID(id)
	if !ok || b[6] != 0x70 || b[7] != 0 || b[8]&0xC0 != 0x80 {
		return 0, 0, false
	}
	ms = int64(b[0])<<40 | int64(b[1])<<32 | int64(b[2])<<24 | int64(b[3])<<16 | int64(b[4])<<8 | int64(b[5])
	seq = int64(binary.BigEndian.Uint64(b[8:]) & (1<<62 - 1))
	return ms, seq, seq > 0
}

// NewUUID returns a random UUIDv7 for the given time: lease ids,
// partition ids and server-made transaction ids.
func NewUUID(now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	if _, err := rand.Read(b[6:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never on supported platforms
	}
	b[6] = 0x70 | b[6]&0x0F
	b[8] = 0x80 | b[8]&0x3F
	return formatUUID(b)
}

func formatUUID(b [16]byte) string {
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

func parseUUID(s string) (b [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return b, false
	}
	parts := [][2]int{{0, 8}, {9, 13}, {14, 18}, {19, 23}, {24, 36}}
	i := 0
	for _, p := range parts {
		n, err := hex.Decode(b[i:], []byte(s[p[0]:p[1]]))
		if err != nil {
			return b, false
		}
		i += n
	}
	return b, true
}
