package db

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The lock's files build on every system, Unix or not: lock.go once
// called syscall.Flock with no build constraint, and a Windows build broke
// there. The rest of the package needs cgo (go-sqlite3), which a cross
// build here has not; so the files the build constraints pick for each
// system are vetted on their own.
func TestLockFilesBuildWithoutUnix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	t.Parallel()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH")
	}
	for _, goos := range []string{"windows", "darwin", "linux", "freebsd", "plan9"} {
		t.Run(goos, func(t *testing.T) {
			t.Parallel()
			env := append(exec.Command(gotool).Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
			list := exec.Command(gotool, "list", "-f", `{{join .GoFiles " "}}`, ".")
			list.Env = env
			out, err := list.CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			var files []string
			lockFiles := 0
			for _, f := range strings.Fields(string(out)) {
				if f == "lock.go" || strings.HasPrefix(f, "lock_") {
					files = append(files, f)
					src, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					lockFiles += strings.Count(string(src), "\nfunc lockFile(")
				}
			}
			if lockFiles != 1 {
				t.Fatalf("for %s the build picks %v, with %d lockFile: want one", goos, files, lockFiles)
			}
			vet := exec.Command(gotool, append([]string{"vet"}, files...)...)
			vet.Env = env
			if out, err := vet.CombinedOutput(); err != nil {
				t.Fatalf("go vet %v for %s: %v\n%s", files, goos, err, out)
			}
		})
	}
}
