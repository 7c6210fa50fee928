package web

import (
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// An export's file is named after every part of its filter, with only
// safe characters, so that two exports of different error groups or
// searches do not share a name.
func TestExportFileNameHasTheWholeFilter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		q    broker.DLQQuery
		want string
	}{
		{broker.DLQQuery{Queue: "orders", Group: "billing", ErrorContains: "timeout"}, "lazarus-orders-billing-error-timeout-2026-12-01T0930Z.ndjson"},
		{broker.DLQQuery{Queue: "orders", Fingerprint: "upstream timeout after <n>s"}, "lazarus-orders-errorgroup-upstream-timeout-after-n-s-2026-12-01T0930Z.ndjson"},
		{broker.DLQQuery{Queue: "orders", Text: `"card declined"`}, "lazarus-orders-text-card-declined-2026-12-01T0930Z.ndjson"},
		{broker.DLQQuery{Queue: "orders", Fields: []string{"orderId = ord_123", "amount > 100"}}, "lazarus-orders-field-orderId-ord_123-field-amount-100-2026-12-01T0930Z.ndjson"},
		{broker.DLQQuery{Queue: "orders", Text: `"; rm -rf / ; ".."/etc`}, "lazarus-orders-text-rm-rf-..-etc-2026-12-01T0930Z.ndjson"},
	} {
		if got := exportFileName(tc.q, now, "ndjson"); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.q, got, tc.want)
		}
	}
}

// A CSV cell that a spreadsheet would run as a formula is defused with a
// leading ', the full-width forms and a leading line break included; other
// cells are kept as they are.
func TestCSVCellsThatWouldRunAreDefused(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"=1+1":           "'=1+1",
		"+cmd":           "'+cmd",
		"-5":             "'-5",
		"@SUM(A1)":       "'@SUM(A1)",
		"\tx":            "'\tx",
		"\rx":            "'\rx",
		"\n=1":           "'\n=1",
		"＝1+1":           "'＝1+1",
		"＋1":             "'＋1",
		"－1":             "'－1",
		"＠x":             "'＠x",
		"card declined":  "card declined",
		"":               "",
		`{"orderId":1}`:  `{"orderId":1}`,
		"1 = 1 is fine":  "1 = 1 is fine",
		"é=accent first": "é=accent first",
	} {
		if got := csvSafe(in); got != want {
			t.Errorf("csvSafe(%q) = %q, want %q", in, got, want)
		}
	}
}
