#!/usr/bin/env bash
# `mpirun -np P emo ...` (docs/mpi.md): the JSON and the policy from P = 1, 2, 4 and 8 processes are the
# bytes of one process's (timing fields aside), on the synthetic families and ../shared's 8-rank DLRM step;
# bad input across processes ends every process with one `error:` from process 0, no output, no hang.
# usage: mpi_test.sh EMO_BINARY MPIRUN [SHARED_DIR] [--light]
# --light (the ASan/UBSan build): `optimize` runs at P = 2 only, not also at P = 4 and on the DLRM step, and
# `pack` at P = 3 only (each run takes minutes under the sanitizers; the release build runs them all).
set -u
emo=$1
mpirun=$2
shared=${3:-}
light=0
[ "${4:-}" = --light ] && light=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { pass=$((pass + 1)); }
# A run as root (containers, CI) and more processes than cores are both allowed here; a hang is a failure
# (300 s a run: optimize under ASan/UBSan takes 130 s of one core here).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export EMO_MPI_TIMEOUT_S=60 EMO_THREADS=1
# OpenMPI keeps its allocations to the end: leak reports under ASan would be its, not ours.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
mpi() { local np=$1; shift; timeout 300 "$mpirun" --oversubscribe -np "$np" "$emo" "$@"; }

# The JSON without its timing fields (stage_ms, solve_ms), keys sorted.
strip() {
  python3 - "$1" <<'PY'
import json, sys
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items() if k not in ("stage_ms", "solve_ms")}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v
print(json.dumps(clean(json.load(open(sys.argv[1]))), sort_keys=True, indent=1))
PY
}

same_json() {  # NAME ONE OTHER
  if [ ! -s "$3" ]; then fail "$1: no output"; return; fi
  if diff <(strip "$2") <(strip "$3") >"$tmp/diff"; then ok; else fail "$1: differs from one process"; head -20 "$tmp/diff"; fi
}

