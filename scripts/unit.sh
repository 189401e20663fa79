#!/usr/bin/env bash
# The unit tier: no root, no daemon, no network namespace; a Go toolchain is all it needs.
# It runs `go test ./...` and then says what it did not run:
#   - the integration tier (files with the `integration` build tag: real Open vSwitch, snmpd,
#     etcd, haproxy and Chromium, namespaces and cgroups, so root; scripts/test.sh runs it),
#   - the tests that skipped themselves at run time, each with its reason (e.g. a chown to
#     another user that needs root).
# Extra arguments go to go test (e.g. -race, -run X). Exit status is go test's.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

log=$(mktemp)
trap 'rm -f "$log"' EXIT
go test -v "$@" ./... >"$log" 2>&1
rc=$?
# The verdict per package, and each failing test with the output it logged (go test -v
# streams a test's log lines before its "--- FAIL" line).
awk '
  /^=== (RUN|CONT|PAUSE|NAME)/ { buf = ""; next }
  /^ *--- FAIL/ { print; printf "%s", buf; buf = ""; next }
  /^ *--- (PASS|SKIP)/ { buf = ""; next }
  /^(ok|FAIL|panic:)/ { print; next }
  /^(PASS|\?)/ { next }
  { buf = buf $0 "\n" }
' "$log"

echo
echo "== not run: the integration tier (scripts/test.sh, as root)"
files=$(grep -rl --include='*_test.go' '^//go:build integration' . | sort)
n=0
for f in $files; do
  tests=$(grep -oE '^func (Test|Benchmark)[A-Za-z0-9_]+' "$f" | grep -vx 'func TestMain' | sed 's/^func //' | tr '\n' ' ')
  [ -n "$tests" ] || continue
  n=$((n + $(wc -w <<<"$tests")))
  echo "  ${f#./}: $tests"
done
echo "  ($n tests and benchmarks in $(wc -w <<<"$files") files)"

echo
echo "== skipped at run time"
# go test -v prints "--- SKIP: Name (d)" after the test's t.Skip message lines.
awk '
  /^=== RUN/ { msg = "" }
  /^[[:space:]]+[^[:space:]]+_test\.go:[0-9]+:/ { sub(/^[[:space:]]+/, ""); msg = $0 }
  /^[[:space:]]*--- SKIP:/ { sub(/^[[:space:]]*--- SKIP: /, ""); print "  " $1 ": " msg; skipped++ }
  END { if (!skipped) print "  (none)" }
' "$log"
exit $rc
