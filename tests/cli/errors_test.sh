#!/usr/bin/env bash
# The CLI contract on bad input: `error:` on stderr and exit 1 for bad files,
# exit 2 for usage errors, never a crash and never a partial output file.
# usage: errors_test.sh EMO_BINARY [SHARED_DIR]
set -u
emo=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass=0

# expect CODE DESCRIPTION -- COMMAND...
expect() {
  local want=$1 what=$2
  shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, want $want"; sed 's/^/  | /' "$tmp/err" | head -5; fails=$((fails + 1)); return
  fi
  if [ "$want" -eq 1 ] && ! grep -q '^error: ' "$tmp/err"; then
    echo "FAIL: $what: no 'error:' line"; sed 's/^/  | /' "$tmp/err" | head -5; fails=$((fails + 1)); return
  fi
  pass=$((pass + 1))
}

# says WHAT PATTERN: the last command's stderr names PATTERN (which check refused it).
says() {
  grep -q -- "$2" "$tmp/err" || { echo "FAIL: $1: stderr lacks '$2'"; sed 's/^/  | /' "$tmp/err" | head -3; fails=$((fails + 1)); }
}

printf '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,' >"$tmp/truncated.json"
echo 'this is not json' >"$tmp/notjson.json"
echo '{"traceEvents":[]}' >"$tmp/empty.json"
echo '{"schemaVersion":1}' >"$tmp/noevents.json"
echo '[1,2,3]' >"$tmp/array.json"
printf '\x1f\x8b\x08\x00garbage' >"$tmp/badgz.json.gz"
: >"$tmp/zero.json"

expect 1 "truncated file" -- "$emo" analyze "$tmp/truncated.json"
expect 1 "non-JSON file" -- "$emo" analyze "$tmp/notjson.json"
expect 1 "empty traceEvents" -- "$emo" analyze "$tmp/empty.json"
expect 1 "no traceEvents" -- "$emo" analyze "$tmp/noevents.json"
expect 1 "top-level array" -- "$emo" analyze "$tmp/array.json"
expect 1 "corrupt gzip" -- "$emo" analyze "$tmp/badgz.json.gz"
expect 1 "empty file" -- "$emo" analyze "$tmp/zero.json"
expect 1 "unreadable path" -- "$emo" analyze "$tmp/does-not-exist.json"
# A folder stands for the trace files in it (byte order): here the first, array.json, is refused.
expect 1 "folder of bad traces" -- "$emo" analyze "$tmp"
says "folder of bad traces" "^error: $tmp/array.json: not a PyTorch profiler trace"
mkdir -p "$tmp/notraces" && echo 'not a trace' >"$tmp/notraces/README.txt" && echo '{}' >"$tmp/notraces/.hidden.json"
expect 1 "folder without trace files" -- "$emo" analyze "$tmp/notraces"
says "folder without trace files" "^error: $tmp/notraces: no trace files in this folder"
mkdir -p "$tmp/runs/base" "$tmp/runs/test"
expect 1 "folder of run folders" -- "$emo" analyze "$tmp/runs"
says "folder of run folders" "^note: it holds the folders base, test: give the one that holds one run's rank files"
# A PyTorch execution trace (ExecutionTraceObserver) beside the Kineto trace: named for what it is.
echo '{"schema": "1.0.1", "pid": 1, "nodes": [{"name": "x", "id": 1}]}' >"$tmp/et.json"
expect 1 "an execution trace" -- "$emo" analyze "$tmp/et.json"
says "an execution trace" "^error: $tmp/et.json: a PyTorch execution trace (schema and nodes, no traceEvents), not a Kineto trace"
expect 1 "error leaves no json file" -- "$emo" analyze "$tmp/notjson.json" --json "$tmp/should-not-exist.json"
[ -e "$tmp/should-not-exist.json" ] && { echo "FAIL: partial output left behind"; fails=$((fails + 1)); }
expect 2 "no subcommand" -- "$emo"
expect 2 "unknown subcommand" -- "$emo" frobnicate
expect 2 "analyze without traces" -- "$emo" analyze
says "analyze without traces" "^error: traces is required"
says "analyze without traces" '^note: run `emo analyze --help` for the options'
# Usage errors say `error:` and where the help is, as every other error (exit 2).
expect 2 "an unknown flag" -- "$emo" run --unknown-flag
says "an unknown flag" "^error: The following argument was not expected: --unknown-flag"
says "an unknown flag" '^note: run `emo run --help` for the options'
expect 2 "no subcommand, said" -- "$emo"
says "no subcommand, said" '^error: .*subcommand'
expect 0 "help is not an error" -- "$emo" run --help
if grep -q "^error:" "$tmp/err"; then echo "FAIL: --help printed an error"; fails=$((fails + 1)); fi
expect 0 "help" -- "$emo" --help
expect 0 "analyze help" -- "$emo" analyze --help

