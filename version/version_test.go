package version

import "testing"

func TestString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "devel"}, "lazarus devel"},
		{Info{Version: "v1.2.3", Commit: "0123456789abcdef0123", Time: "2026-12-01T10:00:00Z", Modified: true},
			"lazarus v1.2.3 (commit 0123456789ab, 2026-12-01T10:00:00Z, modified)"},
		{Info{Version: "v0.0.0-20261201100000-0123456789ab", Commit: "0123456789ab"}, "lazarus v0.0.0-20261201100000-0123456789ab (commit 0123456789ab)"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A version set at link time wins over what the toolchain stamped.
func TestLinkTimeVersionWins(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.9.9"
	if got := Get().Version; got != "v9.9.9" {
		t.Fatalf("version %q, want the link-time v9.9.9", got)
	}
	Version = ""
	if got := Get().Version; got == "" {
		t.Fatal("no version at all")
	}
}
