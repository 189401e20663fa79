#!/usr/bin/env bash
# bench-peers.sh — the probe against its peers, side by side in one run, and the collector's
# cost per backend update for SNMP polling versus push reports.
#
# Part 1 (footprint): starts at the same time, on 127.0.0.1 only, each sampling this host:
#   - the flowweight probe (scope host, INTERVAL, health check of a local HTTP endpoint whose
#     port is its service port, pushing to a UDP sink that counts datagrams), and a second
#     probe without the health check (snmpd does none), to its own sink, and a third counting
#     connections for every report (conns_interval "0s"; the default reuses a count for 5 s);
#   - Debian's prometheus-node-exporter with its default collectors, scraped (whole /metrics
#     page) once per INTERVAL by a bounded scraper;
#   - the same exporter restricted to the collectors closest to the probe's data
#     (cpu, meminfo, tcpstat), scraped the same way;
#   - the same exporter with default collectors, never scraped (idle);
#   - Debian's snmpd, foreground, generated config, polled once per INTERVAL by the collector's
#     own SNMP poller (collector/snmp) for what the probe reports: CPU counters, memory,
#     processors, established connections on the service port (tcpConnTable walk).
#   After WARMUP seconds (default 5) it measures each process for DURATION seconds (default 60):
#   utime+stime delta from /proc/PID/stat, and VmHWM/VmRSS from /proc/PID/status at the end,
#   as scripts/probe-footprint.sh does. The scraper/poller itself is not measured.
# Part 2 (collector cost): cmd/benchpeers "cost" against the same snmpd: N = COST_N
#   backends updated once per COST_PERIOD for COST_PERIODS periods, by SNMP polls (N pollers,
#   one real snmpd) and by push (N simulated probes in a child process, real push.Server).
#
# Prints Markdown. Usage (from anywhere in the repository):
#   scripts/bench-peers.sh
#   DURATION=20 COST_N=1,10 scripts/bench-peers.sh
# Needs: go, /usr/bin/prometheus-node-exporter, /usr/sbin/snmpd (apt-get install
# prometheus-node-exporter snmpd). No root needed. Stops only the processes it started.
set -euo pipefail

DURATION=${DURATION:-60}
WARMUP=${WARMUP:-5}
INTERVAL=${INTERVAL:-1s}
COST_N=${COST_N:-1,10,50}
COST_PERIOD=${COST_PERIOD:-500ms}
COST_PERIODS=${COST_PERIODS:-8}
NODE_EXPORTER=${NODE_EXPORTER:-/usr/bin/prometheus-node-exporter}
SNMPD=${SNMPD:-/usr/sbin/snmpd}

for bin in "$NODE_EXPORTER" "$SNMPD"; do
	if [ ! -x "$bin" ]; then
		echo "bench-peers: $bin is missing (apt-get install prometheus-node-exporter snmpd)" >&2
		exit 1
	fi
done

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/probe" ./probe && go build -o "$work/benchpeers" ./cmd/benchpeers)
bp=$work/benchpeers

# --- what ran where -------------------------------------------------------------------------
commit=$(cd "$root" && git rev-parse --short HEAD)
if ! (cd "$root" && git diff --quiet HEAD -- probe collector); then commit="$commit (+ uncommitted changes in probe/ or collector/)"; fi
echo "## Run $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo
echo "- machine: $(nproc) cores, $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "- probe: flowweight $commit, $(go version | cut -d' ' -f3)"
echo "- prometheus-node-exporter $(dpkg-query -W -f='${Version}' prometheus-node-exporter 2>/dev/null || echo '?'), snmpd $(dpkg-query -W -f='${Version}' snmpd 2>/dev/null || echo '?')"
echo "- interval $INTERVAL, warm-up ${WARMUP} s, measured ${DURATION} s"
echo

# --- part 1: footprint ----------------------------------------------------------------------
"$bp" sink -ports "$work/ports" -count "$work/count" -max "$((WARMUP + DURATION + 300))s" &
pids+=($!)
"$bp" sink -ports "$work/ports2" -count "$work/count2" -max "$((WARMUP + DURATION + 300))s" &
pids+=($!)
"$bp" sink -ports "$work/ports3" -count "$work/count3" -max "$((WARMUP + DURATION + 300))s" &
pids+=($!)
for _ in $(seq 50); do [ -s "$work/ports" ] && [ -s "$work/ports2" ] && [ -s "$work/ports3" ] && break; sleep 0.1; done
read -r udp_port http_port <"$work/ports"
read -r udp_port2 _ <"$work/ports2"
read -r udp_port3 _ <"$work/ports3"

