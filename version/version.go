// Package version says which build of Lazarus this is: the version and
// the commit it was built from, as the Go toolchain stamps them into the
// binary (runtime/debug.ReadBuildInfo), or as a release build sets them
// with -ldflags "-X github.com/lazarus-dlq/lazarus/version.Version=v1.2.3".
package version

import (
	"runtime/debug"
	"strings"
)

// Version, when set at link time, is the release's version; otherwise
// the module's version the toolchain stamped (a pseudo-version in a git
// checkout) is used.
var Version string

// Info is a build's version and commit.
type Info struct {
	Version  string // "v1.2.3", a pseudo-version, or "devel"
	Commit   string // the commit's hash, "" when not known (go run, tests)
	Time     string // the commit's time (RFC 3339), "" when not known
	Modified bool   // built from a checkout with uncommitted changes
}

// Get reads the build's information.
func Get() Info {
	info := Info{Version: Version}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	return info
}

// ShortCommit is the commit's first 12 characters ("" when not known).
func (i Info) ShortCommit() string {
	if len(i.Commit) > 12 {
		return i.Commit[:12]
	}
	return i.Commit
}

// String says the build in one line: "lazarus v1.2.3 (commit
// 0123456789ab, 2026-12-01T10:00:00Z, modified)".
func (i Info) String() string {
	var parts []string
	if c := i.ShortCommit(); c != "" {
		parts = append(parts, "commit "+c)
	}
	if i.Time != "" {
		parts = append(parts, i.Time)
	}
	if i.Modified {
		parts = append(parts, "modified")
	}
	s := "lazarus " + i.Version
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
