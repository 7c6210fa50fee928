#!/bin/sh
# The README's first command: build lazarus and start the demo on
# ./lazarus-demo.db (flags go to `lazarus demo`: sh run.sh --addr
# 127.0.0.1:9090). `go tool task run` runs it too, after generating the
# views. A first command of its own because a cold `go tool task run` first
# builds task (about 90 CPU-seconds, 50 s on both cores) before anything
# of Lazarus starts compiling; this starts at once.
# docs/performance.md (C1) has the measurements.
set -eu
cd "$(dirname "$0")"

# The views' generated code is committed (go tool task test fails when it
# is stale), so a fresh clone needs no templ; an edited .templ does.
for templ in views/*.templ; do
	if [ "$templ" -nt "${templ%.templ}_templ.go" ]; then
		go tool templ generate -log-level warn
		break
	fi
done

# C code (SQLite's amalgamation) at -O2 without -g: the same machine code,
# without debug information, which costs a third of the compile (74 CPU-s
# with -g, 48 without). Taskfile.yml sets the same, so that the test
# command shares this build in Go's cache. A CGO_CFLAGS of your own wins.
CGO_CFLAGS=${CGO_CFLAGS:--O2}
export CGO_CFLAGS

# -buildvcs=auto: the binary says its commit (lazarus version, /health,
# the pages' footer) in a git checkout, whatever GOFLAGS says.
go build -buildvcs=auto -o lazarus .

# Started, not `go run`, which exits 1 on Ctrl-C even when the server
# stopped cleanly.
exec ./lazarus demo "$@"
