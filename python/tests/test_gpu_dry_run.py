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
