#!/usr/bin/env bash
# bench.sh — rerun every benchmark of the project, one after the other, and print a summary.
#
# Steps (each command is the one docs/benchmarks.md quotes, with short -benchtime):
#   weights          go test -bench Compute ./weights                 (docs/benchmarks.md)
#   sim-bench        go test -bench RunDynamic ./weights/sim/          (docs/benchmarks.md)
#   report           go test -bench Open ./internal/report/            (docs/benchmarks.md)
#   push             go test -bench 'Ingest|Loopback' ./collector/push/ (docs/benchmarks.md)
#   snmp             go test -bench . ./collector/snmp/ and -tags integration PollSnmpd (docs/benchmarks.md)
#   probe-sample     go test -bench SampleHost ./probe/sample          (docs/benchmarks.md)
#   ofswitch         go test -tags integration -bench 'Rewrite|OfctlModGroup' ./controller/ofswitch/ (docs/benchmarks.md)
#   fwsim            go run ./cmd/fwsim (and -table fastloop, staleness) (docs/benchmarks.md)
#   peers            bash scripts/bench-peers.sh                       (docs/benchmarks.md)
#   probe-footprint  scripts/probe-footprint.sh                        (docs/benchmarks.md)
#   lab              go run ./cmd/bench                                (docs/benchmarks.md)
#   detect           go test -tags integration -bench KillDetection ./e2e/ (docs/design.md, "Failure detection time")
#   plan             go test -bench Plan ./controller/switchsync/      (docs/benchmarks.md, "Fleet")
#   fleet            go run ./cmd/fleet: 100 bridges, and 10,000 backends (docs/benchmarks.md, "Fleet")
#   failover         HA on etcd: 20 election failovers, then 20 leader kills and 20 freezes through the real switch (docs/benchmarks.md, "Controller failover")
#   share-correction go test -tags integration -count=3 -run TestShareCorrection ./e2e/: affinity's pinned skew off, then corrected (docs/benchmarks.md, "Share correction")
#
# About 37 minutes on this 2-core machine when the lab switch is free (an estimate: the lab
# step's hidden run alone takes about 9; the lab steps wait for the host-wide lab lock while
# another test holds it). Logs go to OUT (default a new temp dir);
# the summary lists every step with its status and time and the lines worth reading.
#
# Usage: sudo scripts/bench.sh                 (root: the ofswitch, snmp integration and lab steps)
#        ONLY="weights fwsim" scripts/bench.sh  (a subset, by step name)
#        LAB_RUN=share,disruption scripts/bench.sh
#        ONLY=lab LAB_RUN=hidden scripts/bench.sh   (one cmd/bench step; docs/e2e.md, "Balancing benchmarks")
#        ONLY=lab LAB_RUN=peers scripts/bench.sh    (flowweight against HAProxy and the fixed split;
#                                                    LAB_RUN=peers,step,overload for all three; about 25 minutes for peers)
# Exit status: 1 if any step failed. Stops only the processes it started (each step cleans up).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
OUT=${OUT:-$(mktemp -d /tmp/fwbench.XXXXXX)}
ONLY=${ONLY:-}
LAB_RUN=${LAB_RUN:-share,disruption,quality,hidden}
mkdir -p "$OUT"

