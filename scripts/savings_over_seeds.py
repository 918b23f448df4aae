#!/usr/bin/env python3
"""True savings of `emo run` over several emulated GPUs (seeds), against every baseline (docs/optimize.md).

For each workload (the built-in example, the `emo synth` families of scripts/pack_and_savings.py and,
with --real, its REAL trace sets from ../shared/traces) x device x seed, runs

    emo run TRACES... --device emulated:DEV@SEED --max-slowdown D -o OUT --json -

(profile on that emulated GPU, optimize, check on the device, evaluate every plan on the same emulated
GPU) and prints a markdown table, one row per workload x device:

- policy saved %: median (min-max) over the seeds of `summary.policy.saving_pct`;
- slowdown % max: the largest `summary.policy.slowdown_pct`;
- best baseline saved %: median of `summary.margin.baseline_saving_pct` (the best baseline within the
  bound on that seed) and the baseline that was best most often;
- margin points: `summary.margin.points` (policy saving minus the best baseline's), min / median;
- cells over delta: seeds whose policy slowdown is above 100*D %;
- policy from: counts of `summary.policy_from` (dp, a baseline's plan, or default).

A final line counts the cells (workload x device x seed) where the policy is below the best baseline
(margin < -0.05 points) and gives the command line, date, machine and total time. Before it, the
prediction errors the reserve and the check are sized from: over every check round of every cell
(`summary.check.rounds`: each plan run on the device before it is handed out), the measured minus the
predicted slowdown in points (the reserve keeps back a tenth of delta for it), and the check's energy
gap at the default clocks and at each accepted plan (a run warns above 3 %). A failed run shows
the first line of its error in its row. The time of every run goes to stderr. Runs one `emo` at a time.

usage: scripts/savings_over_seeds.py [--emo build/tools/emo/emo] [--shared ../shared] [--seeds 1-5]
       [--devices a100,h100,h200] [--max-slowdown 0.05] [--families train-dp,example,...] [--real]
       [--quick] [--slow 60] [--timeout 600]
  --quick      h100 only, synthetic workloads only (a check that everything runs)
  --families   comma-separated filter on workload names: example, train-dp, train-pp, train-tp,
               infer-decode, dataloader, or a word of a REAL set's name (e.g. resnet50)
  --slow S     a workload x device whose run takes more than S seconds gets no further seeds (row says so)
"""
import argparse
import collections
import glob
import importlib.util
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

HERE = os.path.dirname(os.path.abspath(__file__))


