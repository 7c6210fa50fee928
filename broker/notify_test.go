package broker

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestMatchPattern(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "orders", true},
		{"orders", "orders", true},
		{"orders", "orders-eu", false},
		{"orders*", "orders", true},
		{"orders*", "orders-eu", true},
		{"orders*", "my-orders", false},
		{"*-eu", "orders-eu", true},
		{"*-eu", "orders-eu-2", false},
		{"o*s*u", "orders-eu", true},
		{"o*s*u", "orders-us", false},
		{"a*a", "a", false}, // the two a's cannot be one
		{"a*a", "aa", true},
		{"**", "", true},
	} {
		if got := matchPattern(c.pattern, c.s); got != c.want {
			t.Errorf("matchPattern(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

func TestCutRunesKeepsCharacters(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("日", NotifySampleChars+5)
	got := cutRunes(s, NotifySampleChars)
	if utf8.RuneCountInString(got) != NotifySampleChars || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("cut to %d characters: %q", utf8.RuneCountInString(got), got)
	}
	if short := "short é"; cutRunes(short, NotifySampleChars) != short {
		t.Error("a short text was cut")
	}
}

func TestNotifyBackoffDoublesToItsCap(t *testing.T) {
	t.Parallel()
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second}
	for i, w := range want {
		if got := notifyBackoff(i + 1); got != w {
			t.Errorf("after %d failures: %v, want %v", i+1, got, w)
		}
	}
	if got := notifyBackoff(1000); got != NotifyMaxRetry {
		t.Errorf("after many: %v, want %v", got, NotifyMaxRetry)
	}
}

func TestScrubErrorNeverSpellsOutAShortSecretOrAnEchoedLogin(t *testing.T) {
	t.Parallel()
	short := Channel{Kind: ChannelEmail, SMTPUser: "ops", Secret: "e"}
	got := scrubError("535 authentication failed: send again", short)
	if strings.Contains(got, "[secret]") || strings.Contains(got, "send") || !strings.Contains(got, "withheld") {
		t.Errorf("a short secret: %q", got)
	}
	if got := scrubError("connection refused", Channel{Secret: "xyz"}); got != "connection refused" {
		t.Errorf("a short secret not in the text: %q", got)
	}
	long := Channel{Kind: ChannelEmail, SMTPUser: "ops", Secret: "correct-horse"}
	plain := base64.StdEncoding.EncodeToString([]byte("\x00ops\x00correct-horse"))
	alone := base64.StdEncoding.EncodeToString([]byte("correct-horse"))
	got = scrubError("535 bad AUTH PLAIN "+plain+" / "+alone, long)
	if strings.Contains(got, plain) || strings.Contains(got, alone) || strings.Count(got, "[secret]") != 2 {
		t.Errorf("base64 forms: %q", got)
	}
}

func TestScrubErrorTakesOutSecretsAndURLs(t *testing.T) {
	t.Parallel()
	c := Channel{URL: "https://user:pw@hooks.slack.com/services/T0/B0/tok3n?key=q1", Secret: "whsec_abc"}
	err := `Post "https://user:pw@hooks.slack.com/services/T0/B0/tok3n?key=q1": signing with whsec_abc; path /services/T0/B0/tok3n, key=q1, user:pw`
	got := scrubError(err+strings.Repeat("x", 1000), c)
	for _, secret := range []string{"whsec_abc", "tok3n", "key=q1", "user:pw"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q left in %q", secret, got)
		}
	}
	if !strings.HasPrefix(got, `Post "https://hooks.slack.com"`) || len(got) > maxNotifyError+len("…") {
		t.Errorf("scrubbed: %q (%d bytes)", got[:80], len(got))
	}
}
