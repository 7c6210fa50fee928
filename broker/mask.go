package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/lazarus-dlq/lazarus/internal/jsonscan"
)

// Masking (DASHBOARD.md, "Who sees what"): a queue's options name payload
// fields by JSON paths (maskPaths) and the role that may reveal them
// (maskRevealRole). Wherever a payload is shown (pages, API answers,
// search, diffs, exports, archive lines, notifications) the values at
// those paths read MaskedValue; a role at or above maskRevealRole may
// reveal one dead letter's (audited) and export them with an explicit
// flag (audited); a role below it may not search or filter on them.

// MaskedValue is what a masked value reads, a JSON string.
const MaskedValue = "•••"

// maskedJSON is MaskedValue as a JSON value.
var maskedJSON = []byte(`"` + MaskedValue + `"`)

// MaxMaskPaths bounds how many paths one queue masks, and MaxMaskPath
// how long one may be: a mask is applied to every payload shown.
const (
	MaxMaskPaths = 32
	MaxMaskPath  = 256
)

// MaskPaths are a queue's masked paths, one a line, as given (each
// checked by ParseMaskPath); "" masks nothing. A string, so that Options
// stay comparable (as KeptOptions).
type MaskPaths string

// List returns the paths, nil for none.
func (m MaskPaths) List() []string {
	if m == "" {
		return nil
	}
	return strings.Split(string(m), "\n")
}

// maskStep is one step of a mask path: a key (name), any child (any: `*`
// or `[*]`), or an array index; desc: at any depth below (`..`).
type maskStep struct {
	desc  bool
	any   bool
	key   string
	index int // -1: a key step
}

func (s maskStep) matchKey(k string) bool { return s.any || (s.index < 0 && s.key == k) }
func (s maskStep) matchIndex(i int) bool  { return s.any || s.index == i }

// maskPath is a parsed path: the steps from the root.
type maskPath []maskStep

// ParseMaskPath parses a JSON path as maskPaths takes it: `$` then steps,
// each `.name`, `['name']` or `["name"]` (a key), `.*` or `[*]` (any key
// or element), `[n]` (an element), any of which `..` instead of `.` (or
// `..` before a bracket) looks for at any depth. A name is letters,
// digits and any character but `.`, `[`, `]`, quotes and spaces. `$`
// alone is the whole payload.
func ParseMaskPath(s string) (maskPath, error) {
	bad := func(why string) error {
		return errorf(ErrInvalid, "mask path %q: %s", truncate(s, 64), why)
	}
	if len(s) > MaxMaskPath {
		return nil, bad("longer than " + strconv.Itoa(MaxMaskPath) + " bytes")
	}
	if !utf8.ValidString(s) {
		return nil, bad("not UTF-8")
	}
	if !strings.HasPrefix(s, "$") {
		return nil, bad("must start with $")
	}
	var p maskPath
	i := 1
	for i < len(s) {
		st := maskStep{index: -1}
		switch {
		case strings.HasPrefix(s[i:], ".."):
			st.desc = true
			i += 2
			if i < len(s) && s[i] == '[' {
				break // a bracket step, below
			}
			fallthrough
		case s[i] == '.':
			if !st.desc {
				i++
			}
			if i < len(s) && s[i] == '*' {
				st.any = true
				i++
				p = append(p, st)
				continue
			}
			j := i
			for j < len(s) && !strings.ContainsRune(".[]'\" \t\r\n", rune(s[j])) && s[j] >= 0x20 {
				j++
			}
			if j == i {
				return nil, bad("a name must follow . at byte " + strconv.Itoa(i))
			}
			st.key = s[i:j]
			i = j
			p = append(p, st)
			continue
		case s[i] != '[':
			return nil, bad("unexpected " + strconv.QuoteRune(rune(s[i])) + " at byte " + strconv.Itoa(i) + " (a step is .name, ['name'], [*] or [n])")
		}
		// A bracket step: [*], [n], ['name'] or ["name"].
		if i >= len(s) || s[i] != '[' {
			return nil, bad("a name or [ must follow .. at byte " + strconv.Itoa(i))
		}
		end := -1
		switch {
		case strings.HasPrefix(s[i:], "[*]"):
			st.any, end = true, i+3
		case i+1 < len(s) && (s[i+1] == '\'' || s[i+1] == '"'):
			q := s[i+1]
			k := strings.IndexByte(s[i+2:], q)
			if k < 0 || i+2+k+1 >= len(s) || s[i+2+k+1] != ']' {
				return nil, bad("unclosed quoted name at byte " + strconv.Itoa(i))
			}
			st.key, end = s[i+2:i+2+k], i+2+k+2
		default:
			k := strings.IndexByte(s[i:], ']')
			if k < 0 {
				return nil, bad("unclosed [ at byte " + strconv.Itoa(i))
			}
			n, err := strconv.Atoi(s[i+1 : i+k])
			if err != nil || n < 0 || n > 1<<20 || s[i+1] == '+' {
				return nil, bad("[" + truncate(s[i+1:i+k], 16) + "] is not *, a quoted name or an index")
			}
			st.index, end = n, i+k+1
		}
		i = end
		p = append(p, st)
	}
	return p, nil
}

