#!/usr/bin/env python3
"""Predicted against measured step energy, at the default clock and at every plan's clocks (docs/profiling.md).

For each input (the `emo synth` families, and every trace set of ../shared/traces that `emo optimize`
accepts) and each emulated GPU (seed) N: `emo optimize --device DEV --profile-on emulated:DEV@N` fits the
pack models on that GPU and predicts the step time and energy of the default clock, the policy and each
baseline; `emo evaluate --device emulated:DEV@N` runs every plan on the same GPU. The error of a plan is
predicted / measured − 1. The table gives, per input and device, the largest |error| over the seeds for the
default clock, the policy and the baselines (the worst of the three), and the plan and seed where it is.

usage: scripts/prediction_fidelity.py [--emo build/tools/emo/emo] [--shared ../shared] [--devices h100]
       [--seeds 1,2,3,4,5] [--profile-clocks N] [--no-refine-profile] [--csv FILE] [--no-real] [--no-synth] [--only TEXT] [--limit PCT]
Exit status 1 when any |error| is over --limit (default 3 %), so that it can gate a change.
"""
import argparse
import csv
import glob
import json
import os
import sys
import tempfile

from pack_and_savings import FAMILIES, SKIP, run  # the same inputs and subprocess helper (same folder)

# Trace files of ../shared/traces that belong to one multi-rank step (given together, in this order).
SETS = [("dlrm 8 ranks (param)", "param/et_replay/tests/inputs/extracted/dlrm_kineto/worker*_step_12.*.json")]
PLANS = ["default", "policy", "static_clock", "slack_only", "per_phase"]


def real_inputs(shared):
    root = os.path.join(shared, "traces")
    if not os.path.isdir(root):
        return None
    grouped, out = set(), []
    for name, pat in SETS:
        files = sorted(glob.glob(os.path.join(root, pat)))
        if files:
            out.append((name, files))
            grouped.update(files)
    for f in sorted(glob.glob(os.path.join(root, "**", "*.json*"), recursive=True)):
        if f.endswith((".json", ".json.gz")) and not any(s in f for s in SKIP) and f not in grouped:
            out.append((os.path.relpath(f, root), [f]))
    return out


def measure(emo, tmp, files, dev, seed, delta, extra=()):
    """(rows, None) with one row per plan, or (None, reason) when the input does not run end to end."""
    gpu = f"emulated:{dev}@{seed}"
    pol = os.path.join(tmp, "policy.json")
    out, err = run([emo, "optimize", *files, "--device", dev, "--profile-on", gpu, "--max-slowdown", str(delta),
                    *extra, "-o", pol, "--json", "-"])
    if out is None:
        return None, err
    opt = json.loads(out)
    out, err = run([emo, "evaluate", pol, *files, "--device", gpu, "--json", "-"])
    if out is None:
        return None, err
    ev = json.loads(out)
    predicted = {"default": opt["baseline"], "policy": opt["policy"], **opt.get("baselines", {})}
    measured = {"default": ev["default"], "policy": ev["policy"], **ev.get("baselines", {})}
    rows = []
    for plan in PLANS:
        if plan in predicted and plan in measured and measured[plan]["energy_j"] > 0:
            p, m = predicted[plan]["energy_j"], measured[plan]["energy_j"]
            rows.append({"plan": plan, "predicted_j": p, "measured_j": m, "error_pct": (p / m - 1) * 100})
    return rows, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--devices", default="h100", help="comma-separated built-in devices (default h100)")
    ap.add_argument("--seeds", default="1,2,3,4,5", help="emulated GPUs (seeds), comma-separated")
    ap.add_argument("--max-slowdown", type=float, default=0.05)
    ap.add_argument("--profile-clocks", type=int, help="clocks in the profiling plan (emo's default: 4)")
    ap.add_argument("--no-refine-profile", action="store_true",
                    help="pass --no-refine-profile to `emo optimize` (no extra run where the first plan runs)")
    ap.add_argument("--csv", help="also write one row per input, device, seed and plan to FILE")
    ap.add_argument("--no-real", action="store_true", help="leave out ../shared's traces")
    ap.add_argument("--no-synth", action="store_true", help="leave out the synthetic families")
    ap.add_argument("--only", action="append", default=[],
                    help="keep only the inputs whose name contains this text (repeatable)")
    ap.add_argument("--limit", type=float, default=3.0, help="|error| in %% above which the exit status is 1")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="emo_fidelity_")
    inputs = []
    if not a.no_synth:
        for fam, opts in FAMILIES:
            d = os.path.join(tmp, fam)
            out, err = run([a.emo, "synth", fam, *opts, "--steps", "3", "-o", d])
            if out is None:
                sys.exit(f"synth {fam}: {err}")
            inputs.append((f"synth {fam} {' '.join(opts)}", sorted(glob.glob(os.path.join(d, "*.json")))))
    if not a.no_real:
        real = real_inputs(a.shared)
        if real is None:
            print(f"(skipped the real traces: {a.shared}/traces is absent)", file=sys.stderr)
        else:
            inputs += real
    if a.only:
        inputs = [(n, f) for n, f in inputs if any(o in n for o in a.only)]
        if not inputs:
            print(f"error: no input matches --only {' '.join(a.only)}", file=sys.stderr)
            return 1
    seeds = [int(s) for s in a.seeds.split(",")]
    writer = None
    if a.csv:
        fh = open(a.csv, "w", newline="")
        writer = csv.writer(fh)
        writer.writerow(["input", "device", "seed", "plan", "predicted_j", "measured_j", "error_pct"])
    print(f"### Predicted vs measured step energy, δ = {a.max_slowdown:g}, emulated GPUs {a.seeds} "
          "(largest |error| over the seeds)\n")
    print("| input | device | default | policy | baselines | worst (plan, GPU) |")
    print("|---|---|---:|---:|---:|---|")
    worst_all, skipped = 0.0, []
    for name, files in inputs:
        for dev in a.devices.split(","):
            per_plan, worst, why = {}, (0.0, "", 0), None
            for seed in seeds:
                extra = ["--profile-clocks", str(a.profile_clocks)] if a.profile_clocks else []
                if a.no_refine_profile:
                    extra.append("--no-refine-profile")
                rows, err = measure(a.emo, tmp, files, dev, seed, a.max_slowdown, extra)
                if rows is None:
                    why = err
                    break
                for r in rows:
                    e = abs(r["error_pct"])
                    group = r["plan"] if r["plan"] in ("default", "policy") else "baselines"
                    per_plan[group] = max(per_plan.get(group, 0.0), e)
                    if e >= worst[0]:
                        worst = (e, r["plan"], seed)
                    if writer:
                        writer.writerow([name, dev, seed, r["plan"], f"{r['predicted_j']:.6f}",
                                         f"{r['measured_j']:.6f}", f"{r['error_pct']:.3f}"])
            if why is not None:
                skipped.append((name, dev, why))
                continue
            worst_all = max(worst_all, worst[0])
            cell = lambda g: f"{per_plan[g]:.2f} %" if g in per_plan else "–"
            print(f"| {name} | {dev} | {cell('default')} | {cell('policy')} | {cell('baselines')} | "
                  f"{worst[0]:.2f} % ({worst[1]}, @{worst[2]}) |", flush=True)
    if skipped:
        print("\nNot run end to end (the reason `emo` gave):\n")
        for name, dev, why in skipped:
            print(f"- {name} ({dev}): {why}")
    print(f"\nLargest |error| over every input, plan and GPU: {worst_all:.2f} % (limit {a.limit:g} %)")
    return 1 if worst_all > a.limit else 0


if __name__ == "__main__":
    sys.exit(main())
