package broker

import (
	"context"
	"encoding/json"
	"path"
	"slices"
	"strings"
)

// QueueScope is the queues a principal may see (DASHBOARD.md, "Who sees what"):
// queue names or patterns in which '*' stands for any run of characters
// ("orders*", "*-eu"). The zero QueueScope has no patterns and allows every
// queue. A queue out of a principal's scope is as if absent.
//
// A QueueScope may be the meeting of several (Narrow): a user's token limited
// to fewer queues than the user, or a mapped group's patterns within a
// user's. It allows a queue when each of its parts does.
//
// A QueueScope is a value: it is never changed after it is made.
type QueueScope struct {
	// parts are lists of patterns; a queue is in scope when every list
	// has a pattern that matches it. No parts: every queue.
	parts [][]string
}

// maxScopePatterns bounds a scope's patterns (a pasted list of thousands
// of names is refused, not matched on every request).
const maxScopePatterns = 100

// ParseQueueScope reads a comma-separated list of queue names and patterns
// ("orders*, billing"). Blanks around each are ignored; an empty text is
// every queue. A pattern is 1-255 letters, digits, '.', '_', '-' and '*'.
// Duplicates are dropped; the patterns are kept sorted, so that one scope
// reads the same however it was written.
func ParseQueueScope(s string) (QueueScope, error) {
	if strings.TrimSpace(s) == "" {
		return QueueScope{}, nil
	}
	fields := strings.Split(s, ",")
	if len(fields) > maxScopePatterns {
		return QueueScope{}, errorf(ErrInvalid, "a queue scope has at most %d patterns, got %d", maxScopePatterns, len(fields))
	}
	patterns := make([]string, 0, len(fields))
	for _, f := range fields {
		p := strings.TrimSpace(f)
		if err := checkScopePattern(p); err != nil {
			return QueueScope{}, err
		}
		patterns = append(patterns, p)
	}
	slices.Sort(patterns)
	return QueueScope{parts: [][]string{slices.Compact(patterns)}}, nil
}

// MustParseQueueScope is ParseQueueScope for literals in code and tests; it panics
// on an invalid text.
func MustParseQueueScope(s string) QueueScope {
	sc, err := ParseQueueScope(s)
	if err != nil {
		panic(err)
	}
	return sc
}

func checkScopePattern(p string) error {
	if p == "" || len(p) > MaxNameLength {
		return errorf(ErrInvalid, "a queue pattern must be 1-%d characters, got %q", MaxNameLength, truncate(p, 64))
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-', c == '*':
		default:
			return errorf(ErrInvalid, "queue pattern %q: only letters, digits, '.', '_', '-' and '*' (any run of characters)", truncate(p, 64))
		}
	}
	return nil
}

// All reports whether s allows every queue.
func (s QueueScope) All() bool { return len(s.parts) == 0 }

// Allows reports whether the queue named queue is in s.
func (s QueueScope) Allows(queue string) bool {
	for _, part := range s.parts {
		if !matchAny(part, queue) {
			return false
		}
	}
	return true
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		// Patterns hold no '/', '?', '[' or '\' (checkScopePattern), so
		// path.Match's only special character here is '*', and it never
		// fails on them.
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Narrow returns the scope of the queues both s and t allow.
func (s QueueScope) Narrow(t QueueScope) QueueScope {
	if s.All() {
		return t
	}
	if t.All() {
		return s
	}
	parts := make([][]string, 0, len(s.parts)+len(t.parts))
	parts = append(parts, s.parts...)
	for _, p := range t.parts {
		if !slices.ContainsFunc(parts, func(q []string) bool { return slices.Equal(p, q) }) {
			parts = append(parts, p)
		}
	}
	return QueueScope{parts: parts}
}

// String is the scope as ParseQueueScope reads it: "" for every queue, the
// patterns joined by ", ". A narrowed scope joins its parts with " & "
// (shown, not parsed back).
func (s QueueScope) String() string {
	parts := make([]string, len(s.parts))
	for i, p := range s.parts {
		parts[i] = strings.Join(p, ", ")
	}
	return strings.Join(parts, " & ")
}

// Equal reports whether s and t were made of the same patterns.
func (s QueueScope) Equal(t QueueScope) bool {
	return slices.EqualFunc(s.parts, t.parts, slices.Equal)
}

// MarshalJSON writes s as its lists of patterns (null: every queue), so
// that a narrowed scope, which String shows but ParseQueueScope cannot
// read back, survives a round trip: a bulk job keeps the scope of the
// request that made it (DLQQuery.Scope).
func (s QueueScope) MarshalJSON() ([]byte, error) { return json.Marshal(s.parts) }

// UnmarshalJSON reads what MarshalJSON wrote, checking each pattern.
func (s *QueueScope) UnmarshalJSON(b []byte) error {
	var parts [][]string
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	for _, part := range parts {
		if len(part) == 0 || len(part) > maxScopePatterns {
			return errorf(ErrInvalid, "a stored queue scope has a list of %d patterns", len(part))
		}
		for _, p := range part {
			if err := checkScopePattern(p); err != nil {
				return err
			}
		}
	}
	*s = QueueScope{parts: parts}
	return nil
}

// scopeQueueIDs resolves s to the ids of the queues it allows, from the
// list of every queue (a scope's patterns are matched in Go, never put
// into SQL). all is true when s allows every queue: no ids then.
func scopeQueueIDs(ctx context.Context, tx QueueTx, s QueueScope) (ids []int64, all bool, err error) {
	if s.All() {
		return nil, true, nil
	}
	qs, err := tx.Queues(ctx)
	if err != nil {
		return nil, false, err
	}
	ids = []int64{}
	for _, q := range qs {
		if s.Allows(q.Name) {
			ids = append(ids, q.ID)
		}
	}
	return ids, false, nil
}