# A good trace, then bad what-ifs on it.
cat >"$tmp/good.json" <<'JSON'
{"traceEvents":[
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":0,"dur":5,"args":{"correlation":1}},
{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":10,"dur":100,"args":{"device":0,"stream":7,"correlation":1}}
]}
JSON
expect 0 "good trace" -- "$emo" analyze "$tmp/good.json" --json "$tmp/good.out.json"
python3 - "$tmp/good.out.json" <<'PY' || fails=$((fails + 1))
import json, sys
j = json.load(open(sys.argv[1]))
need = ["events", "nodes", "edges", "ranks", "measured_span_us", "replayed_span_us", "replay_error_pct",
        "critical_path", "import_stats"]
missing = [k for k in need if k not in j]
assert not missing, f"FAIL: analyze --json lacks {missing}"
assert "length_us" in j["critical_path"] and "breakdown" in j["critical_path"]
assert abs(j["measured_span_us"] - 110) < 1e-6, j["measured_span_us"]
PY
expect 0 "whatif" -- "$emo" whatif "$tmp/good.json" --scale gemm=2 --json "$tmp/w.json"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['predicted_span_us']==210 and j['baseline_span_us']==110, j" "$tmp/w.json" \
  || { echo "FAIL: whatif numbers"; fails=$((fails + 1)); }
expect 1 "whatif selector matching nothing" -- "$emo" whatif "$tmp/good.json" --scale nothing_like_this=2
expect 1 "whatif bad factor" -- "$emo" whatif "$tmp/good.json" --scale gemm=fast
expect 1 "whatif bad regex" -- "$emo" whatif "$tmp/good.json" --scale '(=2'
expect 1 "unknown step" -- "$emo" analyze "$tmp/good.json" --step 99
# A kernel that starts before its launch: analyzed, but the summary says the launch edge was left out.
sed 's/"ts":10,"dur":100/"ts":-20,"dur":100/' "$tmp/good.json" >"$tmp/early.json"
expect 0 "kernel before its launch" -- "$emo" analyze "$tmp/early.json"
grep -q '^note: 1 dependencies were left out' "$tmp/out" || { echo "FAIL: no note on the contradicted launch"; fails=$((fails + 1)); }
# A factor whose scaled durations would not fit in 64-bit nanoseconds (it used to wrap round and
# predict a shorter step).
expect 1 "whatif huge factor" -- "$emo" whatif "$tmp/good.json" --scale gemm=1e308
says "whatif huge factor" "is over 1000000"
# whatif --topology: the topology file's errors, and the flags that need each other.
"$emo" synth train-dp --ranks 4 -o "$tmp/dp4" >/dev/null
echo '{"gpus_per_host": 2, "intra_host": {"bandwidth_gb_s": 350, "latency_us": 1}}' >"$tmp/topo_small.json"
echo '{"gpus_per_host": 4, "intra_host": {"bandwidth_gb_s": 350, "latency_us": 1}}' >"$tmp/topo4.json"
echo '{"gpus_per_host": 2, "intra_host": {"bandwidth_gb_s": 350, "latency_us": 1}, "inter_host": {"bandwidth_gb_s": 12.5, "latency_us": 10}}' >"$tmp/topo2x2.json"
echo '{"gpus_per_host": 4, "intra_host": {"bandwidth_gb_s": "fast", "latency_us": 1}}' >"$tmp/topo_bad.json"
expect 2 "whatif asks nothing" -- "$emo" whatif "$tmp/dp4"/*.json
says "whatif asks nothing" "give --scale SELECTOR=FACTOR and/or --topology FILE"
expect 1 "whatif topology not a file" -- "$emo" whatif "$tmp/dp4"/*.json --topology "$tmp/nope.json"
expect 1 "whatif topology bad field" -- "$emo" whatif "$tmp/dp4"/*.json --topology "$tmp/topo_bad.json"
says "whatif topology bad field" "intra_host.bandwidth_gb_s"
expect 1 "whatif topology without inter_host" -- "$emo" whatif "$tmp/dp4"/*.json --topology "$tmp/topo_small.json"
says "whatif topology without inter_host" "cross hosts but the topology has no 'inter_host'"
expect 2 "whatif recorded topology alone" -- "$emo" whatif "$tmp/dp4"/*.json --recorded-topology "$tmp/topo4.json"
says "whatif recorded topology alone" "needs --topology"
expect 1 "whatif topology as its own output" -- "$emo" whatif "$tmp/dp4"/*.json --topology "$tmp/topo4.json" --json "$tmp/topo4.json"
grep -q gpus_per_host "$tmp/topo4.json" || { echo "FAIL: the topology file was overwritten"; fails=$((fails + 1)); }
expect 0 "whatif topology" -- "$emo" whatif "$tmp/dp4"/*.json --topology "$tmp/topo2x2.json" --recorded-topology "$tmp/topo4.json" --json "$tmp/wt.json"
python3 - "$tmp/wt.json" <<'PY' || { echo "FAIL: whatif topology numbers"; fails=$((fails + 1)); }
import json, sys
j = json.load(open(sys.argv[1]))
t = j["topology"]
assert t["transfers"] == "measured_scaled" and t["collectives_modeled"] > 0, t
assert t["median_error_pct"] < 25, t                      # the recorded machine's model fits the transfers
ar = [k for k in t["by_kind"] if k["kind"] == "all_reduce"][0]
assert ar["predicted_transfer_us"] > 5 * ar["measured_transfer_us"], ar   # 12.5 GB/s network vs 350 GB/s NVLink
assert j["predicted_span_us"] > j["baseline_span_us"], j
assert t["fitted_links"][0]["link"] == "intra_host" and abs(t["fitted_links"][0]["bandwidth_gb_s"] - 350) < 35, t
PY
expect 0 "whatif largest factor" -- "$emo" whatif "$tmp/good.json" --scale gemm=1e6 --json "$tmp/w6.json"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['predicted_span_us']==1e8+10, j" "$tmp/w6.json" \
  || { echo "FAIL: whatif 1e6 numbers"; fails=$((fails + 1)); }

# calibrate: only a device that runs benchmarks will do; the note names the accepted forms.
expect 1 "calibrate unknown device" -- "$emo" calibrate --device no-such-gpu
grep -q '^note: .*nvml:N' "$tmp/err" || { echo "FAIL: calibrate: no note naming nvml:N"; fails=$((fails + 1)); }
expect 1 "calibrate bad nvml index" -- "$emo" calibrate --device nvml:x
expect 2 "calibrate without --device" -- "$emo" calibrate

# pack / optimize / evaluate: unknown devices, impossible targets, foreign or stale policies.
"$emo" synth train-dp --ranks 1 --layers 2 --steps 2 -o "$tmp/tdp" >/dev/null
"$emo" synth train-dp --ranks 1 --layers 3 --steps 2 -o "$tmp/tdp3" >/dev/null
expect 1 "pack unknown device" -- "$emo" pack "$tmp/tdp/train-dp_rank0.json" --device b900
expect 1 "pack bad backend" -- "$emo" pack "$tmp/tdp/train-dp_rank0.json" --device foo:1
for bad in "emulated:h100@1:host=" "emulated:h100@1:host=x" "emulated:h100:host=-1" "emulated:h100:host=nan" "emulated:h100:host=1e9"; do
  expect 1 "evaluate-style device $bad" -- "$emo" pack "$tmp/tdp/train-dp_rank0.json" --device "$bad"
  says "device $bad" "after :host= must be a factor"
done
expect 1 "optimize negative slowdown" -- "$emo" optimize "$tmp/tdp/train-dp_rank0.json" --max-slowdown -0.1
# Numbers that are not numbers, or too large to mean anything, are refused by name (NaN used to pass).
t0="$tmp/tdp/train-dp_rank0.json"
expect 1 "optimize NaN slowdown" -- "$emo" optimize "$t0" --max-slowdown nan -o "$tmp/nan.json"
says "optimize NaN slowdown" "^error: --max-slowdown"
[ -e "$tmp/nan.json" ] && { echo "FAIL: a policy was written for a NaN target"; fails=$((fails + 1)); }
# Profiling where the plan runs (docs/profiling.md): the dataloader step's first plan runs at 1410 MHz,
# between the plan's 1320 and 1785, so emo profile writes that clock too. Without it in the folder, or
# with --no-refine-profile, the policy's energy rests on the curve between clocks: a warning names the
# clock to record (or the flag to drop); with it, no such warning.
"$emo" synth dataloader --ranks 2 -o "$tmp/dl" >/dev/null
"$emo" profile "$tmp/dl" -o "$tmp/dlprof" >"$tmp/out" 2>&1 || { echo "FAIL: profile dataloader"; fails=$((fails + 1)); }
grep -q "^profiling runs at 1980,1785,1[3-9][0-9][0-9],1320,990 MHz" "$tmp/out" \
  || { echo "FAIL: profile: no clock where the plan runs"; sed 's/^/  | /' "$tmp/out" | head -3; fails=$((fails + 1)); }
expect 0 "optimize --profiled with the plan's clock" -- "$emo" optimize "$tmp/dl" --profiled "$tmp/dlprof" -o "$tmp/rp.json"
grep -q "runs mostly at" "$tmp/err" && { echo "FAIL: refined runs still warned"; fails=$((fails + 1)); }
refined=$(ls "$tmp/dlprof" | grep -v -e '^1980mhz$' -e '^1785mhz$' -e '^1320mhz$' -e '^990mhz$')
rm -rf "$tmp/dlprof/$refined"
expect 0 "optimize --profiled without it" -- "$emo" optimize "$tmp/dl" --profiled "$tmp/dlprof" -o "$tmp/rp.json"
says "optimize --profiled without it" "^warning: the policy runs mostly at ${refined%mhz} MHz.*record one more run at ${refined%mhz} MHz"
expect 0 "optimize --no-refine-profile" -- "$emo" optimize "$tmp/dl" --no-refine-profile -o "$tmp/rp.json"
says "optimize --no-refine-profile" "^warning: the policy runs mostly at .*without --no-refine-profile"
expect 1 "run NaN slowdown" -- "$emo" run "$t0" --max-slowdown nan -o "$tmp/nanrun"
says "run NaN slowdown" "^error: --max-slowdown"
for bad in "--min-pack nan" "--min-pack 1e308" "--min-pack-ms -1" "--min-pack-ms inf" "--critical-slack-us nan" \
           "--critical-slack-us -5" "--critical-slack-us 1e308"; do
  expect 1 "pack $bad" -- "$emo" pack "$t0" --device h100 $bad
  says "pack $bad" "^error: ${bad%% *}"
done
printf 'stage,instruction,frequency,time,energy\n0,forward,1410,0.010,3.0\n0,forward,1200,0.011,2.8\n0,backward,1410,0.020,6.0\n0,backward,1200,0.022,5.6\n' >"$tmp/prof.csv"
expect 1 "model-check negative --worst" -- "$emo" model-check "$tmp/prof.csv" --format perseus --worst -1
says "model-check negative --worst" "^error: --worst"
expect 1 "model-check NaN --min-clock" -- "$emo" model-check "$tmp/prof.csv" --format perseus --calibrate --min-clock nan
says "model-check NaN --min-clock" "^error: --min-clock"
expect 2 "calibrate endless benchmarks" -- "$emo" calibrate --device emulated:h100 --min-seconds inf
says "calibrate endless benchmarks" "^error: --min-seconds"
expect 2 "calibrate hour-long benchmarks" -- "$emo" calibrate --device emulated:h100 --min-seconds 3601
says "calibrate hour-long benchmarks" "^error: --min-seconds"
expect 0 "pipeline" -- "$emo" pipeline --profile "$tmp/prof.csv" --microbatches 4 --blocking-power 80
expect 1 "pipeline too many microbatches" -- "$emo" pipeline --profile "$tmp/prof.csv" --microbatches 100000 --blocking-power 80
says "pipeline too many microbatches" "^error: --microbatches: must be at most 4096"
expect 1 "pipeline absurd blocking power" -- "$emo" pipeline --profile "$tmp/prof.csv" --microbatches 4 --blocking-power 1e300
says "pipeline absurd blocking power" "^error: --blocking-power"
expect 1 "pipeline NaN blocking power" -- "$emo" pipeline --profile "$tmp/prof.csv" --microbatches 4 --blocking-power nan
says "pipeline NaN blocking power" "^error: --blocking-power"
expect 0 "pipeline plan for Perseus" -- "$emo" pipeline --profile "$tmp/prof.csv" --microbatches 4 --blocking-power 80 --max-slowdown 0.1 --plan "$tmp/freqs.py"
# Perseus' PointSolution scheduler eval()s the file: one list per stage of (instruction, MHz) pairs.
python3 -c "
import sys
s = eval(open(sys.argv[1]).read())
assert isinstance(s, list) and s, s
for stage in s:
    assert len(stage) == 8 and all(isinstance(n, str) and n in ('forward', 'backward') and isinstance(f, int) for n, f in stage), stage
" "$tmp/freqs.py" || { echo "FAIL: pipeline plan for Perseus: not the list Perseus reads"; fails=$((fails + 1)); }
# '-' is stdout for the plan too (Perseus' .py form), without the text summary; not beside --json -.
expect 0 "pipeline plan on stdout" -- "$emo" pipeline --profile "$tmp/prof.csv" --microbatches 4 --blocking-power 80 --max-slowdown 0.1 --plan -
cmp -s "$tmp/out" "$tmp/freqs.py" || { echo "FAIL: pipeline --plan -: not the .py plan alone"; fails=$((fails + 1)); }
expect 2 "pipeline plan and json on stdout" -- "$emo" pipeline --profile "$tmp/prof.csv" --microbatches 4 --blocking-power 80 --plan - --json -
says "pipeline plan and json on stdout" "^error: --plan -: standard output is also --json's"
expect 1 "pipeline plan faster than possible" -- "$emo" pipeline --profile "$tmp/prof.csv" --microbatches 4 --blocking-power 80 --plan-at 1e-9
says "pipeline plan faster than possible" "^error: --plan-at: no plan finishes within"
# A pipeline option given is used or refused: 0 (or NaN) used to mean "the default" for --unit-time
# and --stages; CLI11 reads "nan" and "inf" as numbers, so each is checked by name.
pp=(pipeline --profile "$tmp/prof.csv")
for bad in "--unit-time 0" "--unit-time -0.001" "--unit-time nan" "--unit-time inf" "--unit-time 3601" \
           "--unit-time 0.5" "--stages 0" "--stages -1" "--plan-at 0" "--plan-at -1" "--plan-at nan" \
           "--plan-at inf" "--max-slowdown -0.1" "--max-slowdown nan" "--max-slowdown inf"; do
  expect 1 "pipeline $bad" -- "$emo" "${pp[@]}" --microbatches 4 --blocking-power 80 $bad
  says "pipeline $bad" "^error: ${bad%% *}"
done
says "pipeline --max-slowdown inf" "^error: --max-slowdown: must be from 0 to 100 .*, got inf"
for bad in "-1" "nan" "inf" "-inf"; do
  expect 1 "pipeline --blocking-power $bad" -- "$emo" "${pp[@]}" --microbatches 4 --blocking-power "$bad"
  says "pipeline --blocking-power $bad" "^error: --blocking-power: must be from 0 to 1e5 W, got"
done
for bad in 0 -3; do
  expect 1 "pipeline --microbatches $bad" -- "$emo" "${pp[@]}" --microbatches "$bad" --blocking-power 80
  says "pipeline --microbatches $bad" "^error: --microbatches: must be >= 1"
done
expect 1 "pipeline --unit-time 0" -- "$emo" "${pp[@]}" --microbatches 4 --blocking-power 80 --unit-time 0
says "pipeline --unit-time 0" "^error: --unit-time: must be more than 0 and at most 3600 seconds, got 0"
expect 1 "pipeline unit coarser than an instruction" -- "$emo" "${pp[@]}" --microbatches 4 --blocking-power 80 --unit-time 0.5
says "pipeline unit coarser than an instruction" "^error: --unit-time: 0.5 s is longer than stage 0 .* takes in"
printf 'time,energy\n0.12,36\n0.13,35\n' >"$tmp/pub.csv"
expect 0 "pipeline --compare --tolerance" -- "$emo" "${pp[@]}" --microbatches 4 --blocking-power 80 --compare "$tmp/pub.csv" --tolerance 0.01
for bad in "-1e-6" "nan" "inf"; do
  expect 1 "pipeline --tolerance $bad" -- "$emo" "${pp[@]}" --microbatches 4 --blocking-power 80 --compare "$tmp/pub.csv" --tolerance "$bad"
  says "pipeline --tolerance $bad" "^error: --tolerance: must be a finite number >= 0"
done
# A tolerance without --compare would be read and ignored: a usage error, as --plan-at with --max-slowdown.
expect 2 "pipeline --tolerance without --compare" -- "$emo" "${pp[@]}" --microbatches 4 --blocking-power 80 --tolerance 0.01
says "pipeline --tolerance without --compare" "tolerance requires --compare"
expect 2 "pipeline --plan-at with --max-slowdown" -- "$emo" "${pp[@]}" --microbatches 4 --blocking-power 80 --plan-at 1 --max-slowdown 0.1

# A stage profile's rows: a duplicate, a value out of range or not a number, an empty or header-only
# file is an error naming the file and line (a duplicate: both lines), never a row quietly used.
phead='stage,instruction,frequency,time,energy'
{ cat "$tmp/prof.csv"; echo '0,forward,1410,0.012,3.1'; } >"$tmp/dup.csv"
expect 1 "pipeline profile with a duplicate row" -- "$emo" pipeline --profile "$tmp/dup.csv" --microbatches 4 --blocking-power 80
says "pipeline profile with a duplicate row" "^error: $tmp/dup.csv:line 6: stage 0 forward at 1410 MHz is also on line 2$"
i=0
for row in "0,forward,1410,0,3.0|column 'time': must be > 0" "0,forward,1410,-0.01,3.0|column 'time': must be > 0" \
           "0,forward,1410,nan,3.0|column 'time': not a number" "0,forward,1410,0.01,0|column 'energy': must be > 0" \
           "0,forward,1410,0.01,-3|column 'energy': must be > 0" "0,forward,1410,0.01,NaN|column 'energy': not a number" \
           "0,forward,1410,0.01,|column 'energy': empty" "1.5,forward,1410,0.01,3|column 'stage': must be a whole number" \
           "-1,forward,1410,0.01,3|column 'stage': must be a whole number" \
           "0,forward,1410.5,0.01,3|column 'frequency': must be a whole number of MHz"; do
  i=$((i + 1))
  printf '%s\n0,backward,1410,0.02,6\n%s\n' "$phead" "${row%%|*}" >"$tmp/badrow$i.csv"
  expect 1 "pipeline profile row ${row%%|*}" -- "$emo" pipeline --profile "$tmp/badrow$i.csv" --microbatches 4 --blocking-power 80
  says "pipeline profile row ${row%%|*}" "^error: $tmp/badrow$i.csv:line 3: ${row#*|}"
done
: >"$tmp/emptyprof.csv"
expect 1 "pipeline empty profile" -- "$emo" pipeline --profile "$tmp/emptyprof.csv" --microbatches 4 --blocking-power 80
says "pipeline empty profile" "^error: $tmp/emptyprof.csv: empty file"
echo "$phead" >"$tmp/headeronly.csv"
expect 1 "pipeline header-only profile" -- "$emo" pipeline --profile "$tmp/headeronly.csv" --microbatches 4 --blocking-power 80
says "pipeline header-only profile" "^error: $tmp/headeronly.csv: no data rows"

# distributedInfo: a rank the run cannot have is an error naming the file, not a rank quietly used
# (or dropped, which renumbered the ranks by file order). A trace without it is fine (good.json).
for di in 'rank 5 world_size 2|rank 5 is not below world_size 2' 'rank -1 world_size 2|rank: must be a whole number >= 0, got -1' \
          'rank 0 world_size 0|world_size: must be a whole number >= 1, got 0' 'rank 1.5 world_size 4|rank: must be a whole number >= 0, got 1.5'; do
  read -r k1 v1 k2 v2 <<<"${di%%|*}"
  sed "s/^{\"traceEvents\"/{\"distributedInfo\":{\"backend\":\"nccl\",\"$k1\":$v1,\"$k2\":$v2},\"traceEvents\"/" \
    "$tmp/good.json" >"$tmp/dist.json"
  expect 1 "analyze distributedInfo ${di%%|*}" -- "$emo" analyze "$tmp/dist.json"
  says "analyze distributedInfo ${di%%|*}" "^error: $tmp/dist.json:distributedInfo: ${di#*|}"
done
sed 's/^{"traceEvents"/{"distributedInfo":{"rank":1,"world_size":2},"traceEvents"/' "$tmp/good.json" >"$tmp/rank1.json"
expect 0 "analyze rank 1 of 2" -- "$emo" analyze "$tmp/rank1.json"
sed 's/"rank":1/"rank":0/' "$tmp/rank1.json" >"$tmp/rank0.json"
expect 0 "analyze ranks 0 and 1 of 2" -- "$emo" analyze "$tmp/rank0.json" "$tmp/rank1.json"
cp "$tmp/rank1.json" "$tmp/rank1b.json"
expect 1 "analyze two files of rank 1" -- "$emo" analyze "$tmp/rank1.json" "$tmp/rank1b.json"
says "analyze two files of rank 1" "rank 1 is also the rank of"
mkdir -p "$tmp/cycles" && cp "$tmp/rank0.json" "$tmp/cycles/host_1.100.pt.trace.json" && cp "$tmp/rank0.json" "$tmp/cycles/host_1.200.pt.trace.json"
expect 1 "a folder of two profiler cycles" -- "$emo" analyze "$tmp/cycles"
says "a folder of two profiler cycles" "give one cycle's files"
expect 1 "analyze one file twice" -- "$emo" analyze "$tmp/rank0.json" "$tmp/rank1.json" "$tmp/../$(basename "$tmp")/rank0.json"
says "analyze one file twice" "^error: $tmp/../$(basename "$tmp")/rank0.json: is given twice as a trace (also as $tmp/rank0.json)"
expect 0 "optimize" -- "$emo" optimize "$tmp/tdp/train-dp_rank0.json" --device h100 --min-pack-ms 2 -o "$tmp/pol.json"
expect 1 "evaluate on another device" -- "$emo" evaluate "$tmp/pol.json" "$tmp/tdp/train-dp_rank0.json" --device emulated:a100
expect 1 "evaluate a stale policy" -- "$emo" evaluate "$tmp/pol.json" "$tmp/tdp3/train-dp_rank0.json" --device emulated:h100
# A hand-edited policy that is no longer JSON says so (it used to be "not a JSON object").
sed 's/"max_slowdown": [0-9.e-]*/"max_slowdown": NaN/' "$tmp/pol.json" >"$tmp/polnan.json"
expect 1 "evaluate a policy with NaN" -- "$emo" evaluate "$tmp/polnan.json" "$tmp/tdp/train-dp_rank0.json" --device emulated:h100
says "evaluate a policy with NaN" "^error: $tmp/polnan.json: not valid JSON"
expect 1 "evaluate a non-policy" -- "$emo" evaluate "$tmp/good.json" "$tmp/tdp/train-dp_rank0.json" --device emulated:h100
expect 1 "evaluate off the emulator" -- "$emo" evaluate "$tmp/pol.json" "$tmp/tdp/train-dp_rank0.json" --device h100
expect 0 "evaluate" -- "$emo" evaluate "$tmp/pol.json" "$tmp/tdp/train-dp_rank0.json" --device emulated:h100 --json "$tmp/ev.json"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert {'default','policy','baselines'} <= set(j) and {'static_clock','slack_only','per_phase'} <= set(j['baselines']), j" "$tmp/ev.json" \
  || { echo "FAIL: evaluate keys"; fails=$((fails + 1)); }
expect 1 "evaluate for a billion steps" -- "$emo" evaluate "$tmp/pol.json" "$t0" --device emulated:h100 --steps 1000000000
says "evaluate for a billion steps" "^error: --steps: must be from 2"
# apply: the runtime on the emulated GPU; only an emulated device runs a job, and it needs enough steps.
expect 1 "apply off the emulator" -- "$emo" apply "$tmp/pol.json" "$tmp/tdp/train-dp_rank0.json" --device h100
says "apply off the emulator" "^error: --device h100: emo apply runs the job on the emulated GPU"
expect 1 "apply for too few steps" -- "$emo" apply "$tmp/pol.json" "$tmp/tdp/train-dp_rank0.json" --device emulated:h100 --steps 2
says "apply for too few steps" "^error: --steps: must be 0 (auto) or from 4"
expect 1 "apply with fewer steps than its blocks" -- "$emo" apply "$tmp/pol.json" "$tmp/tdp/train-dp_rank0.json" --device emulated:h100 --steps 12 --block-steps 4
says "apply with fewer steps than its blocks" "note: give --steps 20 or more"
expect 1 "apply with negative blocks" -- "$emo" apply "$tmp/pol.json" "$tmp/tdp/train-dp_rank0.json" --device emulated:h100 --block-steps -1
expect 1 "apply a stale policy" -- "$emo" apply "$tmp/pol.json" "$tmp/tdp3/train-dp_rank0.json" --device emulated:h100
expect 1 "apply over its own policy" -- "$emo" apply "$tmp/pol.json" "$tmp/tdp/train-dp_rank0.json" --device emulated:h100 --json "$tmp/pol.json"
expect 0 "apply" -- "$emo" apply "$tmp/pol.json" "$tmp/tdp/train-dp_rank0.json" --device emulated:h100 --steps 60 --block-steps 4 --json "$tmp/ap.json"
python3 -c "
import json,sys
j=json.load(open(sys.argv[1]))
m=j['measured']
assert {'time_us','energy_j'} <= set(m['default']) and {'time_us','energy_j','slowdown_pct','saving_pct','saving_ci_pct'} <= set(m['policy']), m
assert m['default']['steps'] > 0 and m['policy']['steps'] > 0 and isinstance(j['fallbacks'], list) and j['clock_changes']['calls'] >= 0, j
" "$tmp/ap.json" || { echo "FAIL: apply keys"; fails=$((fails + 1)); }
expect 1 "run for a billion steps" -- "$emo" run "$t0" --steps 1000000000 -o "$tmp/billion"
says "run for a billion steps" "^error: --steps: must be from 2"

# A prediction the check measures far from what it predicted is doubted aloud (stderr and --json), and one
# it measures close is not: an emulated H100 whose voltage floor is 20 % below the profile's (a GPU unlike
# the profile, further off than the fit lets a floor move, ±8 %) draws far less below the knee than modelled.
"$emo" devices h100 --json "$tmp/h100.json" >/dev/null
python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
j['devices'][0]['voltage']['floor_rel']['value'] *= 0.8
json.dump(j, open(sys.argv[2], 'w'))
" "$tmp/h100.json" "$tmp/h100_low_floor.json"
expect 0 "optimize whose check doubts its prediction" -- "$emo" optimize "$tmp/tdp/train-dp_rank0.json" --device h100 \
  --profile-on "emulated:$tmp/h100_low_floor.json" --min-pack-ms 2 --json "$tmp/doubt.json"
says "optimize whose check doubts its prediction" "^warning: the check measured a step energy"
python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
w = j['warnings']
assert j['check']['energy_gap_pct'] > 3 and sum(x.startswith('the check measured') for x in w) == 1, w
# The fit already misses the runs (it cannot move the floor that far), and says so too.
assert max(g['largest_gap_pct'] for g in j['energy_fit']) > 3 and sum(x.startswith('the fitted models give GPU 0') for x in w) == 1, w
assert len(w) == 2, w
" "$tmp/doubt.json" || { echo "FAIL: doubt in --json"; fails=$((fails + 1)); }
expect 0 "optimize whose check agrees" -- "$emo" optimize "$tmp/tdp/train-dp_rank0.json" --device h100 --min-pack-ms 2 --json "$tmp/nodoubt.json"
if grep -q "^warning:" "$tmp/err"; then echo "FAIL: optimize whose check agrees: warned"; fails=$((fails + 1)); fi
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['check']['energy_gap_pct'] < 3 and j['warnings'] == [], j" \
  "$tmp/nodoubt.json" || { echo "FAIL: no doubt in --json"; fails=$((fails + 1)); }

# Values that used to mean "the default" silently: an error naming the flag instead.
for cmd in analyze whatif pack; do
  extra=""; [ "$cmd" = whatif ] && extra="--scale cat:kernel=2"
  expect 1 "$cmd --step -5" -- "$emo" $cmd "$t0" --step -5 $extra
  says "$cmd --step -5" "^error: --step"
done
expect 2 "optimize empty --max-slowdown" -- "$emo" optimize "$t0" --max-slowdown "" --no-check
says "optimize empty --max-slowdown" "^error: --max-slowdown: empty argument"
expect 2 "run empty -o" -- "$emo" run "$t0" -o ""
says "run empty -o" "^error: -o: empty argument"
expect 1 "pack more plan clocks than the device has" -- "$emo" pack "$t0" --device h100 --profile-clocks 1000
says "pack more plan clocks than the device has" "^error: --profile-clocks: 1000 clocks asked; h100 has"
expect 1 "pack a billion plan clocks" -- "$emo" pack "$t0" --device h100 --profile-clocks 1000000000
says "pack a billion plan clocks" "^error: --profile-clocks"

# Without ProfilerStep the step is the profiler's window: a runtime call 60 ms after it is dropped, and
# every subcommand that reads the step says so on stderr (not only `analyze`).
python3 - "$(dirname "$0")/../data/traces/tiny_modern.json" "$tmp/window.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
ev = [e for e in j["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep")]
ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
           "ts": 990, "dur": 230})
ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaEventQuery", "pid": 1, "tid": 9, "ts": 61220, "dur": 3})
j["traceEvents"] = ev
json.dump(j, open(sys.argv[2], "w"))
PY
for cmd in analyze pack; do
  expect 0 "$cmd of a trace with a stray event" -- "$emo" $cmd "$tmp/window.json"
  says "$cmd of a trace with a stray event" "^warning: .*outside the profiler window"
