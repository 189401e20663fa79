#!/usr/bin/env bash
# Installs what flowweight's tests and lab need on a Debian machine (run as root).
# Idempotent: packages already present are left alone.
set -euo pipefail
need=(openvswitch-switch openvswitch-common snmpd snmp ethtool iproute2 haproxy chromium prometheus-node-exporter tcpdump iputils-ping procps etcd-server)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's packages start system daemons where an init system runs; the tests start their
# own copies in temp dirs and must not meet these on the same ports or sockets.
for svc in snmpd openvswitch-switch haproxy prometheus-node-exporter etcd; do
  if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
  fi
done
command -v go >/dev/null || { echo "deps: go is not on PATH (expected /usr/local/go/bin)"; exit 1; }
