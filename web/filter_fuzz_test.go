package web

import (
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The dead-letter list's filter travels in URLs that people bookmark and
// share: whatever a URL holds, reading it never panics, a bad value is a
// 400 that says what is wrong, and a filter written back into a URL reads
// the same. (FuzzDeadLettersPage in fuzz_test.go sends the same queries
// through the page itself.)

// wantBadRequest fails unless err is nil or a 400 with a message.
func wantBadRequest(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusBadRequest || ae.message == "" {
		t.Fatalf("%s: error %v (%T), want a 400 with a message", what, err, err)
	}
}

func FuzzListFilter(f *testing.F) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, rawQuery string) {
		q, _ := url.ParseQuery(rawQuery)
		flt := parseListFilter(q)
		for _, v := range append([]string{flt.Group, flt.Partition, flt.Since, flt.From, flt.To, flt.Error, flt.TxID, flt.Text}, flt.Fields...) {
			if v != strings.TrimSpace(v) {
				t.Fatalf("value %q not trimmed", v)
			}
		}
		// Written back into a URL (the chips, the pages, the quick ranges),
		// the filter reads the same.
		if again := parseListFilter(flt.values()); !reflect.DeepEqual(again, flt) {
			t.Fatalf("round trip: %+v became %+v", flt, again)
		}
		_ = flt.describe()
		dq, err := flt.query("fuzzd", now)
		wantBadRequest(t, "query", err)
		if err != nil {
			return
		}
		if dq.Queue != "fuzzd" || dq.Group != flt.Group || dq.Partition != flt.Partition || dq.ErrorContains != flt.Error || dq.TransactionID != flt.TxID ||
			dq.Text != flt.Text || !reflect.DeepEqual(dq.Fields, flt.Fields) {
			t.Fatalf("filter %+v became query %+v", flt, dq)
		}
		if flt.Since != "" && flt.From == "" && !dq.From.Before(now) {
			t.Fatalf("since %s: from %v", flt.Since, dq.From)
		}
		for _, tm := range []time.Time{dq.From, dq.To} {
			if !tm.IsZero() && tm.Location() != time.UTC {
				t.Fatalf("time %v not in UTC", tm)
			}
		}
	})
}

func FuzzParseFormTime(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := parseFormTime("from", s)
		wantBadRequest(t, "parseFormTime", err)
		if err != nil {
			return
		}
		if tm.Location() != time.UTC {
			t.Fatalf("%q: %v not in UTC", s, tm)
		}
		// The instant written in full reads back the same.
		again, err := parseFormTime("from", tm.Format(time.RFC3339Nano))
		if err != nil || !again.Equal(tm) {
			t.Fatalf("%q: %v, written %s, read back %v (%v)", s, tm, tm.Format(time.RFC3339Nano), again, err)
		}
	})
}

func FuzzParseCursor(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		cur, err := parseCursor(s)
		wantBadRequest(t, "parseCursor", err)
		if err != nil {
			return
		}
		if s == "" {
			if cur != nil {
				t.Fatalf("empty: %+v", cur)
			}
			return
		}
		// The "next page" link of a page at cur leads back to cur.
		again, err := parseCursor(cursorParam(cur))
		if err != nil || again == nil || !again.At.Equal(cur.At) || again.ID != cur.ID {
			t.Fatalf("%q: %+v, written %q, read back %+v (%v)", s, cur, cursorParam(cur), again, err)
		}
	})
}
