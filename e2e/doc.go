// Package e2e holds the browser tests: playwright-go journeys against the
// real server on 127.0.0.1:0 with a temporary database, driving Debian's
// chromium. package.json pins the driver (playwright-core) that the Go
// module expects; `go tool task setup` installs both and links .driver/.
// See E2E.md in the shared/ folder beside the repository.
package e2e