head -c 32 /dev/urandom >"$work/probe.key"
chmod 600 "$work/probe.key"
cat >"$work/probe.toml" <<EOF2
backend_id = "benchpeers"
collector = "127.0.0.1:$udp_port"
key_file = "$work/probe.key"
interval = "$INTERVAL"
scope = "host"
service_ports = [$http_port]
drain_file = "$work/drain"
[health]
url = "http://127.0.0.1:$http_port/healthz"
timeout = "500ms"
EOF2

# The same probe without the HTTP health check: snmpd does no such check (the collector
# checks SNMP backends itself), so this row is the probe's part comparable to snmpd's.
cat >"$work/probe-nohealth.toml" <<EOF2
backend_id = "benchpeers-nohealth"
collector = "127.0.0.1:$udp_port2"
key_file = "$work/probe.key"
interval = "$INTERVAL"
scope = "host"
service_ports = [$http_port]
drain_file = "$work/drain"
[health]
# No url: no check. The timeout is still validated against the interval (default 2s > 1s).
timeout = "500ms"
EOF2

# The probe as above, but counting connections for every report (conns_interval "0s"), where
# the default reuses a count for 5 s as snmpd keeps its tcpConnTable (docs/probe.md).
sed -e 's/^backend_id = .*/backend_id = "benchpeers-conns"/' -e "s/^collector = .*/collector = \"127.0.0.1:$udp_port3\"/" \
	-e 's/^interval = .*/&\nconns_interval = "0s"/' "$work/probe.toml" >"$work/probe-conns.toml"

ne_full=$("$bp" freeport tcp)
ne_min=$("$bp" freeport tcp)
ne_idle=$("$bp" freeport tcp)
while [ "$ne_min" = "$ne_full" ]; do ne_min=$("$bp" freeport tcp); done
while [ "$ne_idle" = "$ne_full" ] || [ "$ne_idle" = "$ne_min" ]; do ne_idle=$("$bp" freeport tcp); done
snmp_port=$("$bp" freeport udp)
community="fw$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
mkdir -m 700 "$work/snmp-persist"
printf 'rocommunity %s 127.0.0.1\n' "$community" >"$work/snmpd.conf"

# All peers start here, within a fraction of a second of each other.
"$work/probe" -config "$work/probe.toml" 2>"$work/probe.log" &
probe_pid=$!
pids+=($probe_pid)
"$work/probe" -config "$work/probe-nohealth.toml" 2>"$work/probe-nohealth.log" &
probe2_pid=$!
pids+=($probe2_pid)
"$work/probe" -config "$work/probe-conns.toml" 2>"$work/probe-conns.log" &
probe3_pid=$!
pids+=($probe3_pid)
"$NODE_EXPORTER" --web.listen-address="127.0.0.1:$ne_full" 2>"$work/ne-full.log" &
nefull_pid=$!
pids+=($nefull_pid)
"$NODE_EXPORTER" --web.listen-address="127.0.0.1:$ne_min" --collector.disable-defaults \
	--collector.cpu --collector.meminfo --collector.tcpstat 2>"$work/ne-min.log" &
nemin_pid=$!
pids+=($nemin_pid)
"$NODE_EXPORTER" --web.listen-address="127.0.0.1:$ne_idle" 2>"$work/ne-idle.log" &
neidle_pid=$!
pids+=($neidle_pid)
# -C: only this config; -m "" and MIBS=: numeric OIDs, no MIB files parsed (as the collector
# polls it); -I -smux: no SMUX listener on port 199.
SNMP_PERSISTENT_DIR="$work/snmp-persist" MIBS= "$SNMPD" -f -Lf "$work/snmpd.log" -C -c "$work/snmpd.conf" \
	-p "$work/snmpd.pid" -m "" -I -smux "udp:127.0.0.1:$snmp_port" &
snmpd_pid=$!
pids+=($snmpd_pid)
start=$(date +%s.%N)

# The exporters must listen before the first scrape (the poller waits for snmpd itself).
for port in "$ne_full" "$ne_min"; do
	for i in $(seq 50); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		[ "$i" = 50 ] && { echo "bench-peers: node-exporter on port $port did not listen" >&2; cat "$work"/ne-*.log >&2; exit 1; }
		sleep 0.1
	done
done
"$bp" load -interval "$INTERVAL" -duration "$((WARMUP + DURATION + 1))s" \
	-scrape "http://127.0.0.1:$ne_full/metrics,http://127.0.0.1:$ne_min/metrics" \
	-snmp "127.0.0.1:$snmp_port" -community "$community" -service-port "$http_port" -out "$work/load.txt" &
load_pid=$!
pids+=($load_pid)

