package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/internal/jsonscan"
)

func TestMaskApply(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, payload string
		paths         []string
		want          string
	}{
		{"key", `{"card":{"number":"4111","cvc":123},"id":7}`, []string{"$.card.number"}, `{"card":{"number":"•••","cvc":123},"id":7}`},
		{"object whole", `{"card": {"number":"4111"} , "id":7}`, []string{"$.card"}, `{"card": "•••" , "id":7}`},
		{"any depth", `{"email":"a@x","u":[{"email":"b@x"},{"n":{"email":null}}]}`, []string{"$..email"}, `{"email":"•••","u":[{"email":"•••"},{"n":{"email":"•••"}}]}`},
		{"array any", `{"items":[{"card":1},{"card":[2,3]},{"x":4}]}`, []string{"$.items[*].card"}, `{"items":[{"card":"•••"},{"card":"•••"},{"x":4}]}`},
		{"array index", `[1, 2 ,3]`, []string{"$[1]"}, `[1, "•••" ,3]`},
		{"quoted name", `{"a.b":1,"c":2}`, []string{`$['a.b']`}, `{"a.b":"•••","c":2}`},
		{"escaped key", `{"ca\u0072d":"4111"}`, []string{"$.card"}, `{"ca\u0072d":"•••"}`},
		{"duplicate keys", `{"k":1,"k":2}`, []string{"$.k"}, `{"k":"•••","k":"•••"}`},
		{"whole", `{"a":1}`, []string{"$"}, `"•••"`},
		{"absent", `{"a":"]\"}"}`, []string{"$.b"}, `{"a":"]\"}"}`},
		{"not json", `card=4111`, []string{"$.card"}, `"•••"`},
		{"scalar root", `"4111"`, []string{"$.card"}, `"4111"`},
		{"desc wildcard", `{"a":{"b":1}}`, []string{"$..*"}, `{"a":"•••"}`},
		{"every kind of value", "\t{ \"n\":[0,-0.5e+10,1E2,-7e-3,true,false,null,{},[],\"\\u00e9\\n\\\"\"] ,\"card\" :\r\n{\"x\":[0]}}\n", []string{"$.card", "$.n[9]"}, "\t{ \"n\":[0,-0.5e+10,1E2,-7e-3,true,false,null,{},[],\"•••\"] ,\"card\" :\r\n\"•••\"}\n"},
		{"every kind of value skipped", `[0,-0.5e+10,1E2,-7e-3,true,false,null,{},[],"\u00e9\n\"",{"card":[{"a":0}]}]`, []string{"$[10].card"}, `[0,-0.5e+10,1E2,-7e-3,true,false,null,{},[],"\u00e9\n\"",{"card":"•••"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mp, err := ParseMaskPaths(tc.paths)
			if err != nil {
				t.Fatal(err)
			}
			in := []byte(tc.payload)
			got, masked := NewMask(mp).Apply(in)
			if string(got) != tc.want {
				t.Errorf("Apply(%s) = %s, want %s", tc.payload, got, tc.want)
			}
			if masked != (tc.want != tc.payload) {
				t.Errorf("masked = %v", masked)
			}
			if string(in) != tc.payload {
				t.Errorf("the payload was changed: %s", in)
			}
		})
	}
}

// TestMaskApplyMasksWholeWhatIsNotJSON: the walk checks the syntax as it
// goes (no json.Valid first), so a payload that is not JSON is masked
// whole wherever its fault lies: in a part walked step by step, in a
// value masked, in one skipped, or after the value.
func TestMaskApplyMasksWholeWhatIsNotJSON(t *testing.T) {
	t.Parallel()
	payloads := []string{
		"", " ", "{", `{"card":`, `{"card":{"number":"4111"}`, `{"card":{"number":"4111"}} x`, `{"a":1}{"b":2}`,
		`{"card":1,}`, `[1,]`, `[1]]`, `{"a" 1}`, `{a:1}`, `{"a":1,"b"}`, `{,"a":1}`, `[,1]`,
		`{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":1e}`, `{"a":1e+}`, `{"a":+1}`, `{"a":.5}`, `{"a":0x1}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":falsey}`, `{"a":True}`,
		`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, `{"a":"\u123g"}`, "{\"a\":\"\x01\"}", "{\"a\":\"tab\there\"}", `{"a":"open}`, `{"a\":1}`,
		`{"card":{"number":[1 2]}}`, `{"card":{"number":{"x":}}}`, `{"x":[1,{"y":}]}`, `{"x":[1,{"y":1]}`,
		`{"items":[{"sku":1},{"sku":2]}`, `{"items":[{"sku":1}}`, `{"x":[1}`, `[{"y":1]`, `{"items":[{"sku":1},{"sku" 2}]}`, `"a"b`, `1 2`, `nul`,
	}
	for _, paths := range [][]string{{"$.card.number"}, {"$..sku", "$.items[1]"}, {"$"}} {
		mp, err := ParseMaskPaths(paths)
		if err != nil {
			t.Fatal(err)
		}
		m := NewMask(mp)
		for _, p := range payloads {
			if json.Valid([]byte(p)) {
				t.Fatalf("%q is JSON", p)
			}
			if got, masked := m.Apply([]byte(p)); string(got) != `"•••"` || !masked {
				t.Errorf("Apply(%q) with %v = %s, %v: want it masked whole", p, paths, got, masked)
			}
		}
	}
}

// TestMaskApplyDeepPayloads: past maxMaskDepth json.Valid decides, and a
// payload it takes is masked as any other; one nested past encoding/json's
// own bound is not JSON to it, masked whole as before.
func TestMaskApplyDeepPayloads(t *testing.T) {
	t.Parallel()
	mp, _ := ParseMaskPaths([]string{"$..card"})
	m := NewMask(mp)
	nest := func(n int, inner string) string { return strings.Repeat(`[{"a":`, n) + inner + strings.Repeat("}]", n) }
	for _, tc := range []struct {
		name, payload, want string
	}{
		{"just past the walk's depth", nest(maxMaskDepth/2+1, `{"card":"4111","b":[1,2]}`), nest(maxMaskDepth/2+1, `{"card":"•••","b":[1,2]}`)},
		{"deep and not JSON", nest(maxMaskDepth, `{"card":"4111",}`), `"•••"`},
		{"not JSON, then deep", `{"card":1,}` + nest(maxMaskDepth, "1"), `"•••"`},
		{"past json.Valid's bound", nest(5001, `{"card":"4111"}`), `"•••"`},
	} {
		if got, _ := m.Apply([]byte(tc.payload)); string(got) != tc.want {
			t.Errorf("%s: Apply = %.80s…, want %.80s…", tc.name, got, tc.want)
		}
	}
}

func TestParseMaskPathRefusesBadPaths(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "card", "$.", "$..", "$.a b", "$[x]", "$[-1]", "$['a", "$[", "$.a[*", "$a", "$.a..", "$[+1]"} {
		if _, err := ParseMaskPath(s); err == nil {
			t.Errorf("ParseMaskPath(%q) = nil error", s)
		} else if !strings.Contains(err.Error(), "mask path") {
			t.Errorf("ParseMaskPath(%q) = %v: does not name the path", s, err)
		}
	}
	for _, s := range []string{"$", "$.card.number", "$..email", "$.items[*].card", "$[0]", `$["a b"]`, "$..[*]", "$.*", "$..['x']"} {
		if _, err := ParseMaskPath(s); err != nil {
			t.Errorf("ParseMaskPath(%q): %v", s, err)
		}
	}
}

