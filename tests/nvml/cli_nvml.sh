#!/usr/bin/env bash
# The CLI on nvml:0 through the stand-in libnvidia-ml.so.1 (tests/nvml_standin; ctest puts it on
# LD_LIBRARY_PATH): `emo pack --device nvml:0` opens the GPU, picks its profile by product name and never
# touches its clock; a name no profile resembles and a failing nvmlInit_v2 are errors naming nvml:0; and
# `emo calibrate --device nvml:0`, whose (fake) benchmarks fail midway, still leaves the clock reset.
# usage: cli_nvml.sh EMO_BINARY TRACE
set -u
emo=$1
trace=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; sed 's/^/  | /' "$tmp/err" | head -5; fails=$((fails + 1)); }

unset EMO_NVML_STANDIN_FAIL EMO_NVML_STANDIN_NAME EMO_NVML_STANDIN_GPUS EMO_NVML_STANDIN_LATENCY_MS
export EMO_NVML_STANDIN_STATE=$tmp/state EMO_NVML_STANDIN_LOG=$tmp/log
calls() { grep -c " $1 " "$tmp/log" 2>/dev/null || true; }
locked_mhz() { awk '$1 == "end" { exit } $1 == "gpu" && $2 == 0 { for (i = 3; i < NF; i += 2) if ($i == "locked_mhz") print $(i + 1) }' "$tmp/state"; }

# pack: opens nvml:0 (the stand-in says H100: the h100 profile) and packs; no clock is touched.
"$emo" pack "$trace" --device nvml:0 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "pack --device nvml:0: exit $rc, want 0"
if ! grep -q " nvmlInit_v2 0$" "$tmp/log" 2>/dev/null; then
  echo "FAIL: the stand-in logged no nvmlInit_v2: is LD_LIBRARY_PATH its directory?"
  exit 1
fi
[ "$(calls nvmlInit_v2)" = "$(calls nvmlShutdown)" ] || fail "pack: $(calls nvmlInit_v2) inits, $(calls nvmlShutdown) shutdowns"
[ "$(calls nvmlDeviceSetGpuLockedClocks)" = 0 ] || fail "pack locked a clock"
grep -q "nvmlDeviceGetName 0 " "$tmp/log" || fail "pack did not ask for the product name"

# A product name no profile resembles, and a failing init: errors naming nvml:0, exit 1.
EMO_NVML_STANDIN_NAME="NVIDIA GeForce RTX 4090" "$emo" pack "$trace" --device nvml:0 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] || fail "pack on an unknown GPU: exit $rc, want 1"
grep -q '^error: nvml:0' "$tmp/err" || fail "pack on an unknown GPU: no 'error: nvml:0' line"
EMO_NVML_STANDIN_FAIL=nvmlInit_v2 "$emo" pack "$trace" --device nvml:0 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] || fail "pack with a failing nvmlInit_v2: exit $rc, want 1"
grep -q '^error: nvml:0: nvmlInit_v2 failed' "$tmp/err" || fail "pack with a failing nvmlInit_v2: no error naming it"

# calibrate: locks the clocks top down and runs the microbenchmarks, here a fake emo-microbench beside a
# copy of emo (where find_microbench looks first) that gets two runs through and then fails; the clock is
# reset on the way out all the same.
mkdir -p "$tmp/bin"
cp "$emo" "$tmp/bin/emo"
cat >"$tmp/bin/emo-microbench" <<'SH'
#!/usr/bin/env bash
n=$(cat "$(dirname "$0")/runs" 2>/dev/null || echo 0)
echo $((n + 1)) >"$(dirname "$0")/runs"
echo '{"phase":"start"}'
if [ "$n" -ge 2 ]; then echo "fake emo-microbench: no CUDA device" >&2; exit 3; fi
sleep 0.05
echo "{\"kind\":\"$1\",\"seconds\":0.05,\"iterations\":1000}"
SH
chmod +x "$tmp/bin/emo-microbench"
: >"$tmp/log"
"$tmp/bin/emo" calibrate --device nvml:0 --min-seconds 0.1 -o "$tmp/profile.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] || fail "calibrate with a failing emo-microbench: exit $rc, want 1"
grep -q '^error: .*fake emo-microbench: no CUDA device' "$tmp/err" || fail "calibrate: the error lacks the benchmark's stderr"
[ "$(grep -c '1980 MHz' "$tmp/err")" = 2 ] || fail "calibrate: want two runs at 1980 MHz before the failure"
grep -q " nvmlDeviceSetGpuLockedClocks 0 1980 1980 0$" "$tmp/log" || fail "calibrate did not lock 1980 MHz first"
[ "$(calls nvmlDeviceGetTotalEnergyConsumption)" -ge 4 ] || fail "calibrate read the energy counter less than twice a run"
[ "$(calls nvmlDeviceResetGpuLockedClocks)" -ge 1 ] || fail "calibrate did not reset the clock"
[ "$(locked_mhz)" = 0 ] || fail "calibrate left the clock locked at $(locked_mhz) MHz"
[ "$(calls nvmlInit_v2)" = "$(calls nvmlShutdown)" ] || fail "calibrate: $(calls nvmlInit_v2) inits, $(calls nvmlShutdown) shutdowns"
[ ! -e "$tmp/profile.json" ] || fail "calibrate wrote a profile"

[ -n "${EMO_CLI_NVML_SHOW:-}" ] && { cat "$tmp/err"; cat "$tmp/log"; }
[ "$fails" -eq 0 ] || exit 1
echo "ok"
