#!/usr/bin/env bash
# `--json /dev/null` and `--json /dev/stdout` must leave the device node and
# the symlink as they are (a report is written through a device and to stdout,
# never by replacing the path). Run as root, a regression would turn the
# machine's /dev/null into a regular file, so the nodes tested are copies:
#   1. in a private mount namespace (unshare -m) with a tmpfs over /dev holding
#      a fresh null device node and a /dev/stdout symlink;
#   2. a null device node made with mknod in a scratch folder, and a symlink to
#      /proc/self/fd/1 beside it.
# Each part runs where it is permitted; exit 77 (skipped) when neither is.
# Usage: dev_nodes_survive.sh GPULEDGER
set -u
BIN="$1"
fail=0
ran=0
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

check_plan() {  # check_plan PATH: the plan report written to PATH, exit 0
  "$BIN" plan --model tiny-llama --quiet --json "$1"
}

# ---- 1. private mount namespace ----
if unshare -m --propagation private true 2>/dev/null; then
  ran=1
  if ! unshare -m --propagation private bash -c '
      set -e
      mount -t tmpfs none /dev
      mknod -m 666 /dev/null c 1 3
      ln -s /proc/self/fd/1 /dev/stdout
      "$1" plan --model tiny-llama --quiet --json /dev/null
      [ -c /dev/null ] || { echo "FAIL: /dev/null is no longer a character device" >&2; exit 1; }
      "$1" plan --model tiny-llama --quiet --json /dev/stdout > "$2/ns-stdout.json"
      [ -L /dev/stdout ] || { echo "FAIL: /dev/stdout is no longer a symlink" >&2; exit 1; }
      grep -q "\"schema\": \"gpuledger.report/1\"" "$2/ns-stdout.json" ||
        { echo "FAIL: --json /dev/stdout wrote no report to stdout" >&2; exit 1; }
      ls /dev | grep -q "\.tmp\." && { echo "FAIL: a temporary file was left in /dev" >&2; exit 1; }
      exit 0' _ "$BIN" "$scratch"; then
    echo "FAIL: the mount-namespace part failed" >&2
    fail=1
  else
    echo "ok: /dev/null and /dev/stdout survive --json in a private mount namespace"
  fi
else
  echo "skip: unshare -m is not permitted here"
fi

# ---- 2. a device node of our own ----
if mknod -m 666 "$scratch/null" c 1 3 2>/dev/null; then
  ran=1
  ln -s /proc/self/fd/1 "$scratch/stdout"
  check_plan "$scratch/null" || fail=1
  [ -c "$scratch/null" ] || { echo "FAIL: $scratch/null is no longer a character device" >&2; fail=1; }
  check_plan "$scratch/stdout" > "$scratch/out.json" || fail=1
  [ -L "$scratch/stdout" ] || { echo "FAIL: $scratch/stdout is no longer a symlink" >&2; fail=1; }
  grep -q '"schema": "gpuledger.report/1"' "$scratch/out.json" ||
    { echo "FAIL: --json to a symlink to stdout wrote no report there" >&2; fail=1; }
  mkfifo "$scratch/fifo"
  cat "$scratch/fifo" > "$scratch/fifo.json" &
  reader=$!
  check_plan "$scratch/fifo" || fail=1
  wait "$reader"
  [ -p "$scratch/fifo" ] || { echo "FAIL: the FIFO was replaced" >&2; fail=1; }
  grep -q '"schema": "gpuledger.report/1"' "$scratch/fifo.json" ||
    { echo "FAIL: no report came through the FIFO" >&2; fail=1; }
  if ls "$scratch" | grep -q '\.tmp\.'; then echo "FAIL: a temporary file was left" >&2; fail=1; fi
  [ "$fail" = 0 ] && echo "ok: a device node, a symlink to stdout and a FIFO survive --json"
else
  echo "skip: mknod is not permitted here"
fi

[ "$ran" = 0 ] && exit 77
exit "$fail"