// refMask is the mask applied on a decoded value, the reference Apply is
// checked against.
func refMask(v any, p maskPath) any {
	if len(p) == 0 {
		return MaskedValue
	}
	s := p[0]
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if s.matchKey(k) {
				c = refMask(c, p[1:])
			}
			if s.desc {
				c = refMask(c, p)
			}
			x[k] = c
		}
	case []any:
		for i, c := range x {
			if s.matchIndex(i) {
				c = refMask(c, p[1:])
			}
			if s.desc {
				c = refMask(c, p)
			}
			x[i] = c
		}
	}
	return v
}

func decodeAny(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// FuzzMaskApply checks Apply against refMask on any payload and path: the
// output is valid JSON and decodes as the payload with the values at the
// path replaced (so every other value is as it was).
func FuzzMaskApply(f *testing.F) {
	f.Add([]byte(`{"card":{"number":"4111"},"items":[{"card":1}]}`), "$..card")
	f.Add([]byte(`[{"a":[1,{"b":"x"}]}, 2]`), "$[*].a[1].b")
	f.Add([]byte(` { "e\u006dail" : "x" , "n" : [ ] } `), "$.email")
	f.Add([]byte(`{"a":{"a":{"a":1}}}`), "$..a.a")
	f.Fuzz(func(t *testing.T, payload []byte, path string) {
		p, err := ParseMaskPath(path)
		if err != nil {
			return
		}
		m := Mask{paths: []maskPath{p}}
		keep := append([]byte(nil), payload...)
		out, _ := m.Apply(payload)
		if !bytes.Equal(keep, payload) {
			t.Fatal("the payload was changed")
		}
		if !json.Valid(out) {
			t.Fatalf("Apply(%q, %q) = %q: not JSON", payload, path, out)
		}
		in, err := decodeAny(payload)
		if err != nil || !json.Valid(payload) {
			if string(out) != string(maskedJSON) {
				t.Fatalf("a payload that is not JSON gave %q", out)
			}
			return
		}
		got, err := decodeAny(out)
		if err != nil {
			t.Fatal(err)
		}
		if want := refMask(in, p); !reflect.DeepEqual(got, want) {
			t.Fatalf("Apply(%q, %q) = %q, want %v", payload, path, out, want)
		}
	})
}

// FuzzMaskShapes builds payloads of random shapes from the fuzzer's
// bytes, secret values under the keys card and email at any depth (with
// escaped keys and odd spacing), and checks that no secret byte is left
// with $..card and $..email masked, and the rest is unchanged.
func FuzzMaskShapes(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0, 0, 0, 255, 17, 33, 2, 9, 9, 9, 1})
	f.Fuzz(func(t *testing.T, seed []byte) {
		i := 0
		next := func() int {
			if i >= len(seed) {
				return 0
			}
			i++
			return int(seed[i-1])
		}
		var build func(depth int, secret bool) string
		n := 0
		build = func(depth int, secret bool) string {
			n++
			if secret {
				// What sits under a masked key: any shape, all secret.
				switch next() % 3 {
				case 0:
					return fmt.Sprintf(`"S3CR3T%d"`, n)
				case 1:
					return fmt.Sprintf(`{"x":"S3CR3T%d"}`, n)
				default:
					return fmt.Sprintf(`[ "S3CR3T%d" , 5 ]`, n)
				}
			}
			if depth > 5 {
				return fmt.Sprintf(`"plain%d"`, n)
			}
			sp := []string{"", " ", "\n\t"}[next()%3]
			switch next() % 4 {
			case 0:
				var parts []string
				for k := next() % 4; k > 0; k-- {
					key := []string{"card", "email", "name", `c\u0061rd`, "items"}[next()%5]
					parts = append(parts, sp+`"`+key+`"`+sp+":"+sp+build(depth+1, key != "name" && key != "items"))
				}
				return "{" + strings.Join(parts, ",") + sp + "}"
			case 1:
				var parts []string
				for k := next() % 4; k > 0; k-- {
					parts = append(parts, sp+build(depth+1, false))
				}
				return "[" + strings.Join(parts, ",") + sp + "]"
			case 2:
				return fmt.Sprintf(`"plain%d \"q\" \\"`, n)
			default:
				return fmt.Sprintf("%d.5e1", n)
			}
		}
		payload := []byte(build(0, false))
		mp, _ := ParseMaskPaths([]string{"$..card", "$..email"})
		out, _ := NewMask(mp).Apply(payload)
		if !json.Valid(out) {
			t.Fatalf("%s: not JSON: %s", payload, out)
		}
		if bytes.Contains(out, []byte("S3CR3T")) {
			t.Fatalf("a secret is left: %s", out)
		}
		in, err := decodeAny(payload)
		if err != nil {
			t.Fatalf("the test built no JSON: %s", payload)
		}
		for _, p := range NewMask(mp).paths {
			in = refMask(in, p)
		}
		if got, _ := decodeAny(out); !reflect.DeepEqual(got, in) {
			t.Fatalf("%s masked as %s", payload, out)
		}
	})
}

