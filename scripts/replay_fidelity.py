#!/usr/bin/env python3
"""Replay fidelity on every real trace in ../shared/traces: measured vs replayed step span.

Prints a markdown table (one row per Kineto trace, plus the 8-rank DLRM set as one step).
usage: scripts/replay_fidelity.py [--emo build/tools/emo/emo] [--shared ../shared]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

SKIP = ("_et.json", "dlrm_pytorch_et", "/chakra/", "_et_")


def analyze(emo, files):
    t0 = time.perf_counter()
    p = subprocess.run([emo, "analyze", *files, "--json", "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[0] if p.stderr else f"exit {p.returncode}", dt
    return json.loads(p.stdout), None, dt


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--shared", default="../shared")
    a = ap.parse_args()
    root = os.path.join(a.shared, "traces")
    if not os.path.isdir(root):
        sys.exit(f"skip: {root} is absent")
    files = sorted(p for p in glob.glob(os.path.join(root, "**", "*.json*"), recursive=True)
                   if p.endswith((".json", ".json.gz")) and not any(s in p for s in SKIP))
    runs = [([f], os.path.relpath(f, root)) for f in files]
    dlrm = sorted(glob.glob(os.path.join(root, "param/et_replay/tests/inputs/extracted/dlrm_kineto/*.json")))
    if dlrm:
        runs.append((dlrm, "param/.../dlrm_kineto/worker{0..7} (8 ranks, one step)"))
    print("| trace | events | GPU ops | measured (µs) | replayed (µs) | error | GPU ops on the critical path | GPU ops with no slack | analyze time (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for fs, name in runs:
        j, err, dt = analyze(a.emo, fs)
        if j is None:
            print(f"| {name} | — | — | — | — | {err} | — | — |")
            continue
        ops = j["slack"]["gpu_ops"]
        if ops == 0:
            note = "no GPU ops (CPU-only or not a GPU trace)"
            print(f"| {name} | {j['events']} | 0 | {j['measured_span_us']:.0f} | {j['replayed_span_us']:.0f} | "
                  f"{j['replay_error_pct']:+.3f} % ({note}) | — | {dt:.2f} |")
            continue
        worst = max(worst, abs(j["replay_error_pct"]))
        print(f"| {name} | {j['events']} | {ops} | {j['measured_span_us']:.0f} | {j['replayed_span_us']:.0f} | "
              f"{j['replay_error_pct']:+.3f} % | {j['critical_path'].get('gpu_ops_on_path', '')} | {j['slack'].get('gpu_ops_with_no_slack', j['slack']['gpu_ops_on_critical_path'])} | {dt:.2f} |")
    print(f"\nworst |error| over traces with GPU ops: {worst:.3f} %")


if __name__ == "__main__":
    main()
