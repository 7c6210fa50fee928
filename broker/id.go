package broker

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"time"
)

// MessageID makes a message's public id: a UUIDv7 whose 48-bit time is the
// push time and whose 62 random bits are the message's sequence number.
// The id is unique (the sequence is), sorts by time, and maps back to the
// sequence without an index.
func MessageID(created time.Time, seq int64) string {
	var s [36]byte
	return string(AppendMessageID(s[:0], created, seq))
}

// AppendMessageID appends MessageID(created, seq) to dst: for answers
// written straight into a buffer, without a string a message.
func AppendMessageID(dst []byte, created time.Time, seq int64) []byte {
	var b [16]byte
	ms := uint64(created.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	b[6] = 0x70 // version 7, rand_a 0
	binary.BigEndian.PutUint64(b[8:], uint64(seq)&(1<<62-1))
	b[8] |= 0x80 // variant 10
	return appendUUID(dst, b)
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

// Lease ids name the consumer that holds them, so that an ack, an extend
// or a transaction finds its lease by the consumers' primary key: the
// unique index of lease ids they needed before (migration 0027) wrote two
// pages of the log a pop and an ack, about a fifth of them. A lease id is a
// UUID of version 8 (RFC 9562's custom layout): 60 random bits (48, the
// version nibble, 12), the variant, then the group's id in 24 bits and the
// partition's in 38. The random bits keep each lease of a consumer apart
// from its others (a stale ack must never settle a later lease: 2^-60);
// the store still compares the whole id with the one it holds.
const (
	leaseGroupBits     = 24
	leasePartitionBits = 38
	// MaxLeaseGroupID and MaxLeasePartitionID are the largest ids a lease
	// id can name (16.7 million groups, 2.7e11 partitions ever created);
	// a consumer with a larger one gets lease ids of the older kind.
	MaxLeaseGroupID     = 1<<leaseGroupBits - 1
	MaxLeasePartitionID = 1<<leasePartitionBits - 1
)

// NewLeaseID returns a new lease id for the consumer of partitionID and
// groupID, different from each of the ids in not (its lease before, its
// void lease). Past MaxLeasePartitionID or MaxLeaseGroupID it is a random
// UUIDv7 naming no consumer, which the store finds by an index it keeps
// for those: slower to write, never refused.
func NewLeaseID(partitionID, groupID int64, not ...string) string {
	fits := partitionID >= 1 && partitionID <= MaxLeasePartitionID && groupID >= 1 && groupID <= MaxLeaseGroupID
	for {
		if !fits {
			if id := NewUUID(time.Now()); !slices.Contains(not, id) {
				return id
			}
			continue
		}
		var b [16]byte
		if _, err := rand.Read(b[:8]); err != nil {
			panic("crypto/rand failed: " + err.Error()) // never on supported platforms
		}
		b[6] = 0x80 | b[6]&0x0F                                                  // version 8
		ids := 2<<62 | uint64(groupID)<<leasePartitionBits | uint64(partitionID) // variant 10
		binary.BigEndian.PutUint64(b[8:], ids)
		id := formatUUID(b)
		if !slices.Contains(not, id) {
			return id
		}
	}
}

// LeaseConsumer returns the partition and group a lease id made by
// NewLeaseID names; ok is false for anything else (a lease id of an older
// version, or no lease id at all).
func LeaseConsumer(id string) (partitionID, groupID int64, ok bool) {
	b, ok := parseUUID(id)
	if !ok || b[6]&0xF0 != 0x80 || b[8]&0xC0 != 0x80 {
		return 0, 0, false
	}
	ids := binary.BigEndian.Uint64(b[8:])
	partitionID = int64(ids & (1<<leasePartitionBits - 1))
	groupID = int64(ids >> leasePartitionBits & (1<<leaseGroupBits - 1))
	return partitionID, groupID, partitionID > 0 && groupID > 0
}

// A pop of several partitions (PopRequest.Partitions) puts them all under
// one lease, as Queen does: a shared lease id, of NewLeaseID's layout with
// the partition's 38 bits zero (no partition has id 0), names the group
// alone, and every consumer the pop leased holds it in its row. The store
// finds those rows by an index of shared lease ids only, which a lease of
// one partition never writes.

// NewSharedLeaseID returns a new shared lease id for a pop of groupID,
// different from each of the ids in not. A group id past MaxLeaseGroupID
// is left out (the group bits are zero): the id is still a shared one.
func NewSharedLeaseID(groupID int64, not ...string) string {
	if groupID < 1 || groupID > MaxLeaseGroupID {
		groupID = 0
	}
	for {
		var b [16]byte
		if _, err := rand.Read(b[:8]); err != nil {
			panic("crypto/rand failed: " + err.Error()) // never on supported platforms
		}
		b[6] = 0x80 | b[6]&0x0F // version 8
		binary.BigEndian.PutUint64(b[8:], 2<<62|uint64(groupID)<<leasePartitionBits)
		id := formatUUID(b)
		if !slices.Contains(not, id) {
			return id
		}
	}
}

// IsSharedLease reports whether id is a lease id NewSharedLeaseID makes:
// version 8, variant 10, the partition's bits zero. The stores' index of
// shared lease ids says the same of the id's text (lowercase, as made).
func IsSharedLease(id string) bool {
	b, ok := parseUUID(id)
	return ok && b[6]&0xF0 == 0x80 && b[8]&0xC0 == 0x80 && binary.BigEndian.Uint64(b[8:])&(1<<leasePartitionBits-1) == 0
}

// NewUUID returns a random UUIDv7 for the given time: partition
// ids and server-made transaction ids.
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
	return string(appendUUID(s[:0], b))
}

// appendUUID appends b in the UUID's text form (8-4-4-4-12 hex digits).
func appendUUID(dst []byte, b [16]byte) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, 36)...)
	s := dst[n:]
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return dst
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
