#!/usr/bin/env python3
"""How much the savings depend on the emulated H100's power and voltage parameters (docs/optimize.md).

The H100 profile's voltage knee, voltage floor, static power and dynamic power have no public measured
sweep behind them (docs/models.md), and the emulated GPU draws its constants around them
(src/emulator/truth.cpp, make_gpu_truth). This script moves each of them to x0.8 and x1.2 in a copy of
the profile (`emo devices h100 --json`, one field changed) and builds the emulated GPU from that copy,
while the optimizer keeps the built-in h100 profile as its prior:

    emo run TRACES... --device h100 --profile-on emulated:FILE@SEED --max-slowdown D -o OUT --json -

so profiling, the check and the evaluation see the moved truth, the models do not. The unmodified row
runs the same command with --profile-on emulated:h100@SEED. Workloads: the built-in example and the
`emo synth` families train-dp, infer-decode and dataloader (the sizes of scripts/pack_and_savings.py,
3 steps), seeds 1-5 each.

Prints a markdown table, one row per parameter x factor: for each workload the policy saving (median
and min-max over the seeds) and, in brackets, the median over seeds of the paired change against the
unmodified row (same seed, so the same kernel truths); then over all cells the largest slowdown, the
margin over the best baseline within the bound (min / median, points) and the cells over the bound.
A final line gives the command, date, machine and total time. A failed run shows its error in its row.

usage: scripts/power_sensitivity.py [--emo build/tools/emo/emo] [--seeds 1-5] [--factors 0.8,1.2]
       [--params knee,floor,static,dynamic] [--families example,train-dp,infer-decode,dataloader]
       [--max-slowdown 0.05] [--jobs 1] [--timeout 600]
  --params     any of knee, floor, static, dynamic, mem, clock_frac, idle (profile fields below)
"""
import argparse
import concurrent.futures
import copy
import glob
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# name -> (profile field path, what the emulated GPU draws from it in make_gpu_truth)
PARAMS = {
    "knee": (("voltage", "knee_mhz"), "voltage knee (MHz)"),
    "floor": (("voltage", "floor_rel"), "voltage floor (rel. to V(f_max))"),
    "static": (("power_model", "const_w"), "static power (W)"),
    "dynamic": (("power_model", "dynamic_w"), "dynamic power at f_max (W)"),
    "mem": (("power_model", "mem_w"), "memory power (W)"),
    "clock_frac": (("power_model", "clock_frac"), "stalled-SM share of dynamic power"),
    "idle": (("idle_power_w",), "idle power (W)"),
}

WORKLOADS = [("example", "built-in example (train-pp 4 ranks)", None),
             ("train-dp", "train-dp --ranks 2 --layers 24", ["--ranks", "2", "--layers", "24"]),
             ("infer-decode", "infer-decode --ranks 1 --layers 24 --decode-tokens 64",
              ["--ranks", "1", "--layers", "24", "--decode-tokens", "64"]),
             ("dataloader", "dataloader --ranks 2", ["--ranks", "2"])]


def parse_list(s, conv=str):
    return [conv(x) for x in s.split(",") if x.strip()]


