#!/usr/bin/env bash
# Short steps end to end: `emo pack`, `optimize` and `run` on steps from 50 µs to 2 ms (decode steps,
# tutorial loops). The profiling plan fills each clock's counter window with many steps (2 s of a 50
# µs step is 40 000 of them); a step with more graph nodes than a run can replay that often gets a
# shorter window, and one that cannot fill even the shortest window fails with an error naming why.
# usage: short_steps_test.sh EMO_BINARY [SHARED_DIR]
set -u
emo=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { pass=$((pass + 1)); }

# A step of STEP_US µs, 3 ProfilerSteps, KERNELS launches on one thread (30 % of the step), kernels
# on one stream (60 % of it, alternating GEMM and elementwise), a cudaDeviceSynchronize at the end.
gen() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
path, L, kernels = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
ev, corr, t = [], 100, 1000.0
for s in range(1, 4):
    b = t
    ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": b, "dur": L})
    launch, kdur = 0.3 * L / kernels, 0.6 * L / kernels
    cpu, gpu_free = b + 0.02 * L, b
    for i in range(kernels):
        corr += 1
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": round(cpu, 3), "dur": round(0.8 * launch, 3), "args": {"correlation": corr}})
        start = max(cpu + 0.8 * launch + 0.001, gpu_free)
        name = "ampere_sgemm_128x64_nn" if i % 2 == 0 else "vectorized_elementwise_kernel"
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": round(start, 3),
                   "dur": round(kdur, 3), "args": {"device": 0, "stream": 7, "correlation": corr}})
        gpu_free = start + kdur
        cpu += launch
    end = max(gpu_free, cpu) + 0.001
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1,
               "ts": round(cpu, 3), "dur": round(end - cpu, 3), "args": {"correlation": corr + 10**6}})
    t = b + L
json.dump({"schemaVersion": 1, "traceEvents": ev}, open(path, "w"))
PY
}

for us in 50 200 1000 2000; do
  f="$tmp/step$us.json"
  gen "$f" "$us" 6
  # pack: the plan's steps fill 2 s at each clock.
  if "$emo" pack "$f" --device h100 --json "$tmp/pack$us.json" >/dev/null 2>"$tmp/err"; then
    if python3 - "$tmp/pack$us.json" "$us" <<'PY'
import json, math, sys
j, us = json.load(open(sys.argv[1])), float(sys.argv[2])
want = max(3, math.ceil(2e6 / us))
assert abs(j["step_us"] - us) < 0.01 * us, (j["step_us"], us)
assert j["plan_steps_per_clock"] == want, (j["plan_steps_per_clock"], want)
assert not j["plan_steps_bounded"] and abs(j["plan_window_s"] - 2) < 0.01, j["plan_window_s"]
PY
    then ok; else fail "pack on a $us µs step: plan"; fi
  else
    fail "pack on a $us µs step: exit $?"; head -3 "$tmp/err"
  fi
  # optimize: a policy within the bound that saves energy.
  if "$emo" optimize "$f" --device h100 --max-slowdown 0.05 -o "$tmp/pol$us.json" --json "$tmp/opt$us.json" \
      >/dev/null 2>"$tmp/err"; then
    if python3 -c "
import json,sys; j=json.load(open(sys.argv[1]))
assert j['policy']['slowdown_pct'] <= 5.0 + 1e-9 and j['policy']['saving_pct'] > 5, j['policy']" "$tmp/opt$us.json"
    then ok; else fail "optimize on a $us µs step: policy"; fi
  else
    fail "optimize on a $us µs step: exit $?"; head -3 "$tmp/err"
  fi
  # run: measured on the emulated GPU, within the bound, saving energy, the step as recorded.
  if "$emo" run "$f" --max-slowdown 0.05 -o "$tmp/run$us" --json "$tmp/run$us.json" >/dev/null 2>"$tmp/err"; then
    if python3 - "$tmp/run$us.json" "$us" <<'PY'
import json, sys
s, us = json.load(open(sys.argv[1]))["summary"], float(sys.argv[2])
assert abs(s["step_time_us"]["default"] - us) < 0.02 * us, s["step_time_us"]
assert s["policy"]["slowdown_pct"] <= 5.0, s["policy"]
assert s["policy"]["saving_pct"] > 5, s["policy"]
PY
    then ok; else fail "run on a $us µs step: summary"; fi
  else
    fail "run on a $us µs step: exit $?"; head -3 "$tmp/err"
  fi
done

# 12 000 launches in a 20 µs step (timestamps that cannot be microseconds): the plan is shortened to
# what a run replays, below the counter's shortest window, and profiling says why.
gen "$tmp/dense.json" 20 12000
if "$emo" pack "$tmp/dense.json" --device h100 --json "$tmp/dense_pack.json" >/dev/null 2>&1 &&
   python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['plan_steps_bounded'] and j['plan_window_s'] < 0.2, j" "$tmp/dense_pack.json"
then ok; else fail "pack on a dense step: the plan is not marked shortened"; fi
for cmd in optimize run; do
  if [ "$cmd" = run ]; then args=(-o "$tmp/dense_run"); else args=(--device h100); fi
  "$emo" $cmd "$tmp/dense.json" "${args[@]}" >/dev/null 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 1 ] && grep -q '^error: profiling plan: .*graph nodes.*--profiled' "$tmp/err"; then ok
  else fail "$cmd on a dense step: exit $rc, want 1 with the plan's cause"; head -3 "$tmp/err"; fi
done
[ -e "$tmp/dense_run" ] && fail "a failed run left its report folder"

echo "short steps: $pass passed, $fails failed"
[ "$fails" -eq 0 ]
