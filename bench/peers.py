#!/usr/bin/env python3
"""EMO side by side with its peers, on the same inputs, in the same run (docs/performance.md, "Peers").

1. Critical path of real Kineto traces: `emo analyze TRACE --json -` against HTA's critical-path analysis
   (HolisticTraceAnalysis: `TraceAnalysis(trace_dir=DIR).critical_path_analysis(rank, annotation,
   instance_id)`) on the same trace and the same step. HTA reads a folder with one file per rank: the
   script links the trace into a temporary folder as `rank-0.json[.gz]`. When EMO picks a ProfilerStep,
   HTA gets annotation "ProfilerStep" and the instance of that step (the last step is kept:
   `include_last_profiler_step=True`); when the trace has no ProfilerStep, both take the whole trace
   (HTA: annotation ""). Each tool is timed two ways: inside its process, imports left out (HTA: its
   trace load plus the analysis; EMO: `emo.analyze(trace)`, which reads, builds the graph, replays it
   and finds the critical path and the slack, from EMO's Python package in a child interpreter,
   --emo-python), and as a whole process (EMO: `emo
   analyze TRACE --json -`; HTA: Python start-up, imports, load, analysis). The ratios compare like with
   like: in-process with in-process, process with process. Without an interpreter that imports emo the
   in-process ratio is HTA's in-process time against EMO's whole process (which favours HTA).
2. The whole Perseus time-energy frontier of every published (model, GPU, microbatches) of
   ../shared/dvfs: `emo pipeline --profile ... --json` against lowtime 0.3.0 (Perseus' solver,
   Phillips-Dessouky with its Rust max flow) on the same DAG, built from the same stage profile as
   Perseus' examples/perseus.py builds it: per (stage, pass) the candidate options, energy minus the
   blocking power, lowtime's ExponentialModel fit, Synchronous1F1B per stage, forward i on s -> s+1
   and backward i on s+1 -> s, a source and a sink. Each lowtime iteration's point is (makespan,
   sum of fitted costs + stages * makespan * P_block), as in the published files. lowtime runs at most
   --lowtime-budget seconds per file (it needs hours for the 0.1 ms A40 files); when it stops there, the
   comparison covers the points it reached, and its speed is a lower bound (the time it had spent
   without finishing). Energy: at each lowtime point (time T), EMO's lowest energy among its frontier
   points that finish by T, against lowtime's energy at T.

Every tool runs in its own child process, one at a time; peak memory is that child's maximum resident
set (GNU time's %M; wait4's when /usr/bin/time is absent). Times are medians of --reps.

usage: python3 bench/peers.py --emo build/tools/emo/emo --shared ../shared [--quick]
                              [--peer-python /path/to/venv/bin/python] [--reps N]
                              [--lowtime-budget S] [--only hta|lowtime] [--emo-python PY]

The peers are Python packages (the script itself needs only the standard library):
    python3 -m venv build-peers/venv
    build-peers/venv/bin/pip install HolisticTraceAnalysis "pandas<3" lowtime==0.3.0
and pass --peer-python build-peers/venv/bin/python (default: the interpreter running this script); with
    build-peers/venv/bin/pip install scikit-build-core nanobind numpy && build-peers/venv/bin/pip install --no-build-isolation .
the same interpreter runs EMO's package for the in-process times.
HTA 0.5.0 fails under pandas 3 (DataFrame.drop with both axis and columns), hence "pandas<3".
lowtime 0.3.0 installed on the 2-core x86_64 VM from a prebuilt wheel (cp311, manylinux x86_64, its Rust
extension inside); where pip finds no wheel for the platform it builds from source, which needs Rust.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.abspath(__file__)

# Real traces (paths under SHARED/traces), smallest first; on the last one HTA's critical-path analysis stops
# with an assertion (kept to show it). --quick takes the first QUICK.
TRACES = [
    ("HTA simple_add (A100)", "hta/tests/data/critical_path/end_to_end/simple_add/input/trace.json.gz"),
    ("HTA alexnet (A100)", "hta/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"),
    ("TraceLens H100 timesformer", "tracelens/tests/traces/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"),
    ("HTA ns_resolution rank 0", "hta/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"),
    ("HTA trace_diff control", "hta/tests/data/trace_diff/control/control.json.gz"),
    ("PARAM resnet (kineto)", "param/et_replay/tests/inputs/resnet_kineto.json.gz"),
    ("TraceLens H100 owlv2", "tracelens/tests/traces/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz"),
    ("Kineto resnet50 (V100)", "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz"),
]
QUICK = 3

MODELS = [("gpt3-175b", "GPT-3 175B"), ("bloom", "BLOOM 176B")]
# GPU, its name, Perseus' blocking power (W), the published files' time unit (s).
GPUS = [("a100_sxm", "A100", 83.64, 0.001), ("a40", "A40", 70.38, 0.0001)]
MICROBATCHES = [12, 24, 48, 96]
STAGES = 8

PIP = 'pip install HolisticTraceAnalysis "pandas<3" lowtime==0.3.0'
# What each part imports in the peer interpreter (a check that fails names the problem), and its pip line.
PEER_CHECKS = {
    "hta": ("import hta.trace_analysis, pandas\n"
            "assert int(pandas.__version__.split('.')[0]) < 3, "
            "f'pandas {pandas.__version__}: HTA 0.5.0 needs pandas < 3'\n"
            "from importlib.metadata import version; print('HolisticTraceAnalysis', version('HolisticTraceAnalysis'))",
            'HolisticTraceAnalysis "pandas<3"'),
    "lowtime": ("import lowtime, lowtime.solver, lowtime._lowtime_rs\nprint('lowtime', lowtime.__version__)",
                "lowtime==0.3.0"),
}


# ----------------------------------------------------------------------------------------------------------
# Child processes
# ----------------------------------------------------------------------------------------------------------

TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def run_child(cmd, out_path=None, timeout=None):
    """Runs cmd in a child; returns (rc, wall_s, peak_rss_bytes, last stderr line); killed after timeout s.

    The peak RSS is read by /usr/bin/time (GNU time's %M) when it is there: Linux carries a process'
    high-water mark across exec, so wait4 on a child forked from this Python process would count this
    process' own RSS (≈ 10-20 MiB) too; with /usr/bin/time in between, only its ≈ 2 MiB. Without it,
    wait4's figure is used (an overestimate by that much)."""
    err = tempfile.TemporaryFile()
    out = open(out_path, "wb") if out_path else subprocess.DEVNULL
    rss_file = None
    if TIME:
        fd, rss_file = tempfile.mkstemp(prefix="emo_peers_rss_")
        os.close(fd)
        cmd = [TIME, "-f", "%M", "-o", rss_file, *cmd]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True)
    killer = None
    if timeout is not None:  # the tool and /usr/bin/time in front of it
        killer = threading.Timer(timeout, os.killpg, (p.pid, signal.SIGKILL))
        killer.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if killer:
        killer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    if out_path:
        out.close()
    err.seek(0)
    tail = err.read().decode(errors="replace").strip().splitlines()[-1:]
    err.close()
    peak = ru.ru_maxrss * 1024
    if rss_file:
        with open(rss_file) as f:
            lines = [ln for ln in f.read().split() if ln.isdigit()]
        os.unlink(rss_file)
        if lines:
            peak = int(lines[-1]) * 1024
    return p.returncode, wall, peak, " / ".join(tail)