// ParseMaskPaths checks a list of paths and returns them as MaskPaths
// (in the order given, duplicates dropped).
func ParseMaskPaths(paths []string) (MaskPaths, error) {
	if len(paths) > MaxMaskPaths {
		return "", errorf(ErrInvalid, "maskPaths holds %d paths, at most %d", len(paths), MaxMaskPaths)
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range paths {
		if _, err := ParseMaskPath(s); err != nil {
			return "", err
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return MaskPaths(strings.Join(out, "\n")), nil
}

// Mask is a compiled set of paths, applied to payloads. The zero Mask
// masks nothing.
type Mask struct {
	paths   []maskPath
	sources []string // the paths as given
}

// source is path i as given.
func (m Mask) source(i int) string {
	if i < len(m.sources) {
		return m.sources[i]
	}
	return "$"
}

// NewMask compiles m; a path that no longer parses (it was checked when
// set) masks the whole payload, the safe side.
func NewMask(m MaskPaths) Mask {
	var out Mask
	for _, s := range m.List() {
		p, err := ParseMaskPath(s)
		if err != nil {
			p = maskPath{}
		}
		out.paths = append(out.paths, p)
		out.sources = append(out.sources, s)
	}
	return out
}

// Empty reports whether the mask masks nothing.
func (m Mask) Empty() bool { return len(m.paths) == 0 }

// maskState is a path and how many of its steps are matched.
type maskState struct{ path, step uint16 }

// Apply returns payload with the value at every path replaced by
// MaskedValue (a JSON string), every other byte as it was; masked tells
// whether anything was. A payload that is not JSON is masked whole (its
// fields cannot be told apart, so none of it is shown). payload itself is
// never changed.
//
// The walk checks the payload's syntax as it goes, as json.Valid does,
// so that a payload is read once (every payload shown is masked): a
// payload nested deeper than maxMaskDepth is left to json.Valid first.
func (m Mask) Apply(payload []byte) (out []byte, masked bool) {
	if m.Empty() {
		return payload, false
	}
	w := maskWalks.Get().(*maskWalk)
	defer func() {
		if cap(w.states) <= maxPooledMaskStates {
			*w = maskWalk{states: w.states[:0]} // keeps no payload
			maskWalks.Put(w)
		}
	}()
	*w = maskWalk{Scanner: jsonscan.Scanner{B: payload}, paths: m.paths, states: w.states[:0], limit: maxMaskDepth}
	ok := w.run()
	if !ok && w.deep && json.Valid(payload) {
		*w = maskWalk{Scanner: jsonscan.Scanner{B: payload}, paths: m.paths, states: w.states[:0], limit: math.MaxInt}
		ok = w.run()
	}
	switch {
	case !ok:
		return append([]byte(nil), maskedJSON...), true
	case w.out == nil:
		return payload, false
	}
	return w.out, true
}

// maskWalks keeps Apply's walks, with the room of their states: most
// walks then allocate nothing but what they return.
var maskWalks = sync.Pool{New: func() any { return &maskWalk{states: make([]maskState, 0, 32)} }}

// maxPooledMaskStates is the most states a walk kept for the next holds
// room for (a deep payload's are let go).
const maxPooledMaskStates = 1024

// maxMaskDepth is how deep in containers the walk checks a payload's
// syntax itself (json.Valid's bound, encoding/json's own, is deeper).
const maxMaskDepth = 1000

// run walks src from its root, leaving in out its copy rewritten (nil
// when nothing was); false when src is not one JSON value, or when it
// is nested past limit (deep: not decided).
func (w *maskWalk) run() bool {
	done := false // a path is $: the whole payload
	for i, p := range w.paths {
		w.states = append(w.states, maskState{path: uint16(i)})
		done = done || len(p) == 0
	}
	if !w.value(0, len(w.states), 0, done) || !w.End() {
		return false
	}
	if w.out != nil {
		w.out = append(w.out, w.B[w.last:]...)
	}
	return true
}

// Restore returns edited (an edit of a payload shown masked) with every
// value at a masked path that still reads MaskedValue replaced by the
// value at the same place in original, byte for byte: a ••• left as it
// was keeps the real value; anything typed over it is kept as typed, and
// a ••• where original has nothing stays a string. kept counts the
// values restored. An edit that is not JSON is returned as it is (the
// edit is refused as not JSON anyway).
func (m Mask) Restore(edited, original []byte) (out []byte, kept int) {
	if m.Empty() || !json.Valid(edited) {
		return edited, 0
	}
	r := &maskRestore{original: original}
	w := maskWalk{Scanner: jsonscan.Scanner{B: edited}, paths: m.paths, limit: math.MaxInt, restore: r}
	if !w.run() || w.out == nil { // !run: edited is JSON, cannot be
		return edited, 0
	}
	return w.out, r.kept
}

// maskRestore is what a Restore's walk needs: the original payload,
// whether it is JSON (0: not known yet, it is checked once), and how
// many values were restored.
type maskRestore struct {
	original []byte
	valid    int8 // 1 JSON, -1 not
	kept     int
}

// restored returns what the masked value raw becomes in a Restore: the
// value at the same place (trail) in the original when raw still reads
// MaskedValue; false when it stays as it is.
func (w *maskWalk) restored(raw []byte) ([]byte, bool) {
	if !bytes.Equal(raw, maskedJSON) && (raw[0] != '"' || decodeKey(raw) != MaskedValue) {
		return nil, false
	}
	r := w.restore
	if len(w.trail) > 0 && r.valid == 0 {
		r.valid = -1
		if json.Valid(r.original) {
			r.valid = 1
		}
	}
	if len(w.trail) > 0 && r.valid < 0 {
		return nil, false
	}
	real, ok := rawAt(r.original, w.trail)
	if ok {
		r.kept++
	}
	return real, ok
}

// maskSeg is one step of a concrete place in a JSON text: a key, or an
// array index (key unused).
type maskSeg struct {
	key   string
	index int // -1: a key
}

// rawAt returns the bytes of the value of src at trail (src whole for
// none: it need not be JSON then, else it must be).
func rawAt(src []byte, trail []maskSeg) ([]byte, bool) {
	if len(trail) == 0 {
		return src, true
	}
	w := maskWalk{Scanner: jsonscan.Scanner{B: src}, limit: math.MaxInt}
	for _, sg := range trail {
		w.Space()
		open, close := byte('{'), byte('}')
		if sg.index >= 0 {
			open, close = '[', ']'
		}
		if w.B[w.I] != open {
			return nil, false
		}
		w.I++
		for n := 0; ; n++ {
			w.Space()
			if w.B[w.I] == close {
				return nil, false
			}
			if w.B[w.I] == ',' {
				w.I++
				w.Space()
			}
			if sg.index < 0 {
				ks := w.I
				w.SkipString()
				key := decodeKey(w.B[ks:w.I])
				w.Space()
				w.I++ // ':'
				w.Space()
				if key == sg.key {
					break
				}
			} else if n == sg.index {
				break
			}
			w.skip(0)
		}
	}
	w.Space()
	start := w.I
	w.skip(0)
	return src[start:w.I], true
}

// maskWalk walks a JSON text, checking its syntax, copying it to out
// from last on as it meets values to mask. states holds the states of
// every level being walked, each level a range of it.
type maskWalk struct {
	// The payload being walked, from I (Escaped: the last string
	// skipped had an escape).
	jsonscan.Scanner
	out    []byte
	last   int
	paths  []maskPath
	states []maskState
	// limit is the depth past which the walk gives up (deep).
	limit int
	deep  bool
	// restore, in a Restore, decides what a masked value becomes
	// (restored), with trail the place of the value being walked.
	restore *maskRestore
	trail   []maskSeg
}

// enter moves past the bracket of a container at depth; false past the
// walk's limit.
func (w *maskWalk) enter(depth int) bool {
	if depth >= w.limit {
		w.deep = true
		return false
	}
	w.I++
	return true
}

// value walks the value at i, at depth (the containers it lies in), with
// the states states[lo:hi] (done: one of them is at its path's end, the
// value is masked); false where src is not JSON.
func (w *maskWalk) value(lo, hi, depth int, done bool) bool {
	w.Space()
	if done {
		return w.mask(depth)
	}
	if lo == hi || w.I == len(w.B) {
		return w.skip(depth)
	}
	switch w.B[w.I] {
	case '{':
		if !w.enter(depth) {
			return false
		}
		if w.Next('}') {
			return true
		}
		for {
			w.Space()
			ks := w.I
			w.Escaped = false
			if !w.SkipString() {
				return false
			}
			key := w.B[ks+1 : w.I-1]
			if w.Escaped {
				key = []byte(decodeKey(w.B[ks:w.I]))
			}
			if !w.Next(':') {
				return false
			}
			n, done := w.children(lo, hi, key, -1)
			if w.restore != nil {
				w.trail = append(w.trail, maskSeg{key: string(key), index: -1})
			}
			ok := w.value(hi, n, depth+1, done)
			if w.restore != nil {
				w.trail = w.trail[:len(w.trail)-1]
			}
			w.states = w.states[:hi]
			if !ok {
				return false
			}
			if !w.Next(',') {
				return w.Next('}')
			}
		}
	case '[':
		if !w.enter(depth) {
			return false
		}
		if w.Next(']') {
			return true
		}
		for idx := 0; ; idx++ {
			n, done := w.children(lo, hi, nil, idx)
			if w.restore != nil {
				w.trail = append(w.trail, maskSeg{index: idx})
			}
			ok := w.value(hi, n, depth+1, done)
			if w.restore != nil {
				w.trail = w.trail[:len(w.trail)-1]
			}
			w.states = w.states[:hi]
			if !ok {
				return false
			}
			if !w.Next(',') {
				return w.Next(']')
			}
		}
	}
	return w.skip(depth)
}

// mask moves past the value at i (at depth) and copies what comes before
// it to out, then MaskedValue (in a Restore, what restored says; it
// stays when that says false).
func (w *maskWalk) mask(depth int) bool {
	start := w.I
	if !w.skip(depth) {
		return false
	}
	with := maskedJSON
	if w.restore != nil {
		var ok bool
		if with, ok = w.restored(w.B[start:w.I]); !ok {
			return true
		}
	}
	if w.out == nil {
		// Room for a few values masked that were shorter than •••.
		w.out = make([]byte, 0, len(w.B)+len(w.B)/8+2*len(maskedJSON))
	}
	w.out = append(w.out, w.B[w.last:start]...)
	w.out = append(w.out, with...)
	w.last = w.I
	return true
}

// children appends to states (at hi, its end) the states of a child of
// the value whose states are states[lo:hi]: the member key (index < 0)
// or the element index; it returns the new end, and whether one of them
// is at its path's end (done).
func (w *maskWalk) children(lo, hi int, key []byte, index int) (end int, done bool) {
	// Each state makes at most two: room for them first, so that the
	// loop calls nothing.
	states := slices.Grow(w.states[:hi], 2*(hi-lo))
	all, n := states[:cap(states)], hi
	for k := lo; k < hi; k++ {
		s := all[k]
		p := w.paths[s.path]
		if int(s.step) >= len(p) {
			continue
		}
		st := &p[s.step]
		if st.desc {
			n = addState(all, hi, n, s) // still looked for deeper
		}
		if (index < 0 && (st.any || (st.index < 0 && string(key) == st.key))) || (index >= 0 && st.matchIndex(index)) {
			n = addState(all, hi, n, maskState{path: s.path, step: s.step + 1})
			done = done || int(s.step)+1 == len(p)
		}
	}
	w.states = all[:n]
	return n, done
}

// addState puts s at all[n] unless all[from:n] (a level's states so far)
// has it already, and returns the level's new end. Without it a path
// with several descents (`$..a..a..b`) over a payload nested deep in
// its keys doubled its states a level: a few KB of payload held a page
// for minutes. A level's states are then at most its paths' steps.
func addState(all []maskState, from, n int, s maskState) int {
	for _, x := range all[from:n] {
		if x == s {
			return n
		}
	}
	all[n] = s
	return n + 1
}

// decodeKey returns a JSON string's text (raw with its quotes).
func decodeKey(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	// A copy: what Unmarshal is given escapes, and raw is the walk's (whose
	// states would then escape too); keys with escapes are rare.
	_ = json.Unmarshal(bytes.Clone(raw), &s) // valid JSON: cannot fail
	return s
}

// skip moves i past the value that starts at it (after white space), at
// depth, checking its syntax; false where it is not JSON.
func (w *maskWalk) skip(depth int) bool {
	w.Space()
	if w.I == len(w.B) {
		return false
	}
	switch c := w.B[w.I]; {
	case c == '"':
		return w.SkipString()
	case c == '{':
		if !w.enter(depth) {
			return false
		}
		if w.Next('}') {
			return true
		}
		for {
			w.Space()
			if !w.SkipString() || !w.Next(':') || !w.skip(depth+1) {
				return false
			}
			if !w.Next(',') {
				return w.Next('}')
			}
		}
	case c == '[':
		if !w.enter(depth) {
			return false
		}
		if w.Next(']') {
			return true
		}
		for {
			if !w.skip(depth + 1) {
				return false
			}
			if !w.Next(',') {
				return w.Next(']')
			}
		}
	case c == 't':
		return w.Literal("true")
	case c == 'f':
		return w.Literal("false")
	case c == 'n':
		return w.Literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return w.Number()
	}
	return false
}

// QueueMask is one queue's masking: its paths, compiled, and the role
// that may reveal them.
type QueueMask struct {
	Mask
	Paths      []string
	RevealRole Role
}

// Masks are the masks of the queues that mask something, by queue name.
// A request reads them once (Broker.Masks) and applies them to every
// payload it shows.
type Masks map[string]QueueMask

// Masks reads the masks of every queue that has maskPaths.
func (b *Broker) Masks(ctx context.Context) (Masks, error) {
	out := Masks{}
	err := b.store.View(ctx, func(tx Tx) error {
		qs, err := tx.Queues(ctx)
		if err != nil {
			return err
		}
		for _, q := range qs {
			if q.Options.MaskPaths == "" {
				continue
			}
			out[q.Name] = QueueMask{Mask: NewMask(q.Options.MaskPaths), Paths: q.Options.MaskPaths.List(), RevealRole: q.Options.RevealRole()}
		}
		return nil
	})
	return out, err
}

// Payload returns a payload of queue as it is shown: masked (Apply).
func (m Masks) Payload(queue string, payload []byte) []byte {
	qm, ok := m[queue]
	if !ok {
		return payload
	}
	out, _ := qm.Apply(payload)
	return out
}

// MaskedFor reports whether queue's masked fields stay masked to role:
// it may neither reveal them nor search or filter on them.
func (m Masks) MaskedFor(queue string, role Role) bool {
	qm, ok := m[queue]
	return ok && !role.Allows(qm.RevealRole)
}

// CheckQuery refuses (ErrInvalid, naming the queue and the masked
// paths) a search or field filter that could probe a field masked to
// role: free text (q) on a queue that masks anything, for its words may
// be a masked value's; a field filter on a masked field, on a field
// below one or on one that holds one (its value compared as text would
// tell). Without a queue, every queue that masks to role counts.
func (m Masks) CheckQuery(q DLQQuery, role Role) error {
	if q.Text == "" && len(q.Fields) == 0 {
		return nil
	}
	names := make([]string, 0, len(m))
	for name := range m {
		if (q.Queue == "" || name == q.Queue) && m.MaskedFor(name, role) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		qm := m[name]
		if q.Text != "" {
			return errorf(ErrInvalid, "payload text search (q) is refused: queue %s masks payload fields (%s) to %ss; search the error text (error=) or a field that is not masked",
				name, strings.Join(qm.Paths, ", "), role)
		}
		for _, s := range q.Fields {
			f, err := ParseFieldFilter(s)
			if err != nil {
				continue // the search names it
			}
			if p, ok := qm.touches(f.Path); ok {
				return errorf(ErrInvalid, "field filter %q is refused: field masked in queue %s (%s) to %ss", truncate(f.Source, 64), name, p, role)
			}
		}
	}
	return nil
}

// touches reports whether a field filter's path (jsonPath's form:
// $."a"[0]."b") is masked, lies in a masked value, or holds one; and the
// mask path that says so.
func (m Mask) touches(fieldPath string) (string, bool) {
	type seg struct {
		key   string
		index int
	}
	var segs []seg
	for s := strings.TrimPrefix(fieldPath, "$"); s != ""; {
		if s[0] == '[' {
			j := strings.IndexByte(s, ']')
			n, _ := strconv.Atoi(s[1:j])
			segs = append(segs, seg{index: n})
			s = s[j+1:]
			continue
		}
		// ."name": names hold no quote (jsonPath).
		j := strings.IndexByte(s[2:], '"')
		segs = append(segs, seg{key: s[2 : 2+j], index: -1})
		s = s[2+j+1:]
	}
	for pi, p := range m.paths {
		if len(p) == 0 {
			return m.source(pi), true // the whole payload is masked
		}
		states := []int{0}
		for _, sg := range segs {
			var next []int
			for _, st := range states {
				step := p[st]
				if step.desc {
					next = append(next, st)
				}
				if (sg.index < 0 && step.matchKey(sg.key)) || (sg.index >= 0 && step.matchIndex(sg.index)) {
					next = append(next, st+1)
				}
			}
			states = next
			for _, st := range states {
				if st == len(p) {
					return m.source(pi), true // the field lies in a masked value
				}
			}
			if len(states) == 0 {
				break
			}
		}
		if len(states) > 0 {
			return m.source(pi), true // the field is masked, or holds one
		}
	}
	return "", false
}

// AuditReveal is the audit action of a reveal: who saw the masked fields
// of which dead letter (its queue, group and message id, and the paths in
// the detail).
const AuditReveal = "reveal"

// RecordReveal audits a reveal of the masked fields paths of the dead
// letter of message id in queue's group, by actor.
func (b *Broker) RecordReveal(ctx context.Context, actor, queue, group, id string, paths []string) error {
	return b.update(ctx, func(tx Tx, _ func(string)) error {
		return audit(ctx, tx, b.now(), actor, AuditReveal, queue, group, 1,
			fmt.Sprintf("revealed the masked fields %s of dead letter %s", strings.Join(paths, ", "), truncate(id, 64)))
	})
}