names=(probe probe-no-health probe-conns-every-report node-exporter-scraped node-exporter-min-scraped node-exporter-idle snmpd)
procs=("$probe_pid" "$probe2_pid" "$probe3_pid" "$nefull_pid" "$nemin_pid" "$neidle_pid" "$snmpd_pid")
alive() {
	local i
	for i in "${!procs[@]}"; do
		if ! kill -0 "${procs[$i]}" 2>/dev/null; then
			echo "bench-peers: ${names[$i]} (pid ${procs[$i]}) exited early" >&2
			tail -n 20 "$work"/*.log >&2 || true
			exit 1
		fi
	done
}
# ticks prints utime+stime (fields 14 and 15 of /proc/PID/stat) in clock ticks, cutting after
# the ")" that ends the command name.
ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# runns prints the nanoseconds every thread of PID has run (field 1 of each
# /proc/PID/task/*/schedstat): finer than ticks, which at a 1 s interval count a dozen or so.
runns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d", s}'; }

sleep "$WARMUP"
alive
t0=()
n0=()
for p in "${procs[@]}"; do t0+=("$(ticks "$p")"); n0+=("$(runns "$p")"); done
warm=$(date +%s.%N)
# The host's TCP sockets: snmpd's tcpConnTable and the probe's /proc/net/tcp read grow with them.
sock0=$(awk '/^TCP:/ {print $3 + $7}' /proc/net/sockstat)
sleep "$DURATION"
sock1=$(awk '/^TCP:/ {print $3 + $7}' /proc/net/sockstat)
alive
t1=()
hwm=()
rss=()
n1=()
for p in "${procs[@]}"; do
	t1+=("$(ticks "$p")")
	n1+=("$(runns "$p")")
	hwm+=("$(awk '/^VmHWM:/ {print $2}' "/proc/$p/status")")
	rss+=("$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status")")
done
end=$(date +%s.%N)
wait "$load_pid" || { echo "bench-peers: the scraper/poller failed" >&2; exit 1; }
sent=$(cat "$work/count" 2>/dev/null || echo 0)
sent2=$(cat "$work/count2" 2>/dev/null || echo 0)
# Part 2 needs snmpd and the sink's listener only.
for p in "$probe_pid" "$probe2_pid" "$probe3_pid" "$nefull_pid" "$nemin_pid" "$neidle_pid"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done

what=(
	"scope host, interval $INTERVAL, health check + conns on the service port, $sent reports to the sink"
	"the same without the HTTP health check, $sent2 reports to its sink"
	"the first, but counting connections for every report (conns_interval \"0s\"; the default reuses a count 5 s), $(cat "$work/count3" 2>/dev/null || echo 0) reports"
	"default collectors, whole /metrics scraped every $INTERVAL"
	"only cpu, meminfo, tcpstat collectors, scraped every $INTERVAL"
	"default collectors, never scraped"
	"polled every $INTERVAL by collector/snmp (GET 14 scalars, walk hrProcessorTable, walk tcpConnTable)"
)
tck=$(getconf CLK_TCK)
echo "### Footprint, measured $(awk -v a="$warm" -v b="$end" 'BEGIN {printf "%.1f", b - a}') s after a $(awk -v a="$start" -v b="$warm" 'BEGIN {printf "%.1f", b - a}') s warm-up"
echo
echo "| process | what it does here | VmHWM (peak) | VmRSS (final) | CPU s (utime+stime) | % of one core | CPU s (schedstat, ns) | peak RSS × probe | CPU × probe (schedstat) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for i in "${!names[@]}"; do
	awk -v n="${names[$i]}" -v w="${what[$i]}" -v h="${hwm[$i]}" -v r="${rss[$i]}" -v d="$((t1[i] - t0[i]))" \
		-v ph="${hwm[0]}" -v pd="$((n1[0] - n0[0]))" -v dn="$((n1[i] - n0[i]))" -v tck="$tck" -v el="$(awk -v a="$warm" -v b="$end" 'BEGIN {print b - a}')" 'BEGIN {
		cpu = d / tck
		cr = (pd > 0) ? sprintf("%.2f", dn / pd) : "n/a"
		printf "| %s | %s | %.1f MB | %.1f MB | %.2f | %.3f %% | %.3f | %.2f | %s |\n", n, w, h / 1024, r / 1024, cpu, 100 * cpu / el, dn / 1e9, h / ph, cr
	}'
done
echo
echo "CPU is counted in ticks of 1/$tck s. Host TCP sockets (in use + time-wait): $sock0 at the window's start, $sock1 at its end."
echo "Scraper and poller (not measured):"
sed 's/^/- /' "$work/load.txt"
grep -E 'level=(WARN|ERROR)' "$work/probe.log" "$work/probe-nohealth.log" "$work/probe-conns.log" >&2 || true
echo

# --- part 2: collector cost per backend update ----------------------------------------------
echo "### Collector CPU per backend update: SNMP polling vs push"
echo
"$bp" cost -snmp "127.0.0.1:$snmp_port" -community "$community" -service-port "$http_port" \
	-snmpd-pid "$snmpd_pid" -n "$COST_N" -period "$COST_PERIOD" -periods "$COST_PERIODS"