def check_peer(python, which):
    """Returns (error message or None, the peer's version line)."""
    code, pkg = PEER_CHECKS[which]
    p = subprocess.run([python, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode == 0:
        return None, p.stdout.strip()
    last = (p.stderr.strip().splitlines() or ["?"])[-1]
    return (f"{which}: the peer interpreter {python} cannot run it ({last}). Install it with\n"
            f"    {python} -m pip install {pkg}\n"
            f"(or make a venv: python3 -m venv build-peers/venv && build-peers/venv/bin/{PIP}; "
            f"then --peer-python build-peers/venv/bin/python)"), None


def child_hta(a):
    """In the peer interpreter: HTA's critical path of one trace; writes a JSON result to a.out."""
    import logging
    import resource
    logging.disable(logging.CRITICAL)
    import warnings
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis
    t1 = time.perf_counter()
    devnull = open(os.devnull, "w")
    saved = sys.stdout
    sys.stdout = devnull  # HTA prints progress and summaries
    try:
        analyzer = TraceAnalysis(trace_dir=a.trace_dir, include_last_profiler_step=True)
        t2 = time.perf_counter()
        annotation, instance = "", None
        rank = a.rank if a.rank in analyzer.t.traces else next(iter(analyzer.t.traces))  # its distributedInfo
        if a.step >= 0:  # the instance of ProfilerStep#step among HTA's "ProfilerStep" annotations (not timed)
            df = analyzer.t.get_trace(rank)
            sym_map = analyzer.t.symbol_table.get_sym_id_map()
            ids = {v: k for k, v in sym_map.items() if "ProfilerStep" in k}
            names = [ids[n] for n in df[df.name.isin(list(ids))].name]
            want = f"ProfilerStep#{a.step}"
            if want not in names:
                raise SystemExit(f"HTA: {want} is not in the trace")
            annotation, instance = "ProfilerStep", names.index(want)
        t3 = time.perf_counter()
        res = analyzer.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
        t4 = time.perf_counter()
    finally:
        sys.stdout = saved
    ok = bool(res and res[1])
    length = span = None
    if ok:  # the sum of the path's edge weights, and the time from its first node to its last
        cp = res[0]
        length = sum(e.weight for e in cp.critical_path_edges_set)
        span = cp.node_list[cp.critical_path_nodes[-1]].ts - cp.node_list[cp.critical_path_nodes[0]].ts
    out = {"import_s": t1 - t0, "load_s": t2 - t1, "analysis_s": t4 - t3, "ok": ok, "length_us": length, "span_us": span,
           "nodes": len(res[0].critical_path_nodes) if ok else 0, "annotation": annotation, "instance": instance,
           "children_maxrss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}
    with open(a.out, "w") as f:
        json.dump(out, f)


def child_emo(a):
    """In an interpreter with EMO's Python package: emo.analyze of one trace, timed inside the process as
    HTA's child times HTA (the import left out); writes a JSON result to a.out."""
    import resource
    t0 = time.perf_counter()
    import emo
    import pandas  # noqa: F401  (emo builds its DataFrames with it; HTA's import brings it in too)
    t1 = time.perf_counter()
    an = emo.analyze(a.trace)  # read, graph, replay, critical path and slack: the document in memory
    t2 = time.perf_counter()
    path = an.critical_path  # the path piece by piece as a DataFrame (not timed: HTA's is not turned into one)
    out = {"import_s": t1 - t0, "analyze_s": t2 - t1, "length_us": an.critical_path_us, "path_rows": len(path),
           "version": emo.__version__, "children_maxrss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}
    with open(a.out, "w") as f:
        json.dump(out, f)


def child_lowtime(a):
    """In the peer interpreter: lowtime 0.3.0's whole frontier on Perseus' DAG; writes JSON to a.out."""
    import logging
    logging.disable(logging.CRITICAL)
    import warnings
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    import networkx as nx
    import pandas as pd
    import lowtime
    from lowtime.operation import CandidateExecutionOptions, OperationSpec, ExecutionOption
    from lowtime.cost_model import ExponentialModel
    from lowtime.perseus.instruction import Forward, Backward
    from lowtime.perseus.schedule import Synchronous1F1B
    from lowtime.solver import PhillipsDessouky
    from lowtime.graph_utils import add_source_node, add_sink_node
    t1 = time.perf_counter()

    # Per (stage, pass): options -> candidates (Pareto, floor-quantized, one per unit) -> effective
    # energy (minus the blocking power) -> exponential fit, as Perseus' examples/perseus.py.
    inst_df = pd.read_csv(a.profile)
    op_spec_map = {}
    for instruction in (Forward, Backward):
        name = instruction.__name__.lower()
        for stage in range(a.stages):
            rows = inst_df[(inst_df.stage == stage) & (inst_df.instruction == name)]
            options = [ExecutionOption[int](real_time=float(r.time), unit_time=a.unit, cost=float(r.energy),
                                            knob=int(r.frequency)) for r in rows.itertuples()]
            cand = CandidateExecutionOptions[int](options=options)
            for o in cand.options:
                o.cost -= a.power * o.quant_time * o.unit_time
            op_spec_map.setdefault(stage, {})[instruction] = OperationSpec[int](options=cand,
                                                                                cost_model=ExponentialModel(cand))
    t2 = time.perf_counter()

    # The DAG: nodes stage by stage in 1F1B order (0 = source, 1 = sink), program-order edges, then the
    # cross-stage dependencies in the order Perseus' DependencyResolver over all node pairs adds them
    # (each node has at most one: forward i on s -> s+1, backward i on s+1 -> s), found by lookup.
    dag = nx.DiGraph()
    node_id = 2
    key_to_id = {}
    order = []
    for stage in range(a.stages):
        ids = []
        for inst in Synchronous1F1B(num_stages=a.stages, num_micro_batches=a.microbatches, stage_id=stage,
                                    operation_spec_map=op_spec_map[stage]):
            dag.add_node(node_id, op=inst)
            key_to_id[(type(inst), inst.stage_id, inst.micro_batch_id)] = node_id
            order.append((node_id, inst))
            ids.append(node_id)
            node_id += 1
        for u, v in zip(ids, ids[1:]):
            dag.add_edge(u, v)
    for nid, inst in order:
        nxt = inst.stage_id + 1 if isinstance(inst, Forward) else inst.stage_id - 1
        other = key_to_id.get((type(inst), nxt, inst.micro_batch_id))
        if other is not None:
            dag.add_edge(nid, other)
    add_source_node(dag, 0)
    add_sink_node(dag, 1)
    dag.graph["source_node"] = 0
    dag.graph["sink_node"] = 1
    t3 = time.perf_counter()

    points = []
    complete = True
    solver = PhillipsDessouky(dag)
    for result in solver.run():
        points.append([result.real_time, result.cost + a.stages * result.real_time * a.power])
        if time.perf_counter() - t3 > a.budget:
            complete = False
            break
    t4 = time.perf_counter()
    with open(a.out, "w") as f:
        json.dump({"version": lowtime.__version__, "import_s": t1 - t0, "fit_s": t2 - t1, "dag_s": t3 - t2,
                   "solve_s": t4 - t3, "complete": complete, "nodes": dag.number_of_nodes() - 2,
                   "edges": dag.number_of_edges(), "points": points}, f)


# ----------------------------------------------------------------------------------------------------------
# Part 1: critical path
# ----------------------------------------------------------------------------------------------------------

def mib(b):
    return f"{b / 2**20:.0f} MiB"


def emo_analyze(emo, trace, reps, tmp):
    out = os.path.join(tmp, "emo.json")
    walls, rss = [], 0
    for _ in range(reps):
        rc, wall, peak, err = run_child([emo, "analyze", trace, "--json", "-"], out_path=out)
        if rc != 0:
            return None, f"emo exit {rc}: {err}"
        walls.append(wall)
        rss = max(rss, peak)
    with open(out) as f:
        j = json.load(f)
    return {"wall_s": statistics.median(walls), "rss": rss, "step": j["ranks"][0]["step"],
            "length_us": j["critical_path"]["length_us"], "gpu_ops": j["critical_path"]["gpu_ops_on_path"],
            "nodes": j["nodes"]}, None


def emo_in_process(python, trace, reps, tmp):
    """EMO through its Python package, timed inside the child as HTA is: median analyze time (s) or an error."""
    out = os.path.join(tmp, "emo_py.json")
    times = []
    for _ in range(reps):
        if os.path.exists(out):
            os.unlink(out)
        rc, _, _, err = run_child([python, HERE, "--child", "emo", "--trace", trace, "--out", out])
        if rc != 0 or not os.path.exists(out):
            return None, f"emo.analyze exit {rc}: {err}"
        with open(out) as f:
            times.append(json.load(f)["analyze_s"])
    return statistics.median(times), None


def find_emo_python(a):
    """The interpreter that runs EMO's Python package for the in-process times: --emo-python, else the
    peer interpreter, this one or the project's test venv, the first that imports emo; None when none does."""
    venv = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "emo", "venv", "bin", "python")
    cands = [a.emo_python] if a.emo_python else [a.peer_python, sys.executable, venv]
    for py in cands:
        if py and os.access(py, os.X_OK) and subprocess.run([py, "-c", "import emo"], stdout=subprocess.DEVNULL,
                                                            stderr=subprocess.DEVNULL).returncode == 0:
            return py
    if a.emo_python:
        sys.exit(f"error: {a.emo_python} cannot import emo (pip install . into it)")
    return None


def hta_analyze(python, trace, step, reps, tmp, timeout):
    d = os.path.join(tmp, "hta_trace")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.symlink(os.path.abspath(trace), os.path.join(d, "rank-0" + (".json.gz" if trace.endswith(".gz") else ".json")))
    out = os.path.join(tmp, "hta.json")
    runs = []
    for _ in range(reps):
        if os.path.exists(out):
            os.unlink(out)
        rc, wall, peak, err = run_child([python, HERE, "--child", "hta", "--trace-dir", d, "--rank", "0",
                                         "--step", str(step), "--out", out], timeout=timeout)
        if rc != 0 or not os.path.exists(out):
            return None, (f"HTA exit {rc}: {err}" if wall < timeout else f"HTA did not finish in {timeout:.0f} s")
        with open(out) as f:
            j = json.load(f)
        j["wall_s"], j["rss"] = wall, max(peak, j["children_maxrss"])
        runs.append(j)
    med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
    j = runs[-1]
    j.update({"load_s": med("load_s"), "analysis_s": med("analysis_s"), "wall_s": med("wall_s"),
              "rss": max(r["rss"] for r in runs)})
    return j, None


def part_hta(a, tmp):
    root = os.path.join(a.shared, "traces")
    traces = TRACES[:QUICK] if a.quick else TRACES
    print("## Critical path: EMO vs HTA (HolisticTraceAnalysis)\n")
    py = find_emo_python(a)
    if py is None:
        print("note: no interpreter here imports EMO's Python package (pip install . into one, then --emo-python): "
              "the in-process column and ratio are left out\n")
    print("| trace | size | step | EMO: in-process, process (s) | HTA: load + analysis, process (s) | "
          "HTA / EMO: in-process, process | EMO peak RSS | HTA peak RSS | critical path found (EMO / HTA) | "
          "path length EMO / HTA: span, Σ edge weights (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    ratios, failed = [], []
    for name, rel in traces:
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            print(f"| {name} | absent | | | | | | | | | |")
            continue
        size = f"{os.path.getsize(path) / 1e6:.2f} MB"
        e, err = emo_analyze(a.emo, path, a.reps, tmp)
        if e is None:
            print(f"| {name} | {size} | | {err} | | | | | | |")
            continue
        e["in_s"] = None
        if py is not None:
            e["in_s"], err = emo_in_process(py, path, a.reps, tmp)
            if e["in_s"] is None:
                print(f"| {name} | {size} | | {err} | | | | | | |")
                continue
        emo_s = (f"{e['in_s']:.4f}, " if e["in_s"] is not None else "—, ") + f"{e['wall_s']:.3f}"
        h, err = hta_analyze(a.peer_python, path, e["step"], a.reps, tmp, a.hta_timeout)
        step = "whole trace" if e["step"] < 0 else str(e["step"])
        emo_found = "yes" if e["nodes"] > 0 and e["length_us"] > 0 else "no"
        if h is None:
            failed.append((name, err))
            print(f"| {name} | {size} | {step} | {emo_s} | fails (below) | | {mib(e['rss'])} | | "
                  f"{emo_found} / no | {e['length_us'] / 1e3:.1f} / — |")
            continue
        hta_s = h["load_s"] + h["analysis_s"]
        pratio = h["wall_s"] / e["wall_s"]
        # In-process against in-process when EMO's package is here; else HTA's in-process against EMO's process.
        ratio = hta_s / (e["in_s"] if e["in_s"] is not None else e["wall_s"])
        ratios.append((name, ratio, pratio))
        hl = f"{h['span_us'] / 1e3:.1f}, {h['length_us'] / 1e3:.1f}" if h["length_us"] is not None else "—"
        in_ratio = f"{ratio:.0f}×" if e["in_s"] is not None else f"({ratio:.0f}× against EMO's process)"
        print(f"| {name} | {size} | {step} | {emo_s} | {h['load_s']:.2f} + {h['analysis_s']:.2f}, "
              f"{h['wall_s']:.2f} | {in_ratio}, {pratio:.0f}× | {mib(e['rss'])} | {mib(h['rss'])} | "
              f"{emo_found} / {'yes' if h['ok'] else 'no'} | {e['length_us'] / 1e3:.1f} / {hl} |")
    for name, err in failed:
        print(f"\n{name}: {err}")
    if ratios:
        kind = "in-process" if py is not None else "HTA in-process against EMO's process"
        for label, k in ((kind, 1), ("process against process", 2)):
            worst = min(ratios, key=lambda x: x[k])
            rs = [r[k] for r in ratios]
            print(f"\nHTA / EMO time, {label}: {min(rs):.0f}× to {max(rs):.0f}× (median {statistics.median(rs):.0f}×); "
                  f"≥ 50× on every trace: {'yes' if worst[k] >= 50 else 'no (' + worst[0] + f': {worst[k]:.0f}×)'}")
        print()


# ----------------------------------------------------------------------------------------------------------
# Part 2: Perseus frontier
# ----------------------------------------------------------------------------------------------------------

def emo_pipeline(emo, profile, mb, power, unit, reps, tmp):
    out = os.path.join(tmp, "pipe.json")
    walls, solves, rss = [], [], 0
    for _ in range(reps):
        cmd = [emo, "pipeline", "--profile", profile, "--microbatches", str(mb), "--blocking-power", str(power),
               "--unit-time", str(unit), "--json", out]
        rc, wall, peak, err = run_child(cmd)
        if rc != 0:
            return None, f"emo exit {rc}: {err}"
        with open(out) as f:
            j = json.load(f)
        walls.append(wall)
        solves.append(j["solve_ms"])
        rss = max(rss, peak)
    j["wall_s"], j["solve_ms"], j["rss"] = statistics.median(walls), statistics.median(solves), rss
    return j, None


def lowtime_frontier(python, profile, mb, power, unit, budget, tmp):
    out = os.path.join(tmp, "lowtime.json")
    if os.path.exists(out):
        os.unlink(out)
    cmd = [python, HERE, "--child", "lowtime", "--profile", profile, "--microbatches", str(mb), "--stages",
           str(STAGES), "--power", str(power), "--unit", str(unit), "--budget", str(budget), "--out", out]
    rc, wall, peak, err = run_child(cmd, timeout=budget * 2 + 300)
    if rc != 0 or not os.path.exists(out):
        return None, f"lowtime exit {rc}: {err}"
    with open(out) as f:
        j = json.load(f)
    j["wall_s"], j["rss"] = wall, peak
    return j, None


def compare_energy(ours, theirs, unit):
    """At each of their points (T, E): our least energy among points with time <= T, vs E."""
    ours = sorted(ours)
    best, k, diffs = [], 0, []
    run = float("inf")
    for t, e in ours:
        run = min(run, e)
        best.append((t, run))
    for t, e in sorted(theirs):
        while k < len(best) and best[k][0] <= t + unit * 1e-6:
            k += 1
        if k == 0:
            diffs.append(float("inf"))
        else:
            diffs.append((best[k - 1][1] - e) / e)
    return diffs


def pct(x):
    if x == float("inf"):
        return "uncovered"
    return f"{100 * x:+.2g} %" if abs(x) >= 1e-4 else f"{100 * x:+.1e} %"


def part_lowtime(a, tmp):
    dvfs = os.path.join(a.shared, "dvfs")
    budget = a.lowtime_budget
    print("## Perseus frontier: EMO vs lowtime 0.3.0\n")
    print(f"lowtime budget: {budget:.0f} s per file (it stops after the first iteration past it). Energy: "
          "at each point lowtime produced, EMO's least energy by that time vs lowtime's; ≤ counts exact, "
          "then within a relative 1e-8 and 1e-5.\n")
    print("| model | GPU | µbatches | nodes | EMO: points, time (s), solve (ms), peak RSS | "
          "lowtime: points, fit + DAG + solve (s), peak RSS | lowtime / EMO time | "
          "at lowtime's points: EMO ≤ / within 1e-8 / within 1e-5 of lowtime | max (EMO − lowtime) / lowtime | mean | "
          "lowtime vs published: max rel. diff | EMO vs published: within 1e-5, max |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    cases = [(m, mn, g, gn, p, u, mb) for m, mn in MODELS for g, gn, p, u in GPUS for mb in MICROBATCHES]
    if a.quick:
        cases = [c for c in cases if c[2] == "a100_sxm" and c[6] == 12]
    summary = {"faster": 0, "files": 0, "le": 0, "le8": 0, "within": 0, "points": 0, "worst": -float("inf"),
               "complete": 0, "min_ratio": float("inf")}
    blank = " | " * 7
    for model, model_name, gpu, gpu_name, power, unit, mb in cases:
        profile = os.path.join(dvfs, f"zeus-kronos__emulation__stage_profile__{model}_{gpu}_bf16.csv")
        published = os.path.join(dvfs, f"zeus-kronos__emulation__iteration_time_energy__{gpu}__{model}_bf16_mb{mb}.csv")
        if not os.path.exists(profile):
            print(f"| {model_name} | {gpu_name} | {mb} | profile absent{blank}|")
            continue
        e, err = emo_pipeline(a.emo, profile, mb, power, unit, a.reps, tmp)
        if e is None:
            print(f"| {model_name} | {gpu_name} | {mb} | {err}{blank}|")
            continue
        ours = [tuple(p) for p in e["frontier"]]
        pub = []
        if os.path.exists(published):
            with open(published) as f:
                next(f)
                pub = [tuple(map(float, line.split(","))) for line in f if line.strip()]
        emo_vs_pub = "—"
        if pub:
            d = compare_energy(ours, pub, unit)
            emo_vs_pub = f"{sum(x <= 1e-5 for x in d)} of {len(d)}, {pct(max(d))}"
        head = (f"| {model_name} | {gpu_name} | {mb} | {e['nodes']} | {len(ours)}, {e['wall_s']:.3f}, "
                f"{e['solve_ms']:.0f}, {mib(e['rss'])} |")
        lt, err = lowtime_frontier(a.peer_python, profile, mb, power, unit, budget, tmp)
        if lt is None:
            print(f"{head} {err} | | | | | | {emo_vs_pub} |")
            continue
        summary["files"] += 1
        theirs = [tuple(p) for p in lt["points"]]
        lt_s = lt["fit_s"] + lt["dag_s"] + lt["solve_s"]
        ratio = lt_s / e["wall_s"]
        summary["faster"] += ratio > 1
        summary["min_ratio"] = min(summary["min_ratio"], ratio)
        summary["complete"] += lt["complete"]
        if lt["complete"]:
            total, ratio_s = f"{len(theirs)}", f"{ratio:.0f}×"
        else:
            n = len(pub) if pub else None
            total = f"{len(theirs)} of {n if n else '?'} (stopped)"
            ratio_s = f"> {ratio:.0f}×"
            if n and theirs:  # at the pace of the iterations it did
                ratio_s += f" (at its pace ≈ {lt['solve_s'] * n / len(theirs) / e['wall_s']:.0f}×)"
        diffs = compare_energy(ours, theirs, unit)
        le = sum(x <= 0 for x in diffs)
        le8 = sum(x <= 1e-8 for x in diffs)
        within = sum(x <= 1e-5 for x in diffs)
        summary["le"] += le
        summary["le8"] += le8
        summary["within"] += within
        summary["points"] += len(diffs)
        worst = max(diffs) if diffs else float("nan")
        summary["worst"] = max(summary["worst"], worst)
        finite = [x for x in diffs if x != float("inf")]
        mean = statistics.fmean(finite) if finite else float("nan")
        vs_pub = "—"
        if pub:  # lowtime 0.3.0 against the published (lowtime) file, point by point from the slowest end
            pub_by_t = {round(t / unit): en for t, en in pub}
            rel = [abs(en - pub_by_t[round(t / unit)]) / pub_by_t[round(t / unit)] for t, en in theirs
                   if round(t / unit) in pub_by_t]
            missing = len(theirs) - len(rel)
            vs_pub = f"{max(rel):.1e}" if rel else "no common time"
            if missing:
                vs_pub += f", {missing} times not published"
        print(f"{head} {total}, {lt['fit_s']:.2f} + {lt['dag_s']:.2f} + {lt['solve_s']:.1f}, {mib(lt['rss'])} | "
              f"{ratio_s} | {le} / {le8} / {within} of {len(diffs)} | {pct(worst)} | {pct(mean)} | {vs_pub} | "
              f"{emo_vs_pub} |")
        sys.stdout.flush()
        if a.points_dir:
            os.makedirs(a.points_dir, exist_ok=True)
            with open(os.path.join(a.points_dir, f"{model}_{gpu}_mb{mb}.csv"), "w") as f:
                f.write("time_s,lowtime_energy_j,emo_energy_j,rel_diff\n")
                for (t, en), x in zip(sorted(theirs), diffs):
                    f.write(f"{t:.6f},{en:.6f},{en * (1 + x) if x != float('inf') else ''},{x:.3e}\n")
    if summary["files"]:
        print(f"\nEMO's whole frontier faster than lowtime on {summary['faster']} of {summary['files']} files "
              f"(at least {summary['min_ratio']:.0f}×; lowtime finished {summary['complete']} of them within the "
              f"budget); at lowtime's {summary['points']} points EMO's energy ≤ lowtime's at {summary['le']}, "
              f"within 1e-8 at {summary['le8']}, within 1e-5 at {summary['within']}; largest (EMO − lowtime) / "
              f"lowtime {pct(summary['worst'])}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--quick", action="store_true",
                    help=f"the {QUICK} smallest traces, the two A100 12-microbatch files, one rep, 60 s lowtime budget")
    ap.add_argument("--peer-python", default=sys.executable,
                    help="Python with HolisticTraceAnalysis and lowtime installed (default: this one)")
    ap.add_argument("--reps", type=int, help="runs of EMO and HTA per input, median (default 3; --quick 1)")
    ap.add_argument("--lowtime-budget", type=float, help="seconds lowtime may run per file (default 300; --quick 60)")
    ap.add_argument("--hta-timeout", type=float, default=900, help="seconds one HTA run may take (default 900)")
    ap.add_argument("--only", choices=["hta", "lowtime"], help="run one part only")
    ap.add_argument("--points-dir", help="write, per file, lowtime's points with EMO's energy at each")
    # Child modes (run in the peer interpreter by this script).
    ap.add_argument("--emo-python", help="Python with EMO's package installed, for the in-process times (default: "
                    "the peer interpreter, this one or ~/.cache/emo/venv, the first that imports emo)")
    ap.add_argument("--child", choices=["hta", "lowtime", "emo"], help=argparse.SUPPRESS)
    for opt, typ in (("--trace", str), ("--trace-dir", str), ("--rank", int), ("--step", int), ("--out", str), ("--profile", str),
                     ("--microbatches", int), ("--stages", int), ("--power", float), ("--unit", float),
                     ("--budget", float)):
        ap.add_argument(opt, type=typ, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child == "hta":
        return child_hta(a)
    if a.child == "lowtime":
        return child_lowtime(a)
    if a.child == "emo":
        return child_emo(a)
    a.reps = a.reps or (1 if a.quick else 3)
    a.lowtime_budget = a.lowtime_budget or (60.0 if a.quick else 300.0)
    if not (os.path.isfile(a.emo) and os.access(a.emo, os.X_OK)):
        sys.exit(f"error: {a.emo} is not an executable (build it, or pass --emo build/tools/emo/emo)")
    if not os.path.isdir(a.shared):
        print(f"skip: {a.shared} is absent (the real traces and the Perseus files live there)")
        return 0
    parts = [a.only] if a.only else ["hta", "lowtime"]
    checks = [check_peer(a.peer_python, p) for p in parts]
    missing = [m for m, _ in checks if m]
    if missing:
        sys.exit("error: a peer package is missing\n" + "\n".join(missing))
    versions = ", ".join(v for _, v in checks)
    if "lowtime" in parts and "lowtime 0.3.0" not in versions.split(", "):
        print("note: this is not lowtime 0.3.0, the version the goals name")
    print(f"EMO: {a.emo}; peers in {a.peer_python} ({versions}); reps {a.reps}; "
          f"{time.strftime('%Y-%m-%d %H:%M')}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}\n")
    tmp = tempfile.mkdtemp(prefix="emo_peers_")
    if "hta" in parts:
        part_hta(a, tmp)
        sys.stdout.flush()
    if "lowtime" in parts:
        part_lowtime(a, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
