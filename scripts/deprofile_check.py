#!/usr/bin/env python3
"""A policy made from a step the profiler slowed, against one made from the same step deprofiled.

For each real H200 capture of tests/data/traces (which carry the job's untraced step times) and each
emulated H200 GPU N: `emo deprofile` writes the step as the job runs it without the profiler's host cost;
`emo optimize` makes a policy from the traced step and one from the deprofiled step (profiled and checked
on emulated:h200@N); `emo evaluate` runs both on the job as it runs, on the same GPU, two ways: on the
deprofiled step (as EMO's replay wrote it), and on the traced step with the emulated GPU's executor taking
the host's own time at the same factor by its own rules (`emulated:h200@N:host=F`: nothing of the replay
but the one factor). Prints a markdown table (saving and slowdown measured against the default clocks)
and exits 1 when a deprofiled policy runs over the bound in either.
usage: scripts/deprofile_check.py [--emo build/tools/emo/emo] [--gpus 1,2,3,4,5] [--max-slowdown 0.05]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

TRACES = ("h200_transformer_train.json.gz", "h200_transformer_infer.json.gz")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--gpus", default="1,2,3,4,5")
    ap.add_argument("--max-slowdown", default="0.05")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bound = 100 * float(a.max_slowdown)
    over = 0
    print("| trace | GPU | host x | traced policy on the job: saved, slowdown | deprofiled policy on the job: saved, slowdown "
          "| the same two, the job as the executor runs it |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in TRACES:
            trace = os.path.join(root, "tests", "data", "traces", name)
            dp = os.path.join(tmp, name + ".dp")
            out = run([a.emo, "deprofile", trace, "-o", dp])
            scale = next(l for l in out.splitlines() if l.startswith("host time x")).split()[2].lstrip("x").rstrip(":")
            for n in a.gpus.split(","):
                dev = f"emulated:h200@{n}"
                row, own = [], []
                for src in (trace, dp):
                    pol = os.path.join(tmp, f"{name}.{n}.{'dp' if src == dp else 'traced'}.policy.json")
                    run([a.emo, "optimize", src, "--device", "h200", "--profile-on", dev, "--max-slowdown", a.max_slowdown, "-o", pol])
                    j = json.loads(run([a.emo, "evaluate", pol, dp, "--device", dev, "--json", "-"]))
                    row.append((j["policy"]["saving_pct"], j["policy"]["slowdown_pct"]))
                    j = json.loads(run([a.emo, "evaluate", pol, trace, "--device", f"{dev}:host={scale}", "--json", "-"]))
                    own.append((j["policy"]["saving_pct"], j["policy"]["slowdown_pct"]))
                if row[1][1] > bound or own[1][1] > bound:
                    over += 1
                print(f"| {name} | {n} | {scale} | {row[0][0]:.2f} %, {row[0][1]:+.2f} % | {row[1][0]:.2f} %, {row[1][1]:+.2f} % "
                      f"| {own[0][0]:.2f} %, {own[0][1]:+.2f} %; {own[1][0]:.2f} %, {own[1][1]:+.2f} % |")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