done
expect 0 "whatif of a trace with a stray event" -- "$emo" whatif "$tmp/window.json" --scale cat:kernel=2
says "whatif of a trace with a stray event" "^warning: .*outside the profiler window"

# Outputs never destroy what they name: an input, another output, a link, an earlier report.
cp "$t0" "$tmp/keep.json"
before=$(md5sum <"$tmp/keep.json")
expect 1 "analyze --json onto its own trace" -- "$emo" analyze "$tmp/keep.json" --json "$tmp/keep.json"
says "analyze --json onto its own trace" "^error: --json .*is also an input"
[ "$(md5sum <"$tmp/keep.json")" = "$before" ] || { echo "FAIL: the trace was overwritten"; fails=$((fails + 1)); }
ln -sf "$tmp/keep.json" "$tmp/alias.json"
expect 1 "optimize -o onto its trace through a link" -- "$emo" optimize "$tmp/keep.json" -o "$tmp/alias.json" --no-check
says "optimize -o onto its trace through a link" "^error: -o .*is also an input"
[ "$(md5sum <"$tmp/keep.json")" = "$before" ] || { echo "FAIL: the trace was overwritten through a link"; fails=$((fails + 1)); }
expect 1 "pack --json and --csv on one file" -- "$emo" pack "$t0" --json "$tmp/same.out" --csv "$tmp/same.out"
says "pack --json and --csv on one file" "is the same file as"
echo old >"$tmp/target.json"
ln -sf "$tmp/target.json" "$tmp/link.json"
expect 0 "analyze --json through a link" -- "$emo" analyze "$t0" --json "$tmp/link.json"
[ -L "$tmp/link.json" ] && grep -q '"critical_path"' "$tmp/target.json" ||
  { echo "FAIL: the link was replaced, or its target not written"; fails=$((fails + 1)); }
