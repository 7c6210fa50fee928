package e2e

import (
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A payload and an error text that would run script if they were taken as
// HTML.
const (
	hostileQueue   = "webhooks"
	hostileTx      = "hook-77"
	hostilePayload = `{"html":"<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">","note":"</pre><b>bold?</b>"}`
	hostileError   = `template render failed near <img src=x onerror="window.__pwned=3"><script>window.__pwned=4</script> in </td></tr><b>body</b>`
)

// notPwned fails when any of the hostile texts ran as script or became
// elements of the page.
func (v *visit) notPwned(where string) {
	v.t.Helper()
	if got := v.eval(`() => typeof window.__pwned`); got != "undefined" {
		v.t.Errorf("%s: window.__pwned is set (%v): a payload or error ran as script", where, v.eval(`() => String(window.__pwned)`))
	}
	if n := v.eval(`() => document.querySelectorAll("#main script, #main img, [onerror], [data-testid=dl-error] *, [data-testid=dl-error-full] *, [data-testid=payload-pretty] *, [data-testid=payload-raw] *, [data-testid=error-group-filter] *, [data-testid=error-group-sample] *").length`); n != 0 {
		v.t.Errorf("%s: %v elements made from a payload or an error", where, n)
	}
}

// Payloads and errors are untrusted text: markup in them shows as text on
// the list and on the dead letter's page, and never runs.
func TestPayloadAndErrorShowAsText(t *testing.T) {
	t.Parallel()
	a := newApp(t)
	a.configure(hostileQueue, map[string]any{"retryLimit": 0})
	a.push(hostileQueue, msg{Tx: hostileTx, Payload: hostilePayload})
	a.consume(hostileQueue, "renderer", map[string]string{hostileTx: hostileError}, false)
	pw := a.user("sam", broker.RoleViewer)

	v := a.browse()
	v.login("sam", pw)

	v.open("/queues/" + hostileQueue + "/dead-letters")
	v.count(v.id("dl-row"), 1, "dead letters")
	v.contains(v.id("dl-error"), `<img src=x onerror="window.__pwned=3">`, "the row's error")
	v.contains(v.id("dl-error"), `<script>window.__pwned=4</script>`, "the row's error")
	v.contains(v.id("error-group-filter"), `<img src=x onerror=`, "the error group")
	v.notPwned("list")

	// Filtering by text with markup in it finds it, and the chip shows it
	// as text too.
	v.fill(v.id("filter-error"), `<img src=x onerror="window.__pwned=3">`, "error filter")
	v.click(v.id("filter-submit"), "Filter")
	v.count(v.id("dl-row"), 1, "rows matching the markup")
	v.contains(v.id("chip").First(), `<img src=x`, "the filter's chip")
	v.notPwned("filtered list")

	v.click(v.id("dl-link"), "the dead letter")
	v.see(v.id("dl-id"), "the dead letter's id")
	if got := v.text(v.id("dl-error-full"), "the full error"); got != hostileError {
		t.Errorf("full error:\n got %q\nwant %q", got, hostileError)
	}
	v.contains(v.id("payload-pretty"), `<script>window.__pwned=1</script>`, "the pretty payload")
	v.contains(v.id("payload-pretty"), `</pre><b>bold?</b>`, "the pretty payload")
	v.click(v.id("show-raw"), "Raw")
	if got := v.text(v.id("payload-raw"), "the raw payload"); got != hostilePayload {
		t.Errorf("raw payload:\n got %s\nwant %s", got, hostilePayload)
	}
	v.screenshot("deadletter-detail-markup")
	v.notPwned("dead letter page")
}