def _seeds_script():
    """scripts/savings_over_seeds.py, for its seed-list parser and error line (one of each)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "savings_over_seeds", os.path.join(os.path.dirname(os.path.abspath(__file__)), "savings_over_seeds.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


_SEEDS = _seeds_script()
parse_seeds = _SEEDS.parse_seeds
first_line = _SEEDS.first_line


def get_field(profile, path):
    v = profile
    for k in path:
        v = v[k]
    return v


def write_profile(base, path, key, factor, out):
    """A copy of the profile with one field scaled; its source says so."""
    p = copy.deepcopy(base)
    field = get_field(p, path)
    old = field["value"]
    field["value"] = old * factor
    field["source"] = (f"sensitivity: x{factor:g} of the h100 profile's {old:g} "
                       f"(scripts/power_sensitivity.py); was: {field['source']}")
    p["name"] = f"h100-{key}-x{factor:g}"
    with open(out, "w") as f:
        json.dump({"schema": "emo-devices/1", "devices": [p]}, f, indent=1)
    return old, field["value"]


run_emo = _SEEDS.run_emo


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--seeds", default="1-5", help="emulated GPU seeds: 1-5, or 1,3,7 (default 1-5)")
    ap.add_argument("--factors", default="0.8,1.2")
    ap.add_argument("--params", default="knee,floor,static,dynamic")
    ap.add_argument("--families", default=",".join(w[0] for w in WORKLOADS))
    ap.add_argument("--max-slowdown", type=float, default=0.05)
    ap.add_argument("--jobs", type=int, default=1, help="emo runs at a time (default 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before one emo run is killed")
    a = ap.parse_args()

    t_start = time.monotonic()
    seeds = parse_seeds(a.seeds)
    factors = parse_list(a.factors, float)
    params = parse_list(a.params)
    for k in params:
        if k not in PARAMS:
            sys.exit(f"--params: unknown parameter {k!r} (known: {', '.join(PARAMS)})")
    fams = parse_list(a.families)
    workloads = [w for w in WORKLOADS if w[0] in fams]
    if len(workloads) != len(fams):
        sys.exit(f"--families: known are {', '.join(w[0] for w in WORKLOADS)}")

    tmp = tempfile.mkdtemp(prefix="emo_power_sens_")
    try:
        p = subprocess.run([a.emo, "devices", "h100", "--json", "-"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit(f"emo devices h100 --json -: {first_line(p.stderr, p.returncode)}")
        base = json.loads(p.stdout)["devices"][0]

        # variants: (key, factor, spec, old, new); the unmodified one first
        variants = [("unmodified", 1.0, "h100", None, None)]
        for key in params:
            for fac in factors:
                f = os.path.join(tmp, f"h100_{key}_x{fac:g}.json")
                old, new = write_profile(base, PARAMS[key][0], key, fac, f)
                variants.append((key, fac, f, old, new))

        inputs = {}
        for fam, name, opts in workloads:
            if opts is None:
                inputs[fam] = []
                continue
            d = os.path.join(tmp, "synth", fam)
            p = subprocess.run([a.emo, "synth", fam, *opts, "--steps", "3", "-o", d],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                sys.exit(f"synth {fam}: {first_line(p.stderr, p.returncode)}")
            inputs[fam] = sorted(glob.glob(os.path.join(d, "*.json")))

        jobs = [(vi, fam, seed) for vi in range(len(variants)) for fam, _, _ in workloads for seed in seeds]

        def one(job):
            vi, fam, seed = job
            key, fac, spec, _, _ = variants[vi]
            out = os.path.join(tmp, f"run_{vi}_{fam}_{seed}")
            cmd = [a.emo, "run", *inputs[fam], "--device", "h100", "--profile-on", f"emulated:{spec}@{seed}",
                   "--max-slowdown", str(a.max_slowdown), "-o", out, "--json", "-"]
            s, err, dt = run_emo(cmd, a.timeout)
            shutil.rmtree(out, ignore_errors=True)
            return job, s, err, dt

        results = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
            for job, s, err, dt in ex.map(one, jobs):
                vi, fam, seed = job
                key, fac = variants[vi][0], variants[vi][1]
                print(f"[{time.monotonic() - t_start:7.1f} s] {key} x{fac:g} | {fam}@{seed}: {dt:.1f} s"
                      + (f"  ERROR {err}" if err else
                         f"  saved {s['policy']['saving_pct']:.1f} % at {s['policy']['slowdown_pct']:+.2f} %,"
                         f" margin {s['margin']['points']:+.2f}"), file=sys.stderr, flush=True)
                results[job] = s if s is not None else err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    delta_pct = 100 * a.max_slowdown
    head = ["parameter (h100 value → moved)", "factor"] + [f"{name}: saved % median (min–max) [Δ vs unmodified]"
                                                          for _, name, _ in workloads]
    head += ["mean Δ points", "slowdown % max", "margin points min / median", "cells over δ"]
    rows = []
    for vi, (key, fac, _, old, new) in enumerate(variants):
        label = "unmodified" if key == "unmodified" else f"{PARAMS[key][1]}: {old:g} → {new:.4g}"
        cells, slows, margins, deltas, over, errors = [], [], [], [], 0, []
        for fam, _, _ in workloads:
            got = [(seed, results[(vi, fam, seed)]) for seed in seeds]
            ok = [(seed, r) for seed, r in got if isinstance(r, dict)]
            errors += [f"{fam}@{seed}: {r}" for seed, r in got if not isinstance(r, dict)]
            if not ok:
                cells.append("failed")
                continue
            sav = [r["policy"]["saving_pct"] for _, r in ok]
            slows += [r["policy"]["slowdown_pct"] for _, r in ok]
            margins += [r["margin"]["points"] for _, r in ok]
            over += sum(1 for _, r in ok if r["policy"]["slowdown_pct"] > delta_pct)
            cell = f"{statistics.median(sav):.1f} ({min(sav):.1f}–{max(sav):.1f})"
            if vi > 0:
                paired = [r["policy"]["saving_pct"] - results[(0, fam, seed)]["policy"]["saving_pct"]
                          for seed, r in ok if isinstance(results[(0, fam, seed)], dict)]
                if paired:
                    d = statistics.median(paired)
                    deltas.append(d)
                    cell += f" [{d:+.1f}]"
            cells.append(cell)
        n = len(slows)
        tail = [f"{statistics.mean(deltas):+.2f}" if deltas else "—",
                f"{max(slows):+.2f}" if slows else "—",
                f"{min(margins):+.2f} / {statistics.median(margins):+.2f}" if margins else "—",
                f"{over} of {n}"]
        if errors:
            tail[-1] += f"; {len(errors)} failed ({errors[0]})"
        rows.append([label, "—" if key == "unmodified" else f"×{fac:g}"] + cells + tail)

    total = time.monotonic() - t_start
    print(f"### Savings when the emulated H100's power parameters move (seeds {a.seeds}), δ = {a.max_slowdown:.0%}\n")
    print("| " + " | ".join(head) + " |")
    print("|---|---|" + "---:|" * (len(head) - 2))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    date = time.strftime("%Y-%m-%d", time.gmtime())
    cmdline = " ".join(shlex.quote(x) for x in ["scripts/power_sensitivity.py", *sys.argv[1:]])
    print(f"\n{len(jobs)} `emo run`s; `{cmdline}`, {date}, {len(os.sched_getaffinity(0))} cores (nproc), "
          f"{platform.machine()}, {total:.0f} s in all.")


if __name__ == "__main__":
    main()
