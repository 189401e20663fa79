#!/usr/bin/env bash
# The one-command lab demo (Debian, as root). See docs/lab.md.
#
#   bash scripts/lab.sh up       install packages, build, start the lab in the background,
#                                tell the story live (about two minutes); idempotent
#   bash scripts/lab.sh status   what runs, the group (dump-groups), the controller's table;
#                                exits 1 when no lab runs
#   bash scripts/lab.sh down     stop the lab and remove everything it made; idempotent
#
# The lab is held by a supervisor process (`lab serve`, cmd/lab) in its own session; its
# state is in /run/flowweight-lab, its binaries, Open vSwitch and logs in /var/tmp/fwlab.*.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
STATE=/run/flowweight-lab

usage() { echo "usage: bash scripts/lab.sh up|status|down" >&2; exit 2; }
[ $# -eq 1 ] || usage
[ "$(id -u)" = 0 ] || { echo "lab.sh: needs root (namespaces, cgroups, Open vSwitch)" >&2; exit 1; }

# labbin prints the lab command of the running lab, or builds one into a temp dir (removed
# on exit) when the recorded one is gone.
tmpbin=""
cleanup() { [ -z "$tmpbin" ] || rm -rf "$tmpbin"; }
trap cleanup EXIT
labbin() {
  local dir=""
  if [ -f "$STATE/state.json" ]; then
    dir=$(sed -n 's/^ *"dir": *"\(.*\)",\{0,1\}$/\1/p' "$STATE/state.json")
  fi
  if [ -n "$dir" ] && [ -x "$dir/bin/lab" ]; then
    echo "$dir/bin/lab"
    return
  fi
  tmpbin=$(mktemp -d /var/tmp/fwlab-bin.XXXXXX)
  go build -o "$tmpbin/lab" ./cmd/lab
  echo "$tmpbin/lab"
}

case $1 in
up)
  bash scripts/deps.sh
  dir=$(mktemp -d /var/tmp/fwlab.XXXXXX)
  echo "building controller, probe, backendd and the lab supervisor into $dir/bin"
  for p in controller probe cmd/backendd cmd/lab; do
    if ! go build -o "$dir/bin/$(basename "$p")" "./$p"; then
      rm -rf "$dir"
      exit 1
    fi
  done
  # `lab up` removes $dir again when a lab already runs.
  exec "$dir/bin/lab" up -state "$STATE" -dir "$dir"
  ;;
status)
  if [ ! -f "$STATE/state.json" ]; then
    echo "no lab is running (no $STATE/state.json)"
    exit 1
  fi
  bin=$(labbin)
  "$bin" status -state "$STATE"
  ;;
down)
  if [ ! -f "$STATE/state.json" ]; then
    echo "no lab is running (no $STATE/state.json): nothing to do"
    exit 0
  fi
  bin=$(labbin)
  # The binary lives in the lab directory that down removes; a running program may be
  # unlinked.
  "$bin" down -state "$STATE"
  ;;
*) usage ;;
esac