func TestMasksCheckQuery(t *testing.T) {
	t.Parallel()
	mp, _ := ParseMaskPaths([]string{"$.card.number", "$.items[*].sku"})
	all, _ := ParseMaskPaths([]string{"$..email"})
	m := Masks{"orders": {Mask: NewMask(mp), Paths: mp.List(), RevealRole: RoleAdmin},
		"users": {Mask: NewMask(all), Paths: all.List(), RevealRole: RoleOperator}}
	for _, tc := range []struct {
		name string
		q    DLQQuery
		role Role
		ok   bool
	}{
		{"text", DLQQuery{Queue: "orders", Text: "4111"}, RoleViewer, false},
		{"text admin", DLQQuery{Queue: "orders", Text: "4111"}, RoleAdmin, true},
		{"text operator may reveal users", DLQQuery{Queue: "users", Text: "x"}, RoleOperator, true},
		{"text every queue", DLQQuery{Text: "x"}, RoleOperator, false},
		{"masked field", DLQQuery{Queue: "orders", Fields: []string{"card.number = 4111"}}, RoleOperator, false},
		{"holds a masked field", DLQQuery{Queue: "orders", Fields: []string{"card contains 4111"}}, RoleViewer, false},
		{"element", DLQQuery{Queue: "orders", Fields: []string{"items[3].sku = x"}}, RoleViewer, false},
		{"other field", DLQQuery{Queue: "orders", Fields: []string{"card.brand = amex", "items[0].qty > 1"}}, RoleViewer, true},
		{"any depth", DLQQuery{Queue: "users", Fields: []string{"a.b.email = x"}}, RoleViewer, false},
		{"no filter", DLQQuery{Queue: "orders"}, RoleViewer, true},
	} {
		err := m.CheckQuery(tc.q, tc.role)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: %v does not say refused", tc.name, err)
		}
	}
}

