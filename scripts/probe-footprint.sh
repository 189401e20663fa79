#!/usr/bin/env bash
# probe-footprint.sh — measure the probe's memory and CPU cost.
#
# Builds the probe, runs it at INTERVAL (default 1s) against a local UDP sink and a local HTTP
# health endpoint (one python3 process serving both, on 127.0.0.1 only, whose port is also the
# service port whose connections are counted), lets it warm up for WARMUP seconds (default 5)
# and measures for DURATION seconds (default 60). Prints VmRSS and VmHWM from
# /proc/PID/status and utime+stime from /proc/PID/stat: CPU seconds and percent of one core in
# the steady state and over the whole run. Goal: < 15 MB RSS and < 0.5 % of one core at a
# 1 s interval.
#
# Usage: scripts/probe-footprint.sh            (from anywhere in the repository)
#        DURATION=10 INTERVAL=500ms scripts/probe-footprint.sh
# Needs: go, python3. No root. Stops only the processes it started.
set -euo pipefail

DURATION=${DURATION:-60}
WARMUP=${WARMUP:-5}
INTERVAL=${INTERVAL:-1s}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
probe_pid=""
sink_pid=""
cleanup() {
	[ -n "$probe_pid" ] && kill "$probe_pid" 2>/dev/null || true
	[ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/probe" ./probe)

cat >"$work/sink.py" <<'PY'
import http.server, socket, sys, threading
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"status: ready\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=httpd.serve_forever, daemon=True).start()
with open(sys.argv[1], "w") as f:
    f.write("%d %d\n" % (udp.getsockname()[1], httpd.server_address[1]))
n = 0
while True:
    udp.recv(2048)
    n += 1
    with open(sys.argv[2], "w") as f:
        f.write("%d\n" % n)
PY
python3 "$work/sink.py" "$work/ports" "$work/count" &
sink_pid=$!
for _ in $(seq 50); do [ -s "$work/ports" ] && break; sleep 0.1; done
read -r udp_port http_port <"$work/ports"

head -c 32 /dev/urandom >"$work/probe.key"
chmod 600 "$work/probe.key"
cat >"$work/probe.toml" <<EOF2
backend_id = "footprint"
collector = "127.0.0.1:$udp_port"
key_file = "$work/probe.key"
interval = "$INTERVAL"
service_ports = [$http_port]
drain_file = "$work/drain"
[health]
url = "http://127.0.0.1:$http_port/healthz"
timeout = "500ms"
EOF2

# cputicks prints utime and stime, fields 14 and 15 of /proc/PID/stat, in clock ticks
# (cut after the ")" that ends the command name, which could hold spaces).
cputicks() { sed 's/^.*) //' "/proc/$probe_pid/stat" | awk '{print $12, $13}'; }
alive() {
	if ! kill -0 "$probe_pid" 2>/dev/null; then
		echo "probe exited early:" >&2
		cat "$work/probe.log" >&2
		exit 1
	fi
}

"$work/probe" -config "$work/probe.toml" 2>"$work/probe.log" &
probe_pid=$!
start=$(date +%s.%N)
# Steady state is measured from WARMUP on, so process start-up is reported apart.
sleep "$WARMUP"
alive
read -r utime0 stime0 < <(cputicks)
warm=$(date +%s.%N)
sleep "$DURATION"
alive
read -r utime stime < <(cputicks)
end=$(date +%s.%N)
status=/proc/$probe_pid/status
rss=$(awk '/^VmRSS:/ {print $2}' "$status")
hwm=$(awk '/^VmHWM:/ {print $2}' "$status")
threads=$(awk '/^Threads:/ {print $2}' "$status")
tck=$(getconf CLK_TCK)
kill -TERM "$probe_pid"
wait "$probe_pid" || true
probe_pid=""
sent=$(cat "$work/count" 2>/dev/null || echo 0)

awk -v rss="$rss" -v hwm="$hwm" -v u0="$utime0" -v s0="$stime0" -v u="$utime" -v s="$stime" \
	-v tck="$tck" -v start="$start" -v warm="$warm" -v end="$end" -v sent="$sent" -v iv="$INTERVAL" \
	-v thr="$threads" 'BEGIN {
	el = end - warm; cpu = (u - u0 + s - s0) / tck
	printf "interval              %s\n", iv
	printf "measured              %.1f s after %.1f s warm-up\n", el, warm - start
	printf "reports received      %d (whole run, including the leaving report)\n", sent
	printf "VmRSS                 %.1f MB (%d kB)\n", rss / 1024, rss
	printf "VmHWM                 %.1f MB (%d kB)\n", hwm / 1024, hwm
	printf "threads               %d\n", thr
	printf "start-up utime+stime  %.2f s (%d + %d ticks in the warm-up)\n", (u0 + s0) / tck, u0, s0
	printf "steady utime+stime    %.2f s (utime %d, stime %d ticks at %d Hz)\n", cpu, u - u0, s - s0, tck
	printf "steady CPU            %.3f %% of one core\n", 100 * cpu / el
	printf "whole-run CPU         %.3f %% of one core\n", 100 * (u + s) / tck / (end - start)
}'
grep -E 'level=(WARN|ERROR)' "$work/probe.log" >&2 || true