steps=(weights sim-bench report push snmp probe-sample ofswitch plan fwsim peers probe-footprint lab detect fleet failover share-correction)
declare -A cmd=(
	[weights]="go test -run '^\$' -bench Compute -benchmem -benchtime 1000x -count 2 ./weights"
	[sim-bench]="go test -run '^\$' -bench RunDynamic -benchtime 5x -count 2 ./weights/sim/"
	[report]="go test -run '^\$' -bench Open -benchmem -benchtime 100000x -cpu 1 -count 2 ./internal/report/"
	[push]="go test -run '^\$' -bench 'Ingest|Loopback' -benchmem -benchtime 50000x -cpu 1 -count 2 ./collector/push/"
	[snmp]="go test -run '^\$' -bench . -benchtime 2000x -count 2 ./collector/snmp/ && go test -tags integration -run '^\$' -bench PollSnmpd -benchtime 100x -count 2 ./collector/snmp/"
	[probe-sample]="go test -run '^\$' -bench SampleHost -benchmem -benchtime 1000x -count 2 ./probe/sample"
	[ofswitch]="go test -tags integration -run '^\$' -bench 'Rewrite|OfctlModGroup' -benchtime 200x -count 2 ./controller/ofswitch/"
	[fwsim]="go run ./cmd/fwsim && go run ./cmd/fwsim -table fastloop && go run ./cmd/fwsim -table staleness"
	[peers]="bash scripts/bench-peers.sh"
	[probe-footprint]="DURATION=\${FOOTPRINT_DURATION:-30} bash scripts/probe-footprint.sh"
	[lab]="go run ./cmd/bench -run $LAB_RUN -conns 1500 -measure 15s"
	[plan]="go test -run '^\$' -bench Plan -benchmem -benchtime 10x -count 2 ./controller/switchsync/"
	[fleet]="go run ./cmd/fleet -switches 100 -services 10 -backends 4 -changes 100 -silent && go run ./cmd/fleet -switches 1 -services 1000 -backends 10 -changes 0 -hold 30s"
	[detect]="go test -count=1 -tags integration -run '^\$' -bench KillDetection -benchtime 1x -timeout 20m -v ./e2e/"
	[share-correction]="go test -count=3 -tags integration -run '^TestShareCorrection\$' -timeout 30m -v ./e2e/"
	[failover]="FLOWWEIGHT_HA_ROUNDS=20 go test -count=1 -tags integration -run '^TestFailoverTime\$' -v ./controller/ha/ && go test -count=1 -tags integration -run '^TestHAFailover\$' -timeout 30m -v ./e2e/ -args -ha.rounds 20 -ha.frozen 20 -ha.judge-move"
)
# What the summary shows of each log.
declare -A pick=(
	[fwsim]='^(#|\|)'
	[peers]='^(#|\||[A-Za-z].*:)'
	[probe-footprint]='(RSS|HWM|CPU|cpu|%)'
	[lab]='^(#|\||Pool|Neighbour|Hidden run|Backends:|Offered)'
	[detect]='(Benchmark|kill +[0-9]+:|target|ok|FAIL)'
	[failover]='(figure:|round [0-9]+:|failover|--- |ok|FAIL)'
	[share-correction]='(figure:|--- |ok|FAIL)'
	[fleet]='^(#|-|  -)'
)

# How many of those lines (default 60): the lab's tables are longer.
declare -A picklines=([lab]=200 [fwsim]=260)

declare -A status secs
failed=0
t_all=$(date +%s)
for s in "${steps[@]}"; do
	if [ -n "$ONLY" ] && [[ " $ONLY " != *" $s "* ]]; then
		continue
	fi
	echo "==> $s: ${cmd[$s]}" >&2
	t0=$(date +%s)
	if bash -c "${cmd[$s]}" >"$OUT/$s.log" 2>&1; then
		status[$s]=ok
	else
		status[$s]="FAILED ($?)"
		failed=1
	fi
	secs[$s]=$(($(date +%s) - t0))
	echo "    ${status[$s]} in ${secs[$s]} s, log $OUT/$s.log" >&2
done

echo
echo "# flowweight benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, $(go version | cut -d' ' -f3), total $(($(date +%s) - t_all)) s"
echo
echo "| step | status | seconds | log |"
echo "|---|---|---|---|"
for s in "${steps[@]}"; do
	[ -n "${status[$s]:-}" ] || continue
	echo "| $s | ${status[$s]} | ${secs[$s]} | $OUT/$s.log |"
done
for s in "${steps[@]}"; do
	[ -n "${status[$s]:-}" ] || continue
	echo
	echo "## $s"
	echo
	re=${pick[$s]:-'^(Benchmark|ok|FAIL|---)'}
	grep -E "$re" "$OUT/$s.log" | head -"${picklines[$s]:-60}"
	if [ "${status[$s]}" != ok ]; then
		echo "(last lines)"
		tail -15 "$OUT/$s.log"
	fi
done
exit $failed
