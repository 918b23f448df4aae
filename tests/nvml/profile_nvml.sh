#!/usr/bin/env bash
# `emo profile --device nvml:0 --command CMD` through the stand-in libnvidia-ml.so.1 (ctest puts it on
# LD_LIBRARY_PATH): the job runs once per clock of the plan with that clock locked, writes its trace to
# $EMO_PROFILE_DIR, and the folder holds <MHz>mhz/rank0.json + rank0.energy.csv whose energy grows
# faster at the higher clocks; the clock is reset after each run and whatever happens (a failing job,
# a job that writes no trace); `emo optimize --profiled` reads the folder.
# usage: profile_nvml.sh EMO_BINARY
set -u
emo=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$emo" synth infer-decode --ranks 1 --layers 4 -o "$tmp/in" >/dev/null || { echo "FAIL: synth"; exit 1; }
trace=$(ls "$tmp"/in/*.json)
fails=0
fail() { echo "FAIL: $*"; sed 's/^/  | /' "$tmp/err" | head -5; fails=$((fails + 1)); }
unset EMO_NVML_STANDIN_FAIL EMO_NVML_STANDIN_NAME EMO_NVML_STANDIN_GPUS EMO_NVML_STANDIN_LATENCY_MS
export EMO_NVML_STANDIN_STATE=$tmp/state EMO_NVML_STANDIN_LOG=$tmp/log
locked_mhz() { awk '$1 == "end" { exit } $1 == "gpu" && $2 == 0 { for (i = 3; i < NF; i += 2) if ($i == "locked_mhz") print $(i + 1) }' "$tmp/state"; }

# The "job": checks it runs at the clock it is told of, then writes the trace where it is asked to.
cat >"$tmp/job.sh" <<JOB
#!/bin/sh
set -e
[ -n "\$EMO_PROFILE_DIR" ] && [ -d "\$EMO_PROFILE_DIR" ]
echo "\$EMO_PROFILE_CLOCK_MHZ \$EMO_PROFILE_STEPS \$EMO_PROFILE_RANK" >>"$tmp/job.log"
sleep 0.3
cp "$trace" "\$EMO_PROFILE_DIR/rank0.json"
JOB
chmod +x "$tmp/job.sh"

"$emo" profile "$trace" --device nvml:0 -o "$tmp/prof" --command "$tmp/job.sh" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "profile --device nvml:0: exit $rc, want 0"
grep -q " nvmlDeviceSetGpuLockedClocks " "$tmp/log" 2>/dev/null || { echo "FAIL: no clock was locked through the stand-in"; exit 1; }
[ "$(locked_mhz)" = 0 ] || fail "the clock is left at $(locked_mhz) MHz"
clocks=$(awk '{print $1}' "$tmp/job.log" | tr '\n' ' ')
[ "$(wc -l <"$tmp/job.log")" -ge 2 ] || fail "the job ran $(wc -l <"$tmp/job.log") time(s): $clocks"
for f in $clocks; do
  [ -f "$tmp/prof/${f}mhz/rank0.json" ] || fail "no ${f}mhz/rank0.json"
  [ -f "$tmp/prof/${f}mhz/rank0.energy.csv" ] || fail "no ${f}mhz/rank0.energy.csv"
  grep -q " nvmlDeviceSetGpuLockedClocks 0 $f $f 0$" "$tmp/log" || fail "$f MHz was never locked"
done
# Each lock is followed by a reset before the next lock.
awk '/nvmlDeviceSetGpuLockedClocks/ { if (open) bad = 1; open = 1 } /nvmlDeviceResetGpuLockedClocks/ { open = 0 }
     END { exit bad || open }' "$tmp/log" || fail "a lock was not reset before the next one"
# The energy logs: the documented header, increasing rows, a mean power that grows with the clock.
python3 - "$tmp/prof" $clocks <<'PY' || fail "energy logs"
import sys
root, clocks = sys.argv[1], [int(c) for c in sys.argv[2:]]
power = {}
for c in clocks:
    lines = open(f"{root}/{c}mhz/rank0.energy.csv").read().splitlines()
    assert lines[0].startswith("# emo-energy-log/1 device=h100 rank=0"), lines[0]
    assert lines[1] == "t_ns,energy_mj", lines[1]
    rows = [tuple(map(int, l.split(","))) for l in lines[2:]]
    assert len(rows) >= 10, len(rows)
    assert all(b[0] > a[0] and b[1] >= a[1] for a, b in zip(rows, rows[1:]))
    assert rows[0][0] > 1_600_000_000 * 10**9, "t_ns is not on the realtime clock"
    power[c] = (rows[-1][1] - rows[0][1]) * 1e6 / (rows[-1][0] - rows[0][0])  # W
hi, lo = max(clocks), min(clocks)
assert power[hi] > 1.5 * power[lo], power
PY
"$emo" optimize "$trace" --device h100 --profiled "$tmp/prof" -o "$tmp/pol.json" >"$tmp/out" 2>"$tmp/err" \
  || fail "optimize --profiled on the recorded folder"

# A job that fails, one that writes no trace: exit 1, an error naming the clock, no folder, clock reset.
rm -f "$tmp/job.log"
"$emo" profile "$trace" --device nvml:0 -o "$tmp/bad" --command "exit 3" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] || fail "failing job: exit $rc, want 1"
grep -q "^error: .* MHz run: the command exited with status 3" "$tmp/err" || fail "failing job: no error naming it"
[ ! -e "$tmp/bad" ] || fail "failing job left a folder"
[ "$(locked_mhz)" = 0 ] || fail "failing job left the clock at $(locked_mhz) MHz"
"$emo" profile "$trace" --device nvml:0 -o "$tmp/bad" --command "true" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "wrote no trace rank0.json" "$tmp/err" || fail "a job writing no trace"
[ "$(locked_mhz)" = 0 ] || fail "no-trace job left the clock at $(locked_mhz) MHz"
# Without --command on a real GPU, and --command on the emulator: usage errors.
"$emo" profile "$trace" --device nvml:0 -o "$tmp/bad" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "give --command" "$tmp/err" || fail "nvml without --command"
"$emo" profile "$trace" --device emulated:h100 -o "$tmp/bad" --command true >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "only apply with --device nvml:N" "$tmp/err" || fail "--command on the emulator"
# A lock refused for want of root: the error says so, nothing is left locked.
EMO_NVML_STANDIN_FAIL=nvmlDeviceSetGpuLockedClocks:perm "$emo" profile "$trace" --device nvml:0 -o "$tmp/bad" \
  --command "$tmp/job.sh" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "root" "$tmp/err" || fail "a lock without permission"
[ "$(locked_mhz)" = 0 ] || fail "refused lock left the clock at $(locked_mhz) MHz"

# Through the node's daemon (no root in the job): the same folder, every lock made by `emo clockd`.
sock=$tmp/clockd.sock
cat >"$tmp/clockd.json" <<CFG
{"socket": "$sock", "lease_ms": 2000, "log": "$tmp/clockd.log", "gpus": [{"device": "nvml:0", "min_mhz": 345, "max_mhz": 1980}]}
CFG
"$emo" clockd --config "$tmp/clockd.json" 2>"$tmp/daemon.err" &
daemon=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
rm -f "$tmp/job.log"
: >"$tmp/log"
"$emo" profile "$trace" --device nvml:0 --clockd "$sock" -o "$tmp/prof2" --command "$tmp/job.sh" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "profile through clockd: exit $rc, want 0"
[ "$(ls "$tmp/prof2" | grep -c mhz)" = "$(ls "$tmp/prof" | grep -c mhz)" ] || fail "profile through clockd: other clock folders"
grep -q "clockd:$sock#0" "$tmp/out" || fail "profile through clockd: the output does not name the daemon"
lockers=$(awk '/nvmlDeviceSetGpuLockedClocks/ {print $1}' "$tmp/log" | sort -u)
[ "$lockers" = "$daemon" ] || fail "locks made by pid(s) $lockers, not the daemon ($daemon)"
grep -q "lock" "$tmp/clockd.log" || fail "the daemon logged no lock"
kill -TERM "$daemon"; wait "$daemon"
[ "$(locked_mhz)" = 0 ] || fail "after the daemon: the clock is at $(locked_mhz) MHz"

[ "$fails" -eq 0 ] && echo "profile on nvml:0: all checks passed"
exit $((fails > 0))
