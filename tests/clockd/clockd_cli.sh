#!/usr/bin/env bash
# `emo clockd` from the command line, over a GPU whose state outlives processes: nvml:0 through the
# stand-in libnvidia-ml.so.1 (tests/nvml_standin; ctest puts it on LD_LIBRARY_PATH, and this script
# refuses to run against any other). Usage errors exit 2 and bad configs 1; `--check` touches no clock;
# a daemon killed with SIGKILL while a client holds a lock leaves it locked, and the next daemon resets
# it at start (replacing the stale socket); a client killed with SIGKILL is reset within its lease;
# SIGTERM resets every GPU and exits 0; a GPU that cannot be reset keeps the daemon from starting.
# usage: clockd_cli.sh EMO_BINARY
set -u
emo=$1
tmp=$(mktemp -d /tmp/emo-clockd-cli.XXXXXX)
pids=""
cleanup() {
  # Only children not reaped yet: their pids cannot have been reused.
  for p in $pids; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
pass=0
# reap PID: waits for a child of ours, forgets it, returns its exit status.
reap() {
  wait "$1" 2>/dev/null
  local rc=$?
  pids=$(echo " $pids " | sed "s/ $1 / /")
  return $rc
}
fail() { echo "FAIL: $*"; [ -s "$tmp/err" ] && sed 's/^/  | /' "$tmp/err" | head -5; fails=$((fails + 1)); }

unset EMO_NVML_STANDIN_FAIL EMO_NVML_STANDIN_NAME EMO_NVML_STANDIN_GPUS EMO_NVML_STANDIN_LATENCY_MS
export EMO_NVML_STANDIN_STATE=$tmp/state EMO_NVML_STANDIN_LOG=$tmp/nvml.log
calls() { grep -c " $1 " "$tmp/nvml.log" 2>/dev/null || true; }
locked_mhz() {
  awk '$1 == "end" { exit } $1 == "gpu" && $2 == 0 { for (i = 3; i < NF; i += 2) if ($i == "locked_mhz") print $(i + 1) }' "$tmp/state"
}
# wait_for SECONDS COMMAND...: true once COMMAND succeeds.
wait_for() {
  local n=$(($1 * 20))
  shift
  while [ "$n" -gt 0 ]; do
    "$@" && return 0
    sleep 0.05
    n=$((n - 1))
  done
  "$@"
}
# expect CODE DESCRIPTION -- COMMAND...
expect() {
  local want=$1 what=$2
  shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then fail "$what: exit $got, want $want"; return; fi
  if [ "$want" -eq 1 ] && ! grep -q '^error: ' "$tmp/err"; then fail "$what: no 'error:' line"; return; fi
  pass=$((pass + 1))
}
says() { grep -q -- "$2" "$tmp/err" || fail "$1: stderr lacks '$2'"; }

sock=$tmp/clockd.sock
cat >"$tmp/clockd.json" <<EOF
{"socket": "$sock", "lease_ms": 1500, "log": "$tmp/clockd.log",
 "gpus": [{"device": "nvml:0", "min_mhz": 1005, "max_mhz": 1980}]}
EOF

# ---- usage and bad configs ------------------------------------------------------------------------
expect 2 "no mode" -- "$emo" clockd
expect 2 "a config that does not exist" -- "$emo" clockd --config "$tmp/none.json"
expect 2 "--config with --check" -- "$emo" clockd --config "$tmp/clockd.json" --check "$tmp/clockd.json"
expect 2 "--status without --client" -- "$emo" clockd --status
echo 'not json' >"$tmp/bad.json"
expect 1 "a config that is not JSON" -- "$emo" clockd --config "$tmp/bad.json"
says "not JSON" "^error: $tmp/bad.json: not valid JSON"
echo '{"sockett": "/x", "gpus": []}' >"$tmp/typo.json"
expect 1 "a misspelt key" -- "$emo" clockd --check "$tmp/typo.json"
says "misspelt key" "^error: $tmp/typo.json:sockett: unknown key"
echo '{"gpus": [{"device": "nvml:0", "min_mhz": 1981, "max_mhz": 1990}]}' >"$tmp/range.json"
expect 1 "a range with no supported clock" -- "$emo" clockd --check "$tmp/range.json"
says "empty range" "gpus\[0\]: no clock nvml:0 supports"
expect 1 "--lock without a colon" -- "$emo" clockd --client "$sock" --lock 1410
says "bad --lock" "expected GPU:MHZ"
expect 1 "no daemon" -- "$emo" clockd --client "$sock" --status
says "no daemon" "^error: clockd:$sock: no such socket"

# ---- --check: opens the GPU, changes nothing -----------------------------------------------------
expect 0 "--check" -- "$emo" clockd --check "$tmp/clockd.json"
if ! grep -q " nvmlInit_v2 0$" "$tmp/nvml.log" 2>/dev/null; then
  echo "FAIL: the stand-in logged no nvmlInit_v2: is LD_LIBRARY_PATH its directory? (refusing to touch a real GPU)"
  exit 1
fi
grep -q "NVIDIA H100" "$tmp/out" || fail "--check does not name the GPU's model"
grep -q "1005..1980 MHz" "$tmp/out" || fail "--check does not show the allowed clocks"
[ "$(calls nvmlDeviceSetGpuLockedClocks)" = 0 ] && [ "$(calls nvmlDeviceResetGpuLockedClocks)" = 0 ] || fail "--check touched a clock"
[ ! -e "$sock" ] || fail "--check created the socket"

start_daemon() {
  "$emo" clockd --config "$tmp/clockd.json" 2>>"$tmp/daemon.err" &
  dpid=$!
  pids="$pids $dpid"
  wait_for 10 "$emo" clockd --client "$sock" --status >/dev/null 2>&1 || fail "the daemon did not come up"
}
start_client() {  # MHZ
  "$emo" clockd --client "$sock" --lock "0:$1" --hold-s 60 >"$tmp/client.out" 2>"$tmp/client.err" &
  cpid=$!
  pids="$pids $cpid"
  wait_for 10 grep -q "^locked gpu 0 at $1 MHz" "$tmp/client.out" || fail "the client did not lock $1 MHz"
}

# ---- a daemon killed with SIGKILL mid-lock; the next one resets at start -------------------------
start_daemon
start_client 1410
[ "$(locked_mhz)" = 1410 ] || fail "the client's lock is not on the GPU (locked_mhz $(locked_mhz))"
kill -9 "$dpid"
reap "$dpid"
[ "$(locked_mhz)" = 1410 ] || fail "expected the dead daemon to leave 1410 MHz locked, not $(locked_mhz)"
[ -S "$sock" ] || fail "expected a stale socket after SIGKILL"
# The client's renewal fails; stopping it, it cannot release: an error naming the socket, exit 1.
kill -TERM "$cpid"
reap "$cpid"
rc=$?
[ "$rc" -eq 1 ] || fail "the client of a dead daemon: exit $rc, want 1"
grep -q "^error: clockd:$sock#0" "$tmp/client.err" || { cp "$tmp/client.err" "$tmp/err"; fail "the client's error does not name the socket"; }
start_daemon
[ "$(locked_mhz)" = 0 ] || fail "the restarted daemon left the GPU locked at $(locked_mhz) MHz"
grep -q "op=remove-stale-socket" "$tmp/clockd.log" || fail "the log does not say the stale socket was replaced"
[ "$(grep -c 'op=start-reset mhz=- result=ok' "$tmp/clockd.log")" -ge 2 ] || fail "the log lacks the start resets"

# ---- a client killed with SIGKILL mid-lock: reset within the lease (1.5 s) -----------------------
start_client 1200
[ "$(locked_mhz)" = 1200 ] || fail "the second client's lock is not on the GPU"
kill -9 "$cpid"
reap "$cpid"
wait_for 1 test "$(locked_mhz)" = 0 || fail "a SIGKILLed client's GPU is still locked at $(locked_mhz) MHz after its lease"
grep -q "op=disconnect mhz=- result=ok" "$tmp/clockd.log" || fail "the log does not show the disconnect reset"

# ---- another client's GPU and an out-of-range clock, through the CLI -----------------------------
start_client 1500
expect 1 "a second client for a held GPU" -- "$emo" clockd --client "$sock" --lock 0:1410
says "held GPU" "busy: gpu 0 is held by pid $cpid"
[ "$(locked_mhz)" = 1500 ] || fail "the second client changed the holder's clock"

# ---- SIGTERM: every GPU reset, exit 0, socket removed --------------------------------------------
kill -TERM "$dpid"
reap "$dpid"
rc=$?
[ "$rc" -eq 0 ] || fail "the daemon on SIGTERM: exit $rc, want 0"
[ "$(locked_mhz)" = 0 ] || fail "SIGTERM left the GPU locked at $(locked_mhz) MHz"
[ ! -e "$sock" ] || fail "the socket is still there after SIGTERM"
grep -q "op=stop-reset mhz=- result=ok" "$tmp/clockd.log" || fail "the log lacks the stop reset"
kill -TERM "$cpid" 2>/dev/null
reap "$cpid"

# ---- failed resets: retried at start; a GPU that cannot be reset keeps the daemon down -----------
EMO_NVML_STANDIN_FAIL=nvmlDeviceResetGpuLockedClocks:2 start_daemon
grep -q "op=start-reset mhz=- result=error try=1/3" "$tmp/clockd.log" || fail "the failed start reset is not logged"
kill -TERM "$dpid"
reap "$dpid"
rc=$?
[ "$rc" -eq 0 ] || fail "a daemon whose start reset succeeded on retry: exit $rc, want 0"
printf 'emo-nvml-standin-state 1 clock CLOCK_MONOTONIC\ngpu 0 locked_mhz 1305\nend\n' >"$tmp/state"
EMO_NVML_STANDIN_FAIL=nvmlDeviceResetGpuLockedClocks expect 1 "a GPU that cannot be reset" -- timeout 20 "$emo" clockd --config "$tmp/clockd.json"
says "reset fails" "could not reset the SM clock at start"
[ ! -e "$sock" ] || fail "a daemon that could not reset its GPU created the socket"
grep -q "result=FAILED" "$tmp/clockd.log" || fail "the failed reset is not logged as FAILED"

[ "$fails" -eq 0 ] || { echo "$fails failed, $pass passed"; exit 1; }
echo "ok ($pass checks and the daemon's life)"
