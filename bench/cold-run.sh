#!/bin/sh
# C1 of PERF.md: a cold first run. A fresh clone of this checkout's
# commit, empty Go caches (GOMODCACHE and GOCACHE in a temporary
# directory), then the README's first command, `sh run.sh`, until the
# first page answers (GET /login, 200). The seconds, the CPU-seconds of
# everything it ran (user + system, which hardly move with the load), the
# megabytes downloaded, the load, the commit and go.sum's SHA-256 go to
# bench/c1.json, which the bench's C1 row reads and a test of bench
# compares with go.sum (run this again when go.sum changes). Not part of
# a bench run: it downloads and builds everything from nothing (about two
# minutes on 2 quiet vCPUs). Run it on a machine otherwise idle:
#
#	sh bench/cold-run.sh [port] [task]
#
# With `task` it measures `go tool task run` instead (for comparison: it
# builds task first), and writes bench/c1-task.json.
set -eu
port=${1:-18931}
what=${2:-run.sh}
case $what in
run.sh)
	cmd="sh run.sh --addr 127.0.0.1:$port"
	out=c1.json
	;;
task)
	cmd="go tool task run -- --addr 127.0.0.1:$port"
	out=c1-task.json
	;;
*)
	echo "cold run: the second argument is run.sh (the default) or task" >&2
	exit 2
	;;
esac
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
gosum=$(sha256sum "$work/src/go.sum" | cut -d' ' -f1)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s.%N)
cd "$work/src"
# A newcomer's environment: no CGO_CFLAGS, CC or GOFLAGS of this machine's.
env -u CGO_CFLAGS -u CC -u GOFLAGS GOMODCACHE="$work/mod" GOCACHE="$work/cache" GOFLAGS=-modcacherw \
	setsid $cmd >"$work/run.log" 2>&1 &
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
# CPU time of the process group (setsid: the command and all it started),
# from /proc: each live process's own time and that of its children it has
# waited for (the finished go build and its compilers are in its parent's).
# The process's name is in parentheses and may hold spaces: the fields are
# counted after the last ')'.
ticks=$(getconf CLK_TCK)
cpu=$(for f in /proc/[0-9]*/stat; do cat "$f" 2>/dev/null; echo; done | awk -v pg="$pid" -v hz="$ticks" '
	{ i = index($0, ")"); while ((j = index(substr($0, i + 1), ")")) > 0) i += j
	  n = split(substr($0, i + 2), f, " ")
	  # after the name: state(1) ppid(2) pgrp(3) ... utime(12) stime(13) cutime(14) cstime(15)
	  if (n > 15 && f[3] == pg) t += f[12] + f[13] + f[14] + f[15] }
	END { printf "%.0f", t / hz }')
mb=$(du -sm "$work/mod/cache/download" | cut -f1)
secs=$(echo "$end - $start" | bc)
cat >"$here/$out" <<JSON
{
  "date": "$(date -u +%Y-%m-%d)",
  "commit": "$commit",
  "goSum": "$gosum",
  "command": "${cmd%% --*}",
  "seconds": $(printf '%.0f' "$secs"),
  "cpuSeconds": $cpu,
  "downloadedMB": $mb,
  "loadStart": "$load_start",
  "loadEnd": "$load_end",
  "cores": $(nproc),
  "how": "sh bench/cold-run.sh: fresh clone, empty GOMODCACHE and GOCACHE, no CGO_CFLAGS, the command until GET /login answers; cpuSeconds is user+system of all it ran"
}
JSON
echo "C1 ($cmd): first page after ${secs}s, ${cpu} CPU-s (commit $commit, load $load_start -> $load_end, ${mb} MB downloaded) -> bench/$out"