# A run whose --json cannot be written fails before it replaces an earlier report.
mkdir -p "$tmp/oldrun" && : >"$tmp/oldrun/.emo-folder" && echo earlier >"$tmp/oldrun/summary.json"
expect 1 "run with an unwritable --json" -- "$emo" run "$t0" -o "$tmp/oldrun" --json "$tmp/no/such/dir/s.json"
grep -q earlier "$tmp/oldrun/summary.json" || { echo "FAIL: a failed run replaced the earlier report"; fails=$((fails + 1)); }
expect 1 "run -o a folder holding its input" -- "$emo" run "$tmp/oldrun/../keep.json" -o "$tmp"
says "run -o a folder holding its input" "^error: -o "

# One rank of a larger run, analyzed alone, is still that rank: the emulator's traces of it read back.
"$emo" synth train-dp --ranks 2 --layers 2 --steps 2 -o "$tmp/tdp2" >/dev/null
expect 0 "optimize rank 1 of 2 alone" -- "$emo" optimize "$tmp/tdp2/train-dp_rank1.json" --device h100 --min-pack-ms 2 -o "$tmp/pr1.json"
# Files of runs with different world sizes are not one step.
"$emo" synth train-dp --ranks 4 --layers 2 --steps 2 -o "$tmp/tdp4" >/dev/null
expect 1 "ranks of a 2-rank and a 4-rank run" -- "$emo" analyze "$tmp/tdp2/train-dp_rank0.json" "$tmp/tdp4/train-dp_rank1.json"
says "ranks of a 2-rank and a 4-rank run" "world_size 4 is not the world_size 2"

