"""scripts/gpu_dry_run.py's measurements, on a synthetic trace (the script itself needs a GPU): each
profiled step's first GPU op found by its launch, anchors compared with it, decided changes with their
pack's first op."""

import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("gpu_dry_run", os.path.join(HERE, "..", "..", "scripts", "gpu_dry_run.py"))
g = importlib.util.module_from_spec(spec)
spec.loader.exec_module(g)

BASE = 1_700_000_000_000_000_000


def trace(tmp_path):
    ev = []
    for k in range(3):
        t0 = 1000 * k * 10
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "ts": t0, "dur": 9000, "pid": 1, "tid": 1})
        for j in range(2):
            c = 100 * k + j
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t0 + 10 + j, "dur": 5,
                       "pid": 1, "tid": 1, "args": {"correlation": c}})
            ev.append({"ph": "X", "cat": "kernel", "name": f"k{j}", "ts": t0 + 500 + 1000 * j, "dur": 400, "pid": 0,
                       "tid": 7, "args": {"correlation": c, "stream": 7, "device": 0}})
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"baseTimeNanoseconds": BASE, "traceEvents": ev}))
    return str(p)


def test_first_ops_anchor_errors_and_issue_leads(tmp_path):
    ops = g.gpu_ops_by_step(trace(tmp_path))
    assert [n for n, _ in ops] == [0, 1, 2]
    assert ops[1][1][0] == (BASE + 10_500_000, "k0", 7)
    anchors = [BASE + 500_000 + 200, BASE + 10_500_000 - 300, BASE + 20_500_000 + 1000]
    errs = g.anchor_errors(ops, anchors)
    assert errs == [0.2, -0.3, 1.0]
    s = g.summary(errs)
    assert s["n"] == 3 and s["max"] == 1.0 and s["p50"] == 0.2
    policy = {"packs": [{"first": {"index": 0}}, {"first": {"index": 1}}]}
    issues = {"records": [{"step": 1, "pack": 1}, {"step": 2, "pack": 0}], "at_ns": [BASE + 11_000_000, BASE + 20_600_000]}
    assert g.issue_leads(ops, issues, anchors, policy) == [500.0, -100.0]


def test_gpu_copies_of_profiler_steps_are_not_steps_and_relative_ts_gets_the_base(tmp_path):
    # Newer Kineto writes ts relative to baseTimeNanoseconds and repeats each ProfilerStep on the GPU's
    # timeline (gpu_user_annotation): only the host's steps count.
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "ts": 100.0, "dur": 900, "pid": 1, "tid": 1},
          {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#5", "ts": 150.0, "dur": 800, "pid": 0, "tid": 7},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 110.0, "dur": 5, "pid": 1, "tid": 1,
           "args": {"correlation": 1}},
          {"ph": "X", "cat": "kernel", "name": "k", "ts": 150.0, "dur": 40, "pid": 0, "tid": 7,
           "args": {"correlation": 1, "stream": 7}}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"baseTimeNanoseconds": BASE, "traceEvents": ev}))
    ops = g.gpu_ops_by_step(str(p))
    assert ops == [(5, [(BASE + 150_000, "k", 7)])]
    # Older Kineto: ts since the epoch, the base not added again.
    ev2 = [dict(e, ts=e["ts"] + BASE / 1000) for e in ev]
    p.write_text(json.dumps({"baseTimeNanoseconds": BASE, "traceEvents": ev2}))
    assert abs(g.gpu_ops_by_step(str(p))[0][1][0][0] - (BASE + 150_000)) < 1000  # µs in a double since 1970


def test_a_packs_first_op_is_found_by_stream_name_and_occurrence():
    ops = [(10, "a", 7), (20, "b", 7), (30, "a", 8), (40, "a", 7)]
    assert g.find_op(ops, {"index": 0, "stream": 7, "name": "a", "occurrence": 1}) == (40, "a", 7)
    assert g.find_op(ops, {"index": 0, "stream": 8, "name": "a", "occurrence": 0}) == (30, "a", 8)
    assert g.find_op(ops, {"index": 0, "stream": 7, "name": "a", "occurrence": 2}) is None
    assert g.find_op(ops, {"index": 1}) == (20, "b", 7)
