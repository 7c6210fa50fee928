package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
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
func (m Mask) Apply(payload []byte) (out []byte, masked bool) {
	if m.Empty() {
		return payload, false
	}
	if !json.Valid(payload) {
		return append([]byte(nil), maskedJSON...), true
	}
	w := maskWalk{src: payload, paths: m.paths}
	return w.run()
}

// run walks src from its root and returns it rewritten, and whether
// anything was.
func (w *maskWalk) run() ([]byte, bool) {
	w.states = w.buf[:0]
	for i := range w.paths {
		w.states = append(w.states, maskState{path: uint16(i)})
	}
	w.value(0, len(w.paths))
	if w.out == nil {
		return w.src, false
	}
	w.out = append(w.out, w.src[w.last:]...)
	return w.out, true
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
	w := maskWalk{src: edited, paths: m.paths, track: true}
	w.replace = func(raw []byte) ([]byte, bool) {
		var s string
		if json.Unmarshal(raw, &s) != nil || s != MaskedValue {
			return nil, false
		}
		real, ok := rawAt(original, w.trail)
		if ok {
			kept++
		}
		return real, ok
	}
	out, _ = w.run()
	return out, kept
}

// maskSeg is one step of a concrete place in a JSON text: a key, or an
// array index (key unused).
type maskSeg struct {
	key   string
	index int // -1: a key
}

// rawAt returns the bytes of the value of src at trail (src whole for
// none: it need not be JSON then).
func rawAt(src []byte, trail []maskSeg) ([]byte, bool) {
	if len(trail) == 0 {
		return src, true
	}
	if !json.Valid(src) {
		return nil, false
	}
	w := maskWalk{src: src}
	for _, sg := range trail {
		w.ws()
		open, close := byte('{'), byte('}')
		if sg.index >= 0 {
			open, close = '[', ']'
		}
		if w.src[w.i] != open {
			return nil, false
		}
		w.i++
		for n := 0; ; n++ {
			w.ws()
			if w.src[w.i] == close {
				return nil, false
			}
			if w.src[w.i] == ',' {
				w.i++
				w.ws()
			}
			if sg.index < 0 {
				ks := w.i
				w.skipString()
				key := decodeKey(w.src[ks:w.i])
				w.ws()
				w.i++ // ':'
				w.ws()
				if key == sg.key {
					break
				}
			} else if n == sg.index {
				break
			}
			w.skip()
		}
	}
	w.ws()
	start := w.i
	w.skip()
	return src[start:w.i], true
}

// maskWalk walks a valid JSON text, copying it to out from last on as it
// meets values to mask. states holds the states of every level being
// walked, each level a range of it.
type maskWalk struct {
	src    []byte
	i      int
	out    []byte
	last   int
	paths  []maskPath
	states []maskState
	// track keeps trail, the place of the value being walked; replace,
	// when set, decides what a masked value becomes (false: it stays).
	track   bool
	trail   []maskSeg
	replace func(raw []byte) ([]byte, bool)
	buf     [32]maskState // states' first room, so that most walks allocate none
}

func (w *maskWalk) ws() {
	for w.i < len(w.src) {
		switch w.src[w.i] {
		case ' ', '\t', '\r', '\n':
			w.i++
		default:
			return
		}
	}
}

// value walks the value at i, with the states states[lo:hi].
func (w *maskWalk) value(lo, hi int) {
	w.ws()
	for _, s := range w.states[lo:hi] {
		if int(s.step) == len(w.paths[s.path]) {
			start := w.i
			w.skip()
			with := maskedJSON
			if w.replace != nil {
				var ok bool
				if with, ok = w.replace(w.src[start:w.i]); !ok {
					return
				}
			}
			if w.out == nil {
				w.out = make([]byte, 0, len(w.src))
			}
			w.out = append(w.out, w.src[w.last:start]...)
			w.out = append(w.out, with...)
			w.last = w.i
			return
		}
	}
	if lo == hi {
		w.skip()
		return
	}
	switch w.src[w.i] {
	case '{':
		w.i++
		for {
			w.ws()
			if w.src[w.i] == '}' {
				w.i++
				return
			}
			if w.src[w.i] == ',' {
				w.i++
				w.ws()
			}
			ks := w.i
			w.skipString()
			key := w.src[ks+1 : w.i-1]
			if bytes.IndexByte(key, '\\') >= 0 {
				key = []byte(decodeKey(w.src[ks:w.i]))
			}
			w.ws()
			w.i++ // ':'
			n := w.children(lo, hi, key, -1)
			if w.track {
				w.trail = append(w.trail, maskSeg{key: string(key), index: -1})
			}
			w.value(hi, n)
			if w.track {
				w.trail = w.trail[:len(w.trail)-1]
			}
			w.states = w.states[:hi]
		}
	case '[':
		w.i++
		for idx := 0; ; idx++ {
			w.ws()
			if w.src[w.i] == ']' {
				w.i++
				return
			}
			if w.src[w.i] == ',' {
				w.i++
			}
			n := w.children(lo, hi, nil, idx)
			if w.track {
				w.trail = append(w.trail, maskSeg{index: idx})
			}
			w.value(hi, n)
			if w.track {
				w.trail = w.trail[:len(w.trail)-1]
			}
			w.states = w.states[:hi]
		}
	default:
		w.skip()
	}
}

// children appends to states (at hi, its end) the states of a child of
// the value whose states are states[lo:hi]: the member key (index < 0)
// or the element index; it returns the new end.
func (w *maskWalk) children(lo, hi int, key []byte, index int) int {
	w.states = w.states[:hi]
	for k := lo; k < hi; k++ {
		s := w.states[k]
		p := w.paths[s.path]
		if int(s.step) >= len(p) {
			continue
		}
		st := p[s.step]
		if st.desc {
			w.states = append(w.states, s) // still looked for deeper
		}
		if (index < 0 && (st.any || (st.index < 0 && string(key) == st.key))) || (index >= 0 && st.matchIndex(index)) {
			w.states = append(w.states, maskState{path: s.path, step: s.step + 1})
		}
	}
	return len(w.states)
}

// decodeKey returns a JSON string's text (raw with its quotes).
func decodeKey(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // valid JSON: cannot fail
	return s
}

// skipString moves i past the string that starts at it.
func (w *maskWalk) skipString() {
	w.i++
	for w.i < len(w.src) {
		switch w.src[w.i] {
		case '\\':
			w.i += 2
		case '"':
			w.i++
			return
		default:
			w.i++
		}
	}
}

// skip moves i past the value that starts at it.
func (w *maskWalk) skip() {
	switch w.src[w.i] {
	case '"':
		w.skipString()
	case '{', '[':
		depth := 0
		for w.i < len(w.src) {
			switch w.src[w.i] {
			case '"':
				w.skipString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					w.i++
					return
				}
			}
			w.i++
		}
	default:
		for w.i < len(w.src) {
			switch w.src[w.i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return
			}
			w.i++
		}
	}
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
