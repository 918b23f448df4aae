#!/usr/bin/env python3
"""Compares EMO's critical path with HTA's expected output on HTA's simple_add trace.

HTA's end-to-end test overlays its critical path on the input trace (args.critical = 1 on each
event on the path). This runs `emo analyze --json` on the same input and lists, for GPU ops
and CPU-side events, which are on both paths and which on one only.

usage: scripts/compare_hta_critical_path.py [--emo build/tools/emo/emo] [--shared ../shared]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys

REL = "traces/hta/tests/data/critical_path/end_to_end/simple_add"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--shared", default="../shared")
    a = ap.parse_args()
    inp = os.path.join(a.shared, REL, "input/trace.json.gz")
    out = os.path.join(a.shared, REL, "output/overlaid_critical_path_trace.json.gz")
    if not os.path.exists(inp):
        sys.exit(f"skip: {inp} is absent")
    res = json.loads(subprocess.run([a.emo, "analyze", inp, "--per-kernel", "--json", "-"], check=True,
                                    stdout=subprocess.PIPE).stdout)
    events = [e for e in load(out) if e.get("ph") == "X" and e.get("cat") not in ("Trace",)]
    t0 = min(e["ts"] for e in events if e.get("cat") in GPU_CATS | {"cpu_op", "cuda_runtime", "user_annotation"})
    hta_gpu = {(e["name"], round(e["ts"] - t0)) for e in events
               if e.get("cat") in GPU_CATS and e.get("args", {}).get("critical")}
    ours_gpu = {(k["name"], round(k["start_us"])) for k in res["critical_path"]["gpu_ops"]}
    both = hta_gpu & ours_gpu
    print(f"HTA critical-path GPU ops: {len(hta_gpu)}; EMO: {len(ours_gpu)}; on both: {len(both)}")
    for tag, s in (("HTA only", hta_gpu - ours_gpu), ("EMO only", ours_gpu - hta_gpu)):
        for name, ts in sorted(s, key=lambda x: x[1]):
            print(f"  {tag}: {name[:70]} at {ts} us")
    hta_len = max(e["ts"] + e["dur"] for e in events if e.get("args", {}).get("critical")) - \
        min(e["ts"] for e in events if e.get("args", {}).get("critical"))
    print(f"path span: HTA {hta_len:.0f} us, EMO {res['critical_path']['length_us']:.0f} us")
    print(f"EMO breakdown (us): {res['critical_path']['breakdown']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