# A trace on standard input ('-'), plain or gzip; only once; a device or a FIFO is named as such.
expect 0 "trace on stdin" -- sh -c '"$0" analyze - <"$1"' "$emo" "$tmp/good.json"
grep -q '^step span: measured 0.110 ms' "$tmp/out" || { echo "FAIL: trace on stdin: not the step"; fails=$((fails + 1)); }
expect 0 "gzip trace on stdin" -- sh -c 'gzip -c "$1" | "$0" analyze - --json -' "$emo" "$tmp/good.json"
grep -q '"measured_span_us": 110' "$tmp/out" || { echo "FAIL: gzip trace on stdin: not the step"; fails=$((fails + 1)); }
expect 1 "stdin as two traces" -- sh -c '"$0" analyze - - <"$1"' "$emo" "$tmp/good.json"
says "stdin as two traces" "^error: -: standard input is given as more than one trace"
expect 1 "a device as trace" -- "$emo" analyze /dev/zero
says "a device as trace" "^error: /dev/zero: is a device, not a trace file"
mkfifo "$tmp/fifo"
timeout 60 "$emo" analyze "$tmp/fifo" >"$tmp/fifo.out" 2>"$tmp/fifo.err" &
fifo_pid=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do grep -q . "$tmp/fifo.err" && break; sleep 0.5; done
grep -q "^note: $tmp/fifo is a FIFO and nothing has been written to it yet: waiting for a writer" "$tmp/fifo.err" ||
  { echo "FAIL: a FIFO without a writer: no note that emo waits"; fails=$((fails + 1)); }
