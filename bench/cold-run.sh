#!/bin/sh
# C1 of PERF.md: a cold first run. A fresh clone of this checkout's
# commit, empty Go caches (GOMODCACHE and GOCACHE in a temporary
# directory), then `go tool task run` until the first page answers
# (GET /login, 200); the seconds, the load and the commit go to
# bench/c1.json, which the bench's C1 row reads. Not part of a bench run:
# it downloads every module and builds everything from nothing (a minute
# or more on 2 vCPUs). Run it on a machine otherwise idle:
#
#	sh bench/cold-run.sh [port]
set -eu
port=${1:-18931}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse --short HEAD)
work=$(mktemp -d)
pid=
cleanup() {
	# The run is a process group of its own (setsid): the task, the
	# build and the server it started go together.
	[ -n "$pid" ] && kill -- "-$pid" 2>/dev/null || true
	chmod -R u+w "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
git clone -q "$repo" "$work/src"
git -C "$work/src" checkout -q "$commit"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s.%N)
cd "$work/src"
GOMODCACHE="$work/mod" GOCACHE="$work/cache" GOFLAGS=-modcacherw \
	setsid go tool task run -- --addr "127.0.0.1:$port" >"$work/run.log" 2>&1 &
pid=$!
while ! curl -fsS -o /dev/null "http://127.0.0.1:$port/login" 2>/dev/null; do
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "cold run: go tool task run stopped before the first page:" >&2
		tail -20 "$work/run.log" >&2
		exit 1
	fi
	sleep 0.5 # polling a server that is still being built; not a test
done
end=$(date +%s.%N)
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
mb=$(du -sm "$work/mod/cache/download" | cut -f1)
secs=$(echo "$end - $start" | bc)
cat >"$here/c1.json" <<JSON
{
  "date": "$(date -u +%Y-%m-%d)",
  "commit": "$commit",
  "seconds": $(printf '%.0f' "$secs"),
  "downloadedMB": $mb,
  "loadStart": "$load_start",
  "loadEnd": "$load_end",
  "cores": $(nproc),
  "how": "sh bench/cold-run.sh: fresh clone, empty GOMODCACHE and GOCACHE, go tool task run until GET /login answers"
}
JSON
echo "C1: first page after ${secs}s (commit $commit, load $load_start -> $load_end, ${mb} MB downloaded)"
