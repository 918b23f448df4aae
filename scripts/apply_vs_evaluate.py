#!/usr/bin/env python3
"""The runtime applying a policy online (`emo apply`) against `emo evaluate`'s measurement (docs/runtime.md).

For each `emo synth` family of scripts/pack_and_savings.py (train-pp there is the built-in example)
x device x seed, runs

    emo optimize TRACES... --device emulated:DEV@SEED --max-slowdown D -o policy.json
    emo apply policy.json TRACES... --device emulated:DEV@SEED --steps N --evaluate --json -

and prints a markdown table, one row per workload x device: the runtime's measured saving and
slowdown (median and min-max over the seeds), `emo evaluate`'s, the largest gap in saving (points),
the largest slowdown against the bound, and the fallbacks. The goal (issue: "its measured saving
within 1.5 points of `emo evaluate`'s and its slowdown within the bound + 0.5 point") is checked per
cell and counted on the last line, with the command line, date, machine and total time.

usage: scripts/apply_vs_evaluate.py [--emo build/tools/emo/emo] [--seeds 1-5] [--devices h100]
       [--max-slowdown 0.05] [--steps 300] [--verify] [--families example,train-dp,...]
"""
import argparse
import datetime
import importlib.util
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def families():
    spec = importlib.util.spec_from_file_location("pack_and_savings", os.path.join(HERE, "pack_and_savings.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return [(name, name, args) for name, args in m.FAMILIES]


def seeds_of(s):
    out = []
    for part in s.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError((p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[0])
    return p.stdout


def span(v):
    return f"{statistics.median(v):.1f} ({min(v):.1f}–{max(v):.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--emo", default=os.path.join(HERE, "..", "build", "tools", "emo", "emo"))
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--devices", default="h100")
    ap.add_argument("--max-slowdown", type=float, default=0.05)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--families", default="")
    a = ap.parse_args()
    t0 = time.monotonic()
    want = set(filter(None, a.families.split(",")))
    rows, cells, met = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, fam, args in families():
            if want and name not in want:
                continue
            tdir = os.path.join(tmp, name)
            run([a.emo, "synth", fam, *args, "-o", tdir])
            traces = sorted(os.path.join(tdir, f) for f in os.listdir(tdir) if f.endswith(".json"))
            for dev in a.devices.split(","):
                got = {"apply_s": [], "apply_d": [], "eval_s": [], "eval_d": [], "gap": [], "fb": 0}
                err = None
                for seed in seeds_of(a.seeds):
                    spec = f"emulated:{dev}@{seed}"
                    pol = os.path.join(tmp, f"{name}-{dev}-{seed}.json")
                    try:
                        run([a.emo, "optimize", *traces, "--device", spec, "--max-slowdown", str(a.max_slowdown), "-o", pol])
                        cmd = [a.emo, "apply", pol, *traces, "--device", spec, "--steps", str(a.steps), "--evaluate",
                               "--json", "-"] + (["--verify"] if a.verify else [])
                        j = json.loads(run(cmd))
                    except RuntimeError as e:
                        err = str(e)
                        break
                    m = j["measured"]["policy"]
                    got["apply_s"].append(m["saving_pct"])
                    got["apply_d"].append(m["slowdown_pct"])
                    got["eval_s"].append(j["evaluate"]["saving_pct"])
                    got["eval_d"].append(j["evaluate"]["slowdown_pct"])
                    got["gap"].append(m["saving_pct"] - j["evaluate"]["saving_pct"])
                    got["fb"] += len(j["fallbacks"])
                    cells += 1
                    ok = abs(got["gap"][-1]) <= 1.5 and m["slowdown_pct"] <= 100 * a.max_slowdown + 0.5
                    met += ok
                    print(f"{name} {spec}: apply {m['saving_pct']:.2f} % at {m['slowdown_pct']:+.2f} %, evaluate "
                          f"{j['evaluate']['saving_pct']:.2f} % at {j['evaluate']['slowdown_pct']:+.2f} %", file=sys.stderr)
                if err:
                    rows.append(f"| {name} | {dev} | error: {err} | | | | | |")
                    continue
                worst_gap = max(got["gap"], key=abs)
                rows.append(f"| {name} | {dev} | {span(got['apply_s'])} | {span(got['eval_s'])} | {worst_gap:+.2f} | "
                            f"{max(got['apply_d']):+.2f} | {max(got['eval_d']):+.2f} | {got['fb']} |")
    print("| workload | device | apply saved % | evaluate saved % | largest gap (pts) | apply slowdown max % | "
          "evaluate slowdown max % | fallbacks |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print(f"{met} of {cells} cells within the goal (saving within 1.5 points of evaluate's, slowdown within "
          f"the bound + 0.5). `{' '.join(shlex.quote(x) for x in sys.argv)}`, {datetime.date.today()}, "
          f"{platform.machine()} {os.cpu_count()} CPUs, {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