def load_lists():
    """FAMILIES and REAL from scripts/pack_and_savings.py (one list for every docs table)."""
    spec = importlib.util.spec_from_file_location("pack_and_savings", os.path.join(HERE, "pack_and_savings.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m.FAMILIES, m.REAL


def parse_seeds(s):
    out = []
    for part in s.split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    if not out:
        sys.exit("--seeds: no seed")
    return out


def first_line(text, rc):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[0] if lines else f"exit {rc}"


def run_emo(cmd, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", time.monotonic() - t0
    dt = time.monotonic() - t0
    if p.returncode != 0:
        return None, first_line(p.stderr, p.returncode), dt
    try:
        j = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        return None, f"bad JSON from emo run: {e}", dt
    return j.get("summary", j), None, dt


def fmt(x, spec=".1f"):
    return format(x, spec)


def row(name, dev, delta_pct, results, errors, skipped):
    """One markdown row from the per-seed summaries."""
    if not results:
        why = errors[0][1] if errors else "no run"
        return f"| {name} | {dev} | {why} | | | | | |", [], 0
    pol = [r["policy"]["saving_pct"] for r in results]
    slow = [r["policy"]["slowdown_pct"] for r in results]
    marg = [r["margin"]["points"] for r in results]
    base = [r["margin"]["baseline_saving_pct"] for r in results]
    best = collections.Counter(r["margin"].get("best_baseline") or "none" for r in results)
    src = collections.Counter(r.get("policy_from", "?") for r in results)
    over = sum(1 for s in slow if s > delta_pct)
    below = [f"{dev}@{seed} {m:+.2f}" for seed, m in zip((r["_seed"] for r in results), marg) if m < -0.05]
    bname, bcount = best.most_common(1)[0]
    cell_pol = f"{statistics.median(pol):.1f} ({min(pol):.1f}–{max(pol):.1f})"
    cell_base = f"{statistics.median(base):.1f} ({bname} {bcount}/{len(results)})"
    cell_marg = f"{min(marg):+.2f} / {statistics.median(marg):+.2f}"
    cell_src = ", ".join(f"{k} {v}" for k, v in sorted(src.items(), key=lambda kv: (-kv[1], kv[0])))
    n = f"{over} of {len(results)}"
    notes = []
    if errors:
        notes.append(f"{len(errors)} failed (seed {errors[0][0]}: {errors[0][1]})")
    if skipped:
        notes.append(skipped)
    if notes:
        cell_src += "; " + "; ".join(notes)
    return (f"| {name} | {dev} | {cell_pol} | {max(slow):+.2f} | {cell_base} | {cell_marg} | {n} | {cell_src} |",
            below, len(results))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--seeds", default="1-5", help="emulated GPU seeds: 1-5, or 1,3,7 (default 1-5)")
    ap.add_argument("--devices", default="a100,h100,h200")
    ap.add_argument("--max-slowdown", type=float, default=0.05)
    ap.add_argument("--real", action="store_true", help="add the REAL trace sets of scripts/pack_and_savings.py")
    ap.add_argument("--quick", action="store_true", help="h100 only, synthetic workloads only")
    ap.add_argument("--families", help="comma-separated filter on workload names (see the usage above)")
    ap.add_argument("--slow", type=float, default=60.0,
                    help="seconds; a workload x device with a slower run gets no further seeds")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before one emo run is killed")
    a = ap.parse_args()

    t_start = time.monotonic()
    seeds = parse_seeds(a.seeds)
    devices = ["h100"] if a.quick else [d for d in a.devices.split(",") if d]
    real = a.real and not a.quick
    families, real_sets = load_lists()
    wanted = [w.strip() for w in a.families.split(",")] if a.families else None

    def keep(name):
        return wanted is None or any(w == name or (w and w in name) for w in wanted)

    tmp = tempfile.mkdtemp(prefix="emo_seeds_")
    workloads = []  # (name, files); [] = the built-in example
    if keep("example"):
        workloads.append(("built-in example (train-pp 4 ranks)", []))
    for fam, opts in families:
        if not keep(fam):
            continue
        d = os.path.join(tmp, "synth", fam)
        p = subprocess.run([a.emo, "synth", fam, *opts, "--steps", "3", "-o", d],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        name = f"{fam} {' '.join(opts)}"
        if p.returncode != 0:
            workloads.append((name, f"synth: {first_line(p.stderr, p.returncode)}"))
            continue
        workloads.append((name, sorted(glob.glob(os.path.join(d, "*.json")))))
    if real:
        root = os.path.join(a.shared, "traces")
        for name, pats in real_sets:
            if not keep(name):
                continue
            files = sorted(f for pat in pats for f in glob.glob(os.path.join(root, pat)))
            workloads.append((name, files if files else f"no files under {root}"))

    delta_pct = 100 * a.max_slowdown
    rows, below_all, cells_total = [], [], 0
    time_err, energy_gap, rejected, rounds_total = [], [], 0, 0
    for name, files in workloads:
        for dev in devices:
            if isinstance(files, str):  # synth failed / trace set missing
                rows.append(f"| {name} | {dev} | {files} | | | | | |")
                continue
            results, errors, skipped = [], [], ""
            for i, seed in enumerate(seeds):
                out = os.path.join(tmp, "run")
                cmd = [a.emo, "run", *files, "--device", f"emulated:{dev}@{seed}",
                       "--max-slowdown", str(a.max_slowdown), "-o", out, "--json", "-"]
                s, err, dt = run_emo(cmd, a.timeout)
                shutil.rmtree(out, ignore_errors=True)
                print(f"[{time.monotonic() - t_start:7.1f} s] {name} | {dev}@{seed}: {dt:.1f} s"
                      + (f"  ERROR {err}" if err else
                         f"  saved {s['policy']['saving_pct']:.1f} % at {s['policy']['slowdown_pct']:+.2f} %,"
                         f" margin {s['margin']['points']:+.2f} ({s.get('policy_from')})"),
                      file=sys.stderr, flush=True)
                if err:
                    errors.append((seed, err))
                else:
                    s["_seed"] = seed
                    results.append(s)
                    chk = s.get("check") or {}
                    d = chk.get("default") or {}
                    if d.get("measured_energy_j"):
                        energy_gap.append(100 * abs(d["predicted_energy_j"] / d["measured_energy_j"] - 1))
                    for rd in chk.get("rounds") or []:
                        rounds_total += 1
                        time_err.append(rd["measured_pct"] - rd["predicted_pct"])
                        if not rd.get("accepted"):
                            rejected += 1
                        elif rd.get("measured_energy_j"):
                            energy_gap.append(100 * abs(rd["predicted_energy_j"] / rd["measured_energy_j"] - 1))
                if dt > a.slow and i + 1 < len(seeds):
                    skipped = f"seeds {','.join(map(str, seeds[i + 1:]))} skipped (a run took {dt:.0f} s > {a.slow:.0f} s)"
                    break
            r, below, n = row(name, dev, delta_pct, results, errors, skipped)
            rows.append(r)
            below_all += [f"{name.split()[0]} {b}" for b in below]
            cells_total += n

    total = time.monotonic() - t_start
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"### True savings over emulated GPUs (seeds {a.seeds}), δ = {a.max_slowdown:.0%}\n")
    print("| workload | device | policy saved % median (min–max) | slowdown % max | "
          "best baseline saved % median (which baseline most often) | margin points min / median | "
          "cells over δ | policy from (counts) |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(r)
    def pct(xs, q):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
    if time_err:
        over = sum(1 for e in time_err if e > 0.1 * delta_pct)
        print(f"\nStep-time prediction error over {rounds_total} check rounds (measured − predicted slowdown, points): "
              f"median {statistics.median(time_err):+.2f}, p95 {pct(time_err, 0.95):+.2f}, max {max(time_err):+.2f}, "
              f"min {min(time_err):+.2f}; {over} over the reserve's {0.1 * delta_pct:.2f} points; {rejected} rounds "
              f"rejected by the check. Energy gap (|predicted / measured − 1|) at the default clocks and the accepted "
              f"plans, {len(energy_gap)} values: median {statistics.median(energy_gap):.2f} %, p95 "
              f"{pct(energy_gap, 0.95):.2f} %, max {max(energy_gap):.2f} %.")
    date = time.strftime("%Y-%m-%d", time.gmtime())
    cmdline = " ".join(shlex.quote(x) for x in ["scripts/savings_over_seeds.py", *sys.argv[1:]])
    print(f"\nCells (workload × device × seed) where the policy is below the best baseline "
          f"(margin < −0.05 points): {len(below_all)} of {cells_total}"
          + (f" ({'; '.join(below_all)})" if below_all else "") + ". "
          f"`{cmdline}`, {date}, {len(os.sched_getaffinity(0))} cores (nproc), {platform.machine()}, {total:.0f} s in all.")


if __name__ == "__main__":
    main()