cat "$tmp/good.json" >"$tmp/fifo"
wait "$fifo_pid" && grep -q '^step span: measured 0.110 ms' "$tmp/fifo.out" ||
  { echo "FAIL: the trace written to the FIFO was not analyzed"; fails=$((fails + 1)); }

# Doubts about the step: warned on stderr (and in --json where there is one), never a silent answer.
expect 1 "a ranked trace with one of no run" -- "$emo" analyze "$tmp/rank0.json" "$tmp/good.json"
says "a ranked trace with one of no run" "^error: $tmp/good.json: has no distributedInfo.world_size, while $tmp/rank0.json has world_size 2"
expect 0 "one rank of two" -- "$emo" analyze "$tmp/rank1.json"
says "one rank of two" "^warning: 1 of the 2 ranks of the run (distributedInfo.world_size) given"
expect 0 "both ranks" -- "$emo" analyze "$tmp/rank0.json" "$tmp/rank1.json"
if grep -q "^warning:" "$tmp/err"; then echo "FAIL: both ranks: warned"; sed 's/^/  | /' "$tmp/err"; fails=$((fails + 1)); fi
sed 's/^{"traceEvents"/{"deviceProperties":[{"id":0,"name":"Tesla V100-SXM2-32GB"}],"traceEvents"/' "$tmp/good.json" >"$tmp/v100.json"
expect 0 "a V100 trace against h100" -- "$emo" pack "$tmp/v100.json" --device h100
says "a V100 trace against h100" "^warning: $tmp/v100.json was recorded on Tesla V100-SXM2-32GB, not the h100 of --device"
expect 0 "a V100 trace against v100" -- "$emo" pack "$tmp/v100.json" --device v100
if grep -q "^warning:" "$tmp/err"; then echo "FAIL: a V100 trace against v100: warned"; fails=$((fails + 1)); fi
# Two kernels recorded at once on one stream: the replay runs them one after the other (+91 %).
sed 's/"ts":10,"dur":100,"args":{"device":0,"stream":7,"correlation":1}}/&,\n{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":6,"dur":2,"args":{"correlation":2}},\n{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":10,"dur":100,"args":{"device":0,"stream":7,"correlation":2}}/' \
  "$tmp/good.json" >"$tmp/overlap.json"