func TestMaskRestoreKeepsRealValuesLeftMasked(t *testing.T) {
	t.Parallel()
	mp, _ := ParseMaskPaths([]string{"$.card.number", "$..email", "$.items[*].sku"})
	m := NewMask(mp)
	orig := `{"card":{"number":"4111 1111","cvc":1},"email":{"a":1},"items":[{"sku":"A"},{"sku":"B"}],"u":{"email":"x@y"}}`
	shown, _ := m.Apply([]byte(orig))
	// The editor changes cvc, types a new sku over the second •••, and
	// leaves the rest.
	edited := strings.Replace(strings.Replace(string(shown), `"cvc":1`, `"cvc":2`, 1), `{"sku":"•••"}]`, `{"sku":"C"}]`, 1)
	got, kept := m.Restore([]byte(edited), []byte(orig))
	want := `{"card":{"number":"4111 1111","cvc":2},"email":{"a":1},"items":[{"sku":"A"},{"sku":"C"}],"u":{"email":"x@y"}}`
	if string(got) != want || kept != 4 {
		t.Errorf("Restore = %s (%d kept), want %s", got, kept, want)
	}
	// A ••• where the original has nothing stays as typed.
	if got, kept := m.Restore([]byte(`{"card":{"number":"•••"},"new":{"email":"•••"}}`), []byte(`{"x":1}`)); string(got) != `{"card":{"number":"•••"},"new":{"email":"•••"}}` || kept != 0 {
		t.Errorf("Restore with nothing to keep = %s, %d", got, kept)
	}
	// A number typed over a •••, and a ••• written with escapes.
	got, kept = m.Restore([]byte(`{"card":{"number":5},"email":"\u2022\u2022\u2022"}`), []byte(orig))
	if want := `{"card":{"number":5},"email":{"a":1}}`; string(got) != want || kept != 1 {
		t.Errorf("Restore = %s (%d kept), want %s", got, kept, want)
	}
	whole := NewMask("$")
	if got, _ := whole.Restore([]byte(`"•••"`), []byte(`not json`)); string(got) != "not json" {
		t.Errorf("Restore of a whole mask = %s", got)
	}
}

// BenchmarkMaskApply is one payload of the bench's shape (bench/dlqdb.go)
// masked at three paths, one at any depth.
func BenchmarkMaskApply(b *testing.B) {
	payload := []byte(`{"orderId":"o-123456","customer":"c-01234","amount":12.34,"currency":"EUR","card":{"brand":"visa","last4":"4242"},"tags":["vip"],"items":[{"sku":"SKU-0042","qty":2}],"source":"checkout-web"}`)
	mp, _ := ParseMaskPaths([]string{"$.card.last4", "$..sku", "$.customer"})
	m := NewMask(mp)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m.Apply(payload)
	}
}

// TestMaskStatesStayFewOnDeepPayloads: a path with several descents over
// a payload nested deep in the keys it names keeps a few states a level
// (each (path, step) once), not one per way of reaching it.
func TestMaskStatesStayFewOnDeepPayloads(t *testing.T) {
	t.Parallel()
	mp, err := ParseMaskPaths([]string{"$..a..a..a..z", "$..a..b"})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMask(mp)
	const depth = 60
	payload := []byte(strings.Repeat(`{"a":`, depth) + `{"z":1,"b":2}` + strings.Repeat("}", depth))
	w := &maskWalk{Scanner: jsonscan.Scanner{B: payload}, paths: m.paths, limit: maxMaskDepth}
	if !w.run() {
		t.Fatal("the payload is JSON")
	}
	if got := string(w.out); got != strings.Repeat(`{"a":`, depth)+`{"z":"•••","b":"•••"}`+strings.Repeat("}", depth) {
		t.Fatalf("masked %s", got)
	}
	// 7 (path, step) pairs at most a level, depth+2 levels.
	if c := cap(w.states); c > 4*7*(depth+2) {
		t.Fatalf("the walk held room for %d states at depth %d", c, depth)
	}
}