# ---- identical answers: analyze (every kernel) on the synthetic families ----
for fam in train-dp train-pp train-tp; do
  "$emo" synth "$fam" --ranks 8 --layers 2 -o "$tmp/$fam" >/dev/null || fail "synth $fam"
  files=("$tmp/$fam"/*.json)
  "$emo" analyze "${files[@]}" --per-kernel --json "$tmp/$fam.1.json" >/dev/null 2>&1 || fail "$fam: analyze in one process"
  for np in 1 2 4 8; do
    mpi "$np" analyze "${files[@]}" --per-kernel --json "$tmp/$fam.np$np.json" >/dev/null 2>&1 ||
      fail "$fam: analyze with $np processes exited $?"
    same_json "$fam analyze np=$np" "$tmp/$fam.1.json" "$tmp/$fam.np$np.json"
  done
done

# The CSVs (every kernel with its slack; the critical path segment by segment), each process its part.
pp=("$tmp/train-pp"/*.json)
"$emo" analyze "${pp[@]}" --kernels-csv "$tmp/k.1.csv" --critical-path-csv "$tmp/p.1.csv" >/dev/null 2>&1 || fail "CSVs in one process"
mpi 4 analyze "${pp[@]}" --kernels-csv "$tmp/k.np4.csv" --critical-path-csv "$tmp/p.np4.csv" >/dev/null 2>&1 || fail "CSVs with 4 processes"
if [ -s "$tmp/k.1.csv" ] && cmp -s "$tmp/k.1.csv" "$tmp/k.np4.csv" && cmp -s "$tmp/p.1.csv" "$tmp/p.np4.csv"; then ok; else fail "the CSVs with 4 processes differ"; fi
dp_files=("$tmp/train-dp"/*.json)
# A folder of rank files: every process lists it alike (the shards are of the same files).
mpi 4 analyze "$tmp/train-tp" --per-kernel --json "$tmp/tp.dir.np4.json" >/dev/null 2>&1 || fail "analyze DIR with 4 processes"
same_json "train-tp analyze DIR np=4" "$tmp/train-tp.1.json" "$tmp/tp.dir.np4.json"

# ---- optimize and what-if: the policy file is the same bytes ----
files=("$tmp/train-pp"/*.json)
"$emo" optimize "${files[@]}" -o "$tmp/pp.policy.1.json" --json "$tmp/pp.opt.1.json" >/dev/null 2>&1 || fail "optimize in one process"
opt_nps=(2 4)
[ "$light" = 1 ] && opt_nps=(2)
for np in "${opt_nps[@]}"; do
  mpi "$np" optimize "${files[@]}" -o "$tmp/pp.policy.np$np.json" --json "$tmp/pp.opt.np$np.json" >/dev/null 2>&1 ||
    fail "optimize with $np processes"
  if cmp -s "$tmp/pp.policy.1.json" "$tmp/pp.policy.np$np.json"; then ok; else fail "optimize np=$np: policy differs"; fi
  same_json "optimize np=$np" "$tmp/pp.opt.1.json" "$tmp/pp.opt.np$np.json"
done
"$emo" whatif "${files[@]}" --scale 'gemm=1.2' --json "$tmp/wi.1.json" >/dev/null 2>&1 || fail "whatif in one process"
mpi 4 whatif "${files[@]}" --scale 'gemm=1.2' --json "$tmp/wi.np4.json" >/dev/null 2>&1 || fail "whatif with 4 processes"
same_json "whatif np=4" "$tmp/wi.1.json" "$tmp/wi.np4.json"
# The topology what-if: train-pp's point-to-point transfers across two hosts of 2 GPUs.
echo '{"gpus_per_host": 2, "intra_host": {"bandwidth_gb_s": 200, "latency_us": 6}, "inter_host": {"bandwidth_gb_s": 25, "latency_us": 10}}' >"$tmp/topo.json"
"$emo" whatif "${files[@]}" --topology "$tmp/topo.json" --json "$tmp/wt.1.json" >/dev/null 2>&1 || fail "whatif --topology in one process"
mpi 2 whatif "${files[@]}" --topology "$tmp/topo.json" --json "$tmp/wt.np2.json" >/dev/null 2>&1 || fail "whatif --topology with 2 processes"
same_json "whatif --topology np=2" "$tmp/wt.1.json" "$tmp/wt.np2.json"
# Each process models the collectives it holds: the text and the warnings at P = 3, the recorded machine
# and a scale on top, as one process's.
echo '{"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 200, "latency_us": 6}}' >"$tmp/topo1.json"
wt=(whatif "${files[@]}" --topology "$tmp/topo.json" --recorded-topology "$tmp/topo1.json" --scale 'gemm=1.2')
"$emo" "${wt[@]}" >"$tmp/wt.1.out" 2>"$tmp/wt.1.err" || fail "whatif --recorded-topology in one process"
mpi 3 "${wt[@]}" >"$tmp/wt.np3.out" 2>"$tmp/wt.np3.err" || fail "whatif --recorded-topology with 3 processes"
if grep -q '^topology' "$tmp/wt.1.out" && cmp -s "$tmp/wt.1.out" "$tmp/wt.np3.out" && cmp -s "$tmp/wt.1.err" "$tmp/wt.np3.err"; then ok
else fail "whatif --recorded-topology np=3 differs"; diff "$tmp/wt.1.out" "$tmp/wt.np3.out"; diff "$tmp/wt.1.err" "$tmp/wt.np3.err" | head; fi
mpi 2 whatif "${files[@]}" --topology "$tmp/no-such-topology.json" >/dev/null 2>"$tmp/wt.err"
rc=$?
if [ "$rc" -ne 0 ] && [ "$(grep -c '^error: ' "$tmp/wt.err")" -eq 1 ]; then ok; else fail "whatif --topology missing file under mpirun: rc $rc"; cat "$tmp/wt.err"; fi

# pack in parts: every process packs its own GPUs; the JSON (every pack), CSV, text and warnings (traces of
# another GPU than --device) are one process's. Data-parallel replicas on different processes share signatures.
pk_nps=(2 3)
[ "$light" = 1 ] && pk_nps=(3)
for fam in train-dp train-pp; do
  pk=(pack "$tmp/$fam" --device a100 --all --csv)
  "$emo" "${pk[@]}" "$tmp/pk.1.csv" --json "$tmp/pk.1.json" >/dev/null 2>&1 || fail "$fam: pack in one process"
  "$emo" "${pk[@]}" "$tmp/pk.1.csv" >"$tmp/pk.1.out" 2>"$tmp/pk.1.err" || fail "$fam: pack text in one process"
  for np in "${pk_nps[@]}"; do
    mpi "$np" "${pk[@]}" "$tmp/pk.np.csv" --json "$tmp/pk.np.json" >/dev/null 2>&1 || fail "$fam: pack with $np processes"
    mpi "$np" "${pk[@]}" "$tmp/pk.np.csv" >"$tmp/pk.np.out" 2>"$tmp/pk.np.err" || fail "$fam: pack text with $np processes"
    if cmp -s "$tmp/pk.1.json" "$tmp/pk.np.json" && cmp -s "$tmp/pk.1.csv" "$tmp/pk.np.csv" && cmp -s "$tmp/pk.1.out" "$tmp/pk.np.out" &&
      grep -q '^warning: .*not the a100 of --device' "$tmp/pk.1.err" && cmp -s "$tmp/pk.1.err" "$tmp/pk.np.err"; then ok
    else fail "$fam: pack np=$np differs"; diff "$tmp/pk.1.out" "$tmp/pk.np.out" | head; diff "$tmp/pk.1.err" "$tmp/pk.np.err" | head; fi
  done
done
grep -q '^replicas: 8 GPUs run 1 distinct' <("$emo" pack "$tmp/train-dp" 2>/dev/null) && ok || fail "train-dp: no replicas found"

# --deprofile in parts: the H200 training step (one rank: the other processes hold none), its profiler's cost
# found from shared replays and taken out; analyze and whatif say what one process says.
h200="$(cd "$(dirname "$0")/../data/traces" && pwd)/h200_transformer_train.json.gz"
for cmd in analyze whatif; do
  extra=()
  [ "$cmd" = whatif ] && extra=(--scale cat:host=0.5)
  "$emo" "$cmd" "$h200" --deprofile "${extra[@]}" >"$tmp/dp.1.out" 2>"$tmp/dp.1.err" || fail "$cmd --deprofile in one process"
  mpi 3 "$cmd" "$h200" --deprofile "${extra[@]}" >"$tmp/dp.np3.out" 2>"$tmp/dp.np3.err" || fail "$cmd --deprofile with 3 processes"
  if grep -q "the profiler's cost was taken out" "$tmp/dp.1.err" && cmp -s "$tmp/dp.1.out" "$tmp/dp.np3.out" &&
    cmp -s "$tmp/dp.1.err" "$tmp/dp.np3.err"; then ok
  else fail "$cmd --deprofile np=3 differs"; diff "$tmp/dp.1.out" "$tmp/dp.np3.out" | head; diff "$tmp/dp.1.err" "$tmp/dp.np3.err" | head; fi
done

# ---- the text and the warnings go out once, from process 0, as one process's ----
mpi 4 analyze "${files[@]}" >"$tmp/text.out" 2>"$tmp/text.err" || fail "analyze text with 4 processes"
n=$(grep -c '^step span' "$tmp/text.out")
[ "$n" = 1 ] && ok || fail "the summary is printed $n times (want once)"
# A step with doubts on every rank (kernels the profiler lost, another one on each rank; rank 2 on another
# ProfilerStep): the same text on stdout and the same warnings on stderr at P = 1, 2 and 3.
python3 - "$tmp/doubts" "${dp_files[@]:0:3}" <<'PY'
import json, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for r, path in enumerate(sys.argv[2:]):
    t = json.load(open(path))
    kept, kernels = [], 0
    for e in t["traceEvents"]:
        if e.get("cat") == "kernel":
            kernels += 1
            if kernels % 4 == r + 1:
                continue
        if r == 2 and str(e.get("name", "")).startswith("ProfilerStep#"):
            e["name"] = "ProfilerStep#%d" % (int(e["name"].split("#")[1]) + 7)
        kept.append(e)
    t["traceEvents"] = kept
    json.dump(t, open(os.path.join(out, "rank%d.json" % r), "w"))
PY
"$emo" analyze "$tmp/doubts" >"$tmp/doubts.1.out" 2>"$tmp/doubts.1.err" || fail "doubts: analyze in one process"
grep -q '^warning: .*launch calls have no GPU activity' "$tmp/doubts.1.err" && ok || fail "doubts: no lost-launch warning"
for np in 1 2 3; do
  mpi "$np" analyze "$tmp/doubts" >"$tmp/doubts.np$np.out" 2>"$tmp/doubts.np$np.err" || fail "doubts: analyze with $np processes"
  if cmp -s "$tmp/doubts.1.out" "$tmp/doubts.np$np.out"; then ok; else fail "doubts np=$np: the text differs"; diff "$tmp/doubts.1.out" "$tmp/doubts.np$np.out" | head; fi
  if cmp -s "$tmp/doubts.1.err" "$tmp/doubts.np$np.err"; then ok; else fail "doubts np=$np: the warnings differ"; diff "$tmp/doubts.1.err" "$tmp/doubts.np$np.err" | head; fi
done
# whatif's text and warnings, each process replaying its part.
"$emo" whatif "$tmp/doubts" --scale 'gemm=1.5' --scale 'cat:host=0.5' >"$tmp/wd.1.out" 2>"$tmp/wd.1.err" || fail "doubts: whatif in one process"
mpi 3 whatif "$tmp/doubts" --scale 'gemm=1.5' --scale 'cat:host=0.5' >"$tmp/wd.np3.out" 2>"$tmp/wd.np3.err" || fail "doubts: whatif with 3 processes"
if cmp -s "$tmp/wd.1.out" "$tmp/wd.np3.out" && cmp -s "$tmp/wd.1.err" "$tmp/wd.np3.err"; then ok; else fail "doubts whatif np=3 differs"; diff "$tmp/wd.1.out" "$tmp/wd.np3.out"; diff "$tmp/wd.1.err" "$tmp/wd.np3.err" | head; fi

# ---- ../shared's 8-rank DLRM step ----
dlrm="$shared/traces/param/et_replay/tests/inputs/extracted/dlrm_kineto"
if [ -n "$shared" ] && [ -d "$dlrm" ]; then
  d=("$dlrm"/*.json)
  "$emo" analyze "${d[@]}" --per-kernel --json "$tmp/dlrm.1.json" >/dev/null 2>&1 || fail "dlrm: analyze in one process"
  for np in 2 8; do
    mpi "$np" analyze "${d[@]}" --per-kernel --json "$tmp/dlrm.np$np.json" >/dev/null 2>&1 || fail "dlrm: analyze with $np processes"
    same_json "dlrm analyze np=$np" "$tmp/dlrm.1.json" "$tmp/dlrm.np$np.json"
  done
  if [ "$light" = 0 ]; then
    "$emo" optimize "${d[@]}" -o "$tmp/dlrm.policy.1.json" >/dev/null 2>&1 || fail "dlrm: optimize in one process"
    mpi 4 optimize "${d[@]}" -o "$tmp/dlrm.policy.np4.json" >/dev/null 2>&1 || fail "dlrm: optimize with 4 processes"
    if cmp -s "$tmp/dlrm.policy.1.json" "$tmp/dlrm.policy.np4.json"; then ok; else fail "dlrm optimize np=4: policy differs"; fi
  fi
else
  echo "skip: ../shared's DLRM step is absent (real data lives beside the checkout)"
fi

# ---- bad input across processes: one error from process 0, exit 1, no output, no hang ----
one_error() {  # NAME WANT_TEXT NP ARGS...
  local name=$1 want=$2 np=$3
  shift 3
  rm -f "$tmp/bad.json"
  local start=$SECONDS
  mpi "$np" "$@" --json "$tmp/bad.json" >"$tmp/bad.out" 2>"$tmp/bad.err"
  local rc=$?
  local errors
  errors=$(grep -c '^error:' "$tmp/bad.err")
  if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then fail "$name: exit $rc"; return; fi
  [ "$errors" = 1 ] || { fail "$name: $errors error lines (want 1)"; cat "$tmp/bad.err"; return; }
  grep -q "^error: .*$want" "$tmp/bad.err" || { fail "$name: the error does not say '$want'"; cat "$tmp/bad.err"; return; }
  [ ! -e "$tmp/bad.json" ] || { fail "$name: wrote output"; return; }
  [ $((SECONDS - start)) -lt 50 ] || { fail "$name: took $((SECONDS - start)) s"; return; }
  ok
}
dp=("$tmp/train-dp"/*.json)
one_error "missing file in the last shard" "absent.json: cannot read" 4 analyze "${dp[@]}" "$tmp/absent.json"
printf '{"traceEvents": [oops' >"$tmp/cut.json"
one_error "a file that is not JSON, read by process 1" "cut.json" 2 analyze "$tmp/cut.json" "${dp[@]}"
cp "${dp[0]}" "$tmp/rank0_copy.json"
one_error "the same rank twice, in two shards" "rank 0 is also the rank of" 4 analyze "${dp[@]}" "$tmp/rank0_copy.json"
one_error "one file given twice" "is given twice as a trace" 2 analyze "${dp[@]}" "${dp[0]}"
python3 - "${dp[1]}" "$tmp/other_world.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["distributedInfo"]["world_size"] = 16
json.dump(t, open(sys.argv[2], "w"))
PY
one_error "another world size" "world_size 16 is not the world_size 8" 4 analyze "${dp[0]}" "$tmp/other_world.json" "${dp[@]:2}"
one_error "a step no rank has" "999" 4 analyze "${dp[@]}" --step 999
one_error "a scale that matches nothing" "matches no node of the step" 4 whatif "${dp[@]}" --scale 'no such kernel=2'
echo '{"gpus_per_host": 1, "intra_host": {"bandwidth_gb_s": 200, "latency_us": 6}}' >"$tmp/topo_nonet.json"
one_error "a topology without the link the collectives cross" "has no 'inter_host' link" 3 whatif "${dp[@]}" --topology "$tmp/topo_nonet.json"
printf '{"gpus_per_host": 2,' >"$tmp/topo_cut.json"
one_error "a topology file that is not JSON" "topo_cut.json" 3 whatif "${dp[@]}" --topology "$tmp/topo_cut.json"
one_error "a plan with more clocks than the device has, packed in parts" "--profile-clocks" 3 pack "${dp[@]}" --profile-clocks 1000
one_error "standard input under MPI" "standard input cannot be shared" 2 analyze - "${dp[0]}"
one_error "an output that cannot be written" "cannot write" 4 analyze "${dp[@]}" --kernels-csv /nonexistent-dir/x.csv
# --json too: process 0 stops the others before the reading, at once.
start=$SECONDS
mpi 4 analyze "${dp[@]}" --json /nonexistent-dir/x.json >/dev/null 2>"$tmp/nojson.err"
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$(grep -c '^error:' "$tmp/nojson.err")" = 1 ] && grep -q '^error: .*cannot write' "$tmp/nojson.err" &&
  [ $((SECONDS - start)) -lt 50 ]; then ok; else fail "--json that cannot be written under mpirun: exit $rc"; cat "$tmp/nojson.err"; fi

# A process that is stuck: the wait ends with an error within EMO_MPI_TIMEOUT_S.
mkfifo "$tmp/stuck.json"
start=$SECONDS
EMO_MPI_TIMEOUT_S=3 timeout 60 "$mpirun" --oversubscribe -np 2 -x EMO_MPI_TIMEOUT_S "$emo" analyze "${dp[0]}" "$tmp/stuck.json" \
  >/dev/null 2>"$tmp/stuck.err"
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "^error: .*process 1 sent nothing for 3 s" "$tmp/stuck.err"; then ok
else fail "a stuck process: exit $rc after $((SECONDS - start)) s"; cat "$tmp/stuck.err"; fi

# Subcommands that read no trace run on process 0 alone: one set of files.
mpi 3 synth train-dp --ranks 2 -o "$tmp/synth3" >"$tmp/synth3.out" 2>&1 || fail "synth under mpirun"
n=$(grep -c 'events' "$tmp/synth3.out")
[ "$n" = 2 ] && ok || fail "synth under 3 processes printed $n lines (want 2)"

echo "mpi_test: $pass passed, $fails failed"
[ "$fails" = 0 ]