expect 0 "a replay far from the trace" -- "$emo" analyze "$tmp/overlap.json" --json "$tmp/overlap.out.json"
says "a replay far from the trace" "^warning: the replay of the step takes +9[0-9].[0-9] % the time the trace measured (more than 5 % off)"
# Past 50 % optimize and run stop before any work, and say which flag lets them go on.
expect 1 "optimize a replay far from the trace" -- "$emo" optimize "$tmp/overlap.json" -o "$tmp/overlap.pol.json"
says "optimize a replay far from the trace" "^error: $tmp/overlap.json: its replay takes +9[0-9].[0-9] % the time the trace measured (more than 50 % off)"
says "optimize a replay far from the trace" "^note: give --accept-doubt"
[ -e "$tmp/overlap.pol.json" ] && { echo "FAIL: a policy was written for a doubtful step"; fails=$((fails + 1)); }
expect 1 "run a replay far from the trace" -- "$emo" run "$tmp/overlap.json" -o "$tmp/overlaprun"
says "run a replay far from the trace" "^note: give --accept-doubt"
[ -e "$tmp/overlaprun" ] && { echo "FAIL: a report was written for a doubtful step"; fails=$((fails + 1)); }
expect 0 "optimize a replay far from the trace, accepted" -- "$emo" optimize "$tmp/overlap.json" --accept-doubt --no-check
says "optimize a replay far from the trace, accepted" "^warning: the replay of the step takes +9"
# Ranks of different iterations or captures: rank 1 without its last ProfilerStep (so its last complete
# step is the one before), or captured an hour later.
"$emo" synth train-dp --ranks 2 --layers 2 --steps 2 -o "$tmp/tdp2" >/dev/null
python3 - "$tmp/tdp2" "$tmp" <<'PY'
import json, sys
src, out = sys.argv[1], sys.argv[2]
t = json.load(open(src + "/train-dp_rank1.json"))
last = max(int(e["name"].split("#")[1]) for e in t["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
t2 = dict(t, traceEvents=[e for e in t["traceEvents"] if e.get("name") != "ProfilerStep#%d" % last])
json.dump(t2, open(out + "/rank1_short.json", "w"))
t3 = dict(t, baseTimeNanoseconds=t["baseTimeNanoseconds"] + 3600 * 10**9)
json.dump(t3, open(out + "/rank1_late.json", "w"))
PY
expect 0 "ranks of different steps" -- "$emo" analyze "$tmp/tdp2/train-dp_rank0.json" "$tmp/rank1_short.json"
says "ranks of different steps" "^warning: $tmp/rank1_short.json is ProfilerStep#[0-9]*, $tmp/tdp2/train-dp_rank0.json ProfilerStep#[0-9]*: the ranks' steps are not one iteration"
expect 0 "ranks captured an hour apart" -- "$emo" analyze "$tmp/tdp2/train-dp_rank0.json" "$tmp/rank1_late.json"
says "ranks captured an hour apart" "^warning: $tmp/rank1_late.json was captured 3600 s from $tmp/tdp2/train-dp_rank0.json (more than 600 s)"
expect 0 "ranks of one run" -- "$emo" analyze "$tmp/tdp2/train-dp_rank0.json" "$tmp/tdp2/train-dp_rank1.json"
if grep -q "^warning:" "$tmp/err"; then echo "FAIL: ranks of one run: warned"; sed 's/^/  | /' "$tmp/err"; fails=$((fails + 1)); fi
# Most kernels dropped as malformed (negative durations): their launches lose their GPU op, and past
# 50 % of the launches optimize and run stop rather than optimize what is left.
python3 - "$tmp/tdp/train-dp_rank0.json" "$tmp/negdur.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
k = 0
for e in t["traceEvents"]:
    if e.get("cat") == "kernel":
        k += 1
        if k % 4 != 0:
            e["dur"] = -5
json.dump(t, open(sys.argv[2], "w"))
PY
expect 1 "optimize a step whose kernels are mostly malformed" -- "$emo" optimize "$tmp/negdur.json" -o "$tmp/negdur.pol.json"
says "optimize a step whose kernels are mostly malformed" "^error: $tmp/negdur.json: [0-9]* of its [0-9]* launch calls ([0-9]* %, more than 50 %) have no GPU activity"
says "optimize a step whose kernels are mostly malformed" "^note: give --accept-doubt"
[ -e "$tmp/negdur.pol.json" ] && { echo "FAIL: a policy was written for a step missing most kernels"; fails=$((fails + 1)); }
expect 1 "run a step whose kernels are mostly malformed" -- "$emo" run "$tmp/negdur.json" -o "$tmp/negdurrun"
says "run a step whose kernels are mostly malformed" "([0-9]* malformed events were skipped on reading"
expect 0 "optimize a step whose kernels are mostly malformed, accepted" -- "$emo" optimize "$tmp/negdur.json" --accept-doubt --no-check
says "optimize a step whose kernels are mostly malformed, accepted" "^warning: [0-9]* of the step's [0-9]* launch calls have no GPU activity"
# A trace of a CPU-only run: nothing to choose clocks for; the error names the file and the way out, and
# --cpu-ops-as-kernels runs the loop on it.
cat >"$tmp/cpuonly.json" <<'JSON'
{"traceEvents":[
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":400},
{"ph":"X","cat":"cpu_op","name":"aten::relu","pid":1,"tid":1,"ts":420,"dur":300}]}
JSON
expect 0 "analyze a CPU-only trace" -- "$emo" analyze "$tmp/cpuonly.json"
expect 1 "optimize a CPU-only trace" -- "$emo" optimize "$tmp/cpuonly.json" -o "$tmp/cpuonly.pol.json"
says "optimize a CPU-only trace" "^error: $tmp/cpuonly.json: the step has no GPU operations (kernels, copies, memsets) to choose clocks for"
says "optimize a CPU-only trace" "^note: .*--cpu-ops-as-kernels"
[ -e "$tmp/cpuonly.pol.json" ] && { echo "FAIL: a policy was written for a CPU-only trace"; fails=$((fails + 1)); }
expect 0 "optimize a CPU-only trace, its operators as kernels" -- "$emo" optimize "$tmp/cpuonly.json" --cpu-ops-as-kernels --no-check -o "$tmp/cpuonly.pol.json"
# A step that is the run's start-up: its first launch keeps the host 60 ms while the GPU runs nothing
# (CUDA loading the kernel's module), 92 % of the step: said by analyze, refused by optimize and run.
cat >"$tmp/firstcall.json" <<'JSON'
{"traceEvents":[
{"ph":"X","cat":"cpu_op","name":"aten::cudnn_convolution","pid":1,"tid":1,"ts":0,"dur":60200},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":100,"dur":60000,"args":{"correlation":1}},
{"ph":"X","cat":"kernel","name":"conv_kernel","pid":0,"tid":7,"ts":60110,"dur":5000,"args":{"device":0,"stream":7,"correlation":1}}]}
JSON
expect 0 "a step that is the run's start-up" -- "$emo" analyze "$tmp/firstcall.json"
says "a step that is the run's start-up" "^warning: 1 runtime call(s) that do not wait on the GPU kept the host 60.000 ms (92 % of the step on the rank with the most) while its GPU ran nothing, e.g. cudaLaunchKernel inside aten::cudnn_convolution"
expect 1 "optimize a step that is the run's start-up" -- "$emo" optimize "$tmp/firstcall.json" -o "$tmp/firstcall.pol.json"
says "optimize a step that is the run's start-up" "^error: $tmp/firstcall.json: 92 % of its step (more than 50 %) is runtime calls that kept the host while the GPU ran nothing"
says "optimize a step that is the run's start-up" "^note: give --accept-doubt"
[ -e "$tmp/firstcall.pol.json" ] && { echo "FAIL: a policy was written for a start-up step"; fails=$((fails + 1)); }
expect 1 "run a step that is the run's start-up" -- "$emo" run "$tmp/firstcall.json" -o "$tmp/firstcallrun"
[ -e "$tmp/firstcallrun" ] && { echo "FAIL: a report was written for a start-up step"; fails=$((fails + 1)); }
expect 0 "optimize a step that is the run's start-up, accepted" -- "$emo" optimize "$tmp/firstcall.json" --accept-doubt --no-check -o "$tmp/firstcall.pol.json"
# A HIP graph replay whose kernels the profiler mostly left out (tests/data/traces/README.md):
# hipStreamSynchronize blocks 29 ms after the last recorded kernel ended, 93 % of the step.
partial="$(cd "$(dirname "$0")/../data/traces" && pwd)/mi300x_pi0_graph_replay_partial.json.gz"
expect 0 "a step whose GPU work the trace did not record" -- "$emo" analyze "$partial"
says "a step whose GPU work the trace did not record" "^warning: synchronize calls blocked 29.006 ms (93 % of the step on the rank with the most) after the GPU work the trace shows had ended, e.g. hipStreamSynchronize"
expect 1 "optimize a step whose GPU work the trace did not record" -- "$emo" optimize "$partial" --device h100 -o "$tmp/partial.pol.json"
says "optimize a step whose GPU work the trace did not record" "^error: .*mi300x_pi0_graph_replay_partial.json.gz: 93 % of its step (more than 50 %) is synchronize calls blocked"
says "optimize a step whose GPU work the trace did not record" "^note: give --accept-doubt"
[ -e "$tmp/partial.pol.json" ] && { echo "FAIL: a policy was written for a step whose GPU work is missing"; fails=$((fails + 1)); }
expect 0 "optimize a step whose GPU work the trace did not record, accepted" -- "$emo" optimize "$partial" --device h100 --accept-doubt --no-check
says "optimize a step whose GPU work the trace did not record, accepted" "^warning: synchronize calls blocked"
# Under 50 % (an MI350 graph replay: 9.3 ms of 24.4) it is a warning, and optimize goes on.
partial2="$(dirname "$partial")/mi350_pi0_compiled_graph_replay.json.gz"
expect 0 "optimize a step partly blocked on GPU work the trace did not record" -- "$emo" optimize "$partial2" --device h100 --no-check -o "$tmp/partial2.pol.json"
says "optimize a step partly blocked on GPU work the trace did not record" "^warning: synchronize calls blocked 9.301 ms (38 % of the step"
[ -s "$tmp/partial2.pol.json" ] || { echo "FAIL: no policy for a step partly blocked on unrecorded GPU work"; fails=$((fails + 1)); }
# GPU ops that start long after their launch on a GPU the step shows idle (tests/data/traces/README.md):
# SGLang's decode step waits 463 ms (98 %) before its first kernel, vLLM's 7.8 ms (41 %).
late="$(dirname "$partial")/mi300x_sglang_qwen3_decode.json.gz"
expect 0 "a step whose first kernel waits on unrecorded GPU work" -- "$emo" analyze "$late"
says "a step whose first kernel waits on unrecorded GPU work" "^warning: 1 GPU op(s) on the critical path started 463.252 ms (98 % of the step) after their launch while their GPU ran nothing of the step"
expect 1 "optimize a step whose first kernel waits on unrecorded GPU work" -- "$emo" optimize "$late" --device h100 -o "$tmp/late.pol.json"
says "optimize a step whose first kernel waits on unrecorded GPU work" "^error: .*mi300x_sglang_qwen3_decode.json.gz: 98 % of its step (more than 50 %) is GPU ops on the critical path waiting after their launch"
says "optimize a step whose first kernel waits on unrecorded GPU work" "^note: give --accept-doubt"
[ -e "$tmp/late.pol.json" ] && { echo "FAIL: a policy was written for a step that waits on unrecorded GPU work"; fails=$((fails + 1)); }
expect 1 "run a step whose first kernel waits on unrecorded GPU work" -- "$emo" run "$late" --device h100 -o "$tmp/laterun"
[ -e "$tmp/laterun" ] && { echo "FAIL: a report was written for a step that waits on unrecorded GPU work"; fails=$((fails + 1)); }
late2="$(dirname "$partial")/rocm_vllm_decode_graph_execution.json.gz"
expect 0 "optimize a step partly waiting on unrecorded GPU work" -- "$emo" optimize "$late2" --device h100 --no-check -o "$tmp/late2.pol.json"
says "optimize a step partly waiting on unrecorded GPU work" "^warning: 1 GPU op(s) on the critical path started 7.826 ms (41 % of the step)"
[ -s "$tmp/late2.pol.json" ] || { echo "FAIL: no policy for a step partly waiting on unrecorded GPU work"; fails=$((fails + 1)); }
# A trace without ProfilerStep is taken whole, and the text says so; one with it does not.
expect 0 "a trace without ProfilerStep" -- "$emo" analyze "$late2"
grep -q "^note: no ProfilerStep in .*rocm_vllm_decode_graph_execution.json.gz: the step is the profiler's whole window$" "$tmp/out" ||
  { echo "FAIL: a trace without ProfilerStep does not say it is taken whole"; fails=$((fails + 1)); }
expect 0 "a trace with ProfilerStep" -- "$emo" analyze "$(dirname "$partial")/h200_transformer_train.json.gz"
grep -q "no ProfilerStep" "$tmp/out" && { echo "FAIL: a trace with ProfilerStep is said to have none"; fails=$((fails + 1)); }
# A launch whose kernel the trace lost.
sed 's/"ts":10,"dur":100,"args":{"device":0,"stream":7,"correlation":1}}/&,\n{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":6,"dur":2,"args":{"correlation":2}}/' \
  "$tmp/good.json" >"$tmp/lost.json"
expect 0 "a launch without GPU activity" -- "$emo" whatif "$tmp/lost.json" --scale gemm=2
says "a launch without GPU activity" "^warning: 1 of the step's 2 launch calls have no GPU activity in the trace"
expect 0 "a launch without GPU activity, run" -- "$emo" run "$tmp/lost.json" -o "$tmp/lostrun"
says "a launch without GPU activity, run" "^warning: 1 of the step's 2 launch calls"
python3 -c "import json,sys; w=json.load(open(sys.argv[1]))['summary']['warnings']; assert any('launch calls have no GPU activity' in x for x in w), w" \
  "$tmp/lostrun/summary.json" || { echo "FAIL: the lost launch is not in summary.json"; fails=$((fails + 1)); }

# A folder of rank files reads as the files themselves (other names and hidden files left out), for
# every subcommand that reads traces; an output naming a file in it is refused as an input.
cp "$tmp/notraces/README.txt" "$tmp/notraces/.hidden.json" "$tmp/tdp4/"
expect 0 "analyze a folder" -- "$emo" analyze "$tmp/tdp4" --per-kernel --json "$tmp/folder.json"
expect 0 "analyze its files" -- "$emo" analyze "$tmp"/tdp4/train-dp_rank*.json --per-kernel --json "$tmp/files.json"
cmp -s "$tmp/folder.json" "$tmp/files.json" || { echo "FAIL: analyze DIR differs from analyze DIR/*.json"; fails=$((fails + 1)); }
expect 0 "optimize a folder" -- "$emo" optimize "$tmp/tdp4/" --device h100 -o "$tmp/folder.policy.json"
expect 0 "optimize its files" -- "$emo" optimize "$tmp"/tdp4/train-dp_rank*.json --device h100 -o "$tmp/files.policy.json"
cmp -s "$tmp/folder.policy.json" "$tmp/files.policy.json" || { echo "FAIL: optimize DIR differs from optimize DIR/*.json"; fails=$((fails + 1)); }
expect 1 "output onto a file of the input folder" -- "$emo" analyze "$tmp/tdp4" --json "$tmp/tdp4/train-dp_rank1.json"
says "output onto a file of the input folder" "is also an input"
rm "$tmp/tdp4/README.txt" "$tmp/tdp4/.hidden.json"

# synth into a folder with an earlier, larger run's rank files: refused, not mixed in.
expect 1 "synth over a larger run" -- "$emo" synth train-dp --ranks 2 --layers 2 --steps 2 -o "$tmp/tdp4"
says "synth over a larger run" "^error: $tmp/tdp4: holds train-dp_rank2.json and 1 more of an earlier run"
[ -e "$tmp/tdp4/train-dp_rank3.json" ] || { echo "FAIL: synth removed an earlier file"; fails=$((fails + 1)); }
expect 0 "synth over a run of as many ranks" -- "$emo" synth train-dp --ranks 4 --layers 2 --steps 2 -o "$tmp/tdp4"
# synth keeps every rank's file open: a soft limit below that is raised, a hard one is said.
expect 0 "synth past the soft open-file limit" -- bash -c 'ulimit -Sn 64 && "$0" synth train-dp --ranks 100 --layers 1 --steps 1 -o "$1"' "$emo" "$tmp/s100"
[ "$(ls "$tmp/s100" | wc -l)" -eq 100 ] || { echo "FAIL: synth past the soft limit wrote $(ls "$tmp/s100" | wc -l) files"; fails=$((fails + 1)); }
expect 1 "synth past the hard open-file limit" -- bash -c 'ulimit -Sn 40 && ulimit -Hn 64 && "$0" synth train-dp --ranks 100 --layers 1 --steps 1 -o "$1"' "$emo" "$tmp/s100h"
says "synth past the hard open-file limit" "--ranks 100 writes 100 files at once, but this process may open only 40 (ulimit -n)"
[ -n "$(ls "$tmp/s100h" 2>/dev/null)" ] && { echo "FAIL: synth past the hard limit left files"; fails=$((fails + 1)); }

# deprofile: the profiler's cost taken out of a step (docs/replay.md, "The profiler's cost").
h200="$(dirname "$0")/../data/traces/h200_transformer_train.json.gz"
expect 2 "deprofile without -o" -- "$emo" deprofile "$h200"
expect 2 "deprofile --host-scale over 1" -- "$emo" deprofile "$h200" -o "$tmp/dp" --host-scale 2
expect 1 "deprofile a trace without untraced steps" -- "$emo" deprofile "$tmp/tdp4" -o "$tmp/dp"
says "deprofile a trace without untraced steps" "the trace does not say how long the job's steps take without the profiler"
[ -e "$tmp/dp" ] && { echo "FAIL: a failed deprofile left its output folder"; fails=$((fails + 1)); }
expect 1 "deprofile onto its input folder" -- "$emo" deprofile "$tmp/tdp4" -o "$tmp/tdp4"
expect 0 "deprofile the H200 step" -- "$emo" deprofile "$h200" -o "$tmp/dp"
says_out() { grep -q -- "$2" "$tmp/out" || { echo "FAIL: $1: stdout lacks '$2'"; fails=$((fails + 1)); }; }
says_out "deprofile the H200 step" "18.085 ms traced, 11.269 ms without the profiler"
expect 0 "analyze the deprofiled step" -- "$emo" analyze "$tmp/dp"
grep -q "profiler slowed" "$tmp/err" && { echo "FAIL: the deprofiled step is still doubted"; fails=$((fails + 1)); }
grep -q "^step span: measured 11\.2[0-9][0-9] ms" "$tmp/out" || { echo "FAIL: the deprofiled step is not the untraced one"; sed 's/^/  | /' "$tmp/out" | head -3; fails=$((fails + 1)); }
# The job's step time given instead (a trace recorded without emo.torch.capture): the same factor.
expect 0 "deprofile at the job's step time" -- "$emo" deprofile "$tmp/tdp4/train-dp_rank0.json" -o "$tmp/dpu" --untraced-step-ms 9
says_out "deprofile at the job's step time" "without the profiler (--untraced-step-ms)"
expect 2 "deprofile with both a factor and a step time" -- "$emo" deprofile "$h200" -o "$tmp/dpx" --host-scale 0.5 --untraced-step-ms 11
expect 2 "deprofile at a step time of 0" -- "$emo" deprofile "$h200" -o "$tmp/dpx" --untraced-step-ms 0
# --deprofile on the other commands: the same step in memory, said.
expect 0 "analyze --deprofile" -- "$emo" analyze "$h200" --deprofile
says "analyze --deprofile" "^warning: the profiler's cost was taken out of the step (--deprofile): host time x0.49"
grep -q "^step span: measured 11\.2[0-9][0-9] ms" "$tmp/out" || { echo "FAIL: analyze --deprofile is not the untraced step"; fails=$((fails + 1)); }
# With a factor given, no untraced steps are needed; x1 gives the step back as recorded.
expect 0 "deprofile at a given factor" -- "$emo" deprofile "$tmp/tdp4/train-dp_rank0.json" -o "$tmp/dp1" --host-scale 1
expect 0 "analyze the step written back at x1" -- "$emo" analyze "$tmp/dp1" --json "$tmp/dp1.json"
"$emo" analyze "$tmp/tdp4/train-dp_rank0.json" --json "$tmp/dp0.json" >/dev/null 2>&1
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if abs(a['measured_span_us']-b['measured_span_us'])<=1 else 1)" "$tmp/dp0.json" "$tmp/dp1.json" \
  || { echo "FAIL: deprofile --host-scale 1 changed the step"; fails=$((fails + 1)); }

echo "$pass passed, $fails failed"
[ "$fails" -eq 0 ]
