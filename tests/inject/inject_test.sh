#!/usr/bin/env bash
# libemo_inject.so, loaded as CUDA loads an injection, in a "job" whose kernel launches come through a
# stand-in CUPTI (tests/inject/driver.cpp): the steps are found after the warm-up, the policy's changes
# are issued from anchors enqueued before each step's start kernel, a job whose steps change loses the
# policy (and says so), and bad settings leave the job running untouched with an `error:` line.
# usage: inject_test.sh INJECT_DRIVER LIBEMO_INJECT NVML_STANDIN_DIR
set -u
driver=$1 lib=$2 nvml_dir=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
field() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# The policy of a step that launches kernel_a(float*) twice on stream 7, kernel_b on stream 9 and
# kernel_c: 4 kernel launches, the step's start kernel_a; two packs at 1200 and 1500 MHz.
policy() {  # policy FILE [step_start JSON]
  local start=${2-'{"name": "kernel_a(float*)", "stream": 7, "per_step": 2, "kernel_launches": 4, "offset_us": 0}'}
  cat > "$1" <<JSON
{"schema": "emo-policy/1", "device": "h100", "default_clock_mhz": 1980, "max_slowdown": 1.0, "reserve": 0,
 "switch_latency_ms": 0.1,
 "ranks": [{"rank": 0, "gpu_ops": 4${start:+, \"step_start\": $start}}],
 "packs": [{"rank": 0, "clock_mhz": 1200, "issue_at_us": 0, "first": {"index": 0}, "last": {"index": 1}},
           {"rank": 0, "clock_mhz": 1500, "issue_at_us": 400, "first": {"index": 2}, "last": {"index": 3}}],
 "predicted": {"policy": {"time_us": 1000, "energy_j": 1}}}
JSON
}
policy "$dir/policy.json"

# 1. Two warm-up iterations of other kernels, then 20 steps: synced at the second whole step, 19 anchors.
out=$(EMO_POLICY=$dir/policy.json EMO_CLOCK=dry-run EMO_BLOCK_STEPS=4 EMO_REPORT=$dir/r1.json "$driver" "$lib" 2 20 2> "$dir/e1")
[ "$out" = "anchors 19" ] || bad "dry run: expected 19 anchors, got '$out' ($(cat "$dir/e1"))"
grep -q "synced after" "$dir/e1" || bad "dry run: stderr does not say it synced: $(cat "$dir/e1")"
[ -s "$dir/r1.json" ] || bad "dry run: no report written"
if [ -s "$dir/r1.json" ]; then
  [ "$(field "$dir/r1.json" 'j["steps"]')" = 19 ] || bad "dry run: report steps $(field "$dir/r1.json" 'j["steps"]'), expected 19"
  # Both of the policy's clocks (a loaded machine's noisy 1 ms steps may also trip the fallback: 1980).
  clocks=$(field "$dir/r1.json" '{1200, 1500} <= set(i["clock_mhz"] for i in j["issues"])')
  [ "$clocks" = "True" ] || bad "dry run: the policy's clocks 1200 and 1500 were not both issued: $(field "$dir/r1.json" 'j["issues"][:4]')"
  grep -q '"lost"' "$dir/r1.json" && bad "dry run: a regular job lost its steps"
fi

# 2. The job changes after step 10 (one more kernel per step): the marker is lost, the policy dropped.
out=$(EMO_POLICY=$dir/policy.json EMO_CLOCK=dry-run EMO_REPORT=$dir/r2.json "$driver" "$lib" 0 20 10 2> "$dir/e2")
[ "$out" = "anchors 10" ] || bad "changed job: expected 10 anchors (steps 2-11), got '$out'"
grep -q "no longer match the policy" "$dir/e2" || bad "changed job: not said on stderr: $(cat "$dir/e2")"
[ -s "$dir/r2.json" ] && [ -n "$(field "$dir/r2.json" 'j.get("lost", "")')" ] || bad "changed job: report has no 'lost'"

# 3. Through NVML (the stand-in): the policy's clocks locked, and the clock reset at the end.
log=$dir/nvml.log
out=$(LD_LIBRARY_PATH=$nvml_dir EMO_NVML_STANDIN_LOG=$log EMO_NVML_STANDIN_STATE=$dir/nvml.state EMO_POLICY=$dir/policy.json \
      EMO_BLOCK_STEPS=4 EMO_VERIFY=1 EMO_REPORT=$dir/r3.json "$driver" "$lib" 1 30 2> "$dir/e3")
grep -q "nvmlDeviceSetGpuLockedClocks 0 1200 1200" "$log" || bad "nvml: 1200 MHz never locked: $(cat "$dir/e3")"
grep -q "nvmlDeviceSetGpuLockedClocks 0 1500 1500" "$log" || bad "nvml: 1500 MHz never locked"
[ "$(grep -E 'nvmlDevice(SetGpuLockedClocks|ResetGpuLockedClocks)' "$log" | tail -1 | awk '{print $2}')" = nvmlDeviceResetGpuLockedClocks ] ||
  bad "nvml: the last clock call is not the reset: $(grep -E 'LockedClocks' "$log" | tail -2)"

# 4. Bad settings: an error line, no report, the job itself runs on (exit 0) with nothing applied.
expect_error() {  # expect_error PATTERN ENV...
  local pattern=$1
  shift
  local o
  o=$(env "$@" EMO_REPORT=$dir/bad.json "$driver" "$lib" 0 5 2> "$dir/eb")
  local rc=$?
  [ $rc = 0 ] || bad "$*: the job's exit code changed to $rc"
  [ "$o" = "anchors 0" ] || bad "$*: anchors were enqueued: $o"
  grep -q "emo inject: error:.*$pattern" "$dir/eb" || bad "$*: stderr lacks 'error: ... $pattern': $(cat "$dir/eb")"
  [ -e "$dir/bad.json" ] && bad "$*: a report was written"
  rm -f "$dir/bad.json"
}
expect_error "EMO_POLICY" EMO_CLOCK=dry-run
expect_error "no-such" EMO_POLICY=$dir/no-such.json EMO_CLOCK=dry-run
policy "$dir/old.json" ""
expect_error "step_start" EMO_POLICY=$dir/old.json EMO_CLOCK=dry-run
policy "$dir/zero.json" '{"name": "kernel_a(float*)", "per_step": 0, "kernel_launches": 4}'
expect_error "per_step" EMO_POLICY=$dir/zero.json EMO_CLOCK=dry-run
expect_error "has no rank 3" EMO_POLICY=$dir/policy.json EMO_CLOCK=dry-run EMO_RANK=3
expect_error "EMO_RANK" EMO_POLICY=$dir/policy.json EMO_CLOCK=dry-run EMO_RANK=x
expect_error "EMO_CLOCK" EMO_POLICY=$dir/policy.json EMO_CLOCK=sudo
expect_error "EMO_BLOCK_STEPS" EMO_POLICY=$dir/policy.json EMO_CLOCK=dry-run EMO_BLOCK_STEPS=-4
expect_error "EMO_VERIFY" EMO_POLICY=$dir/policy.json EMO_CLOCK=dry-run EMO_VERIFY=yes
exit $fail
