#!/usr/bin/env python3
"""Head-to-head with the published Perseus (lowtime) frontiers: runs `emo pipeline --compare` on every
(model, GPU, microbatches) of ../shared/dvfs and prints a markdown table.

For each published file: the Perseus stage profile of the same model and GPU, an 8-stage 1F1B pipeline
with the file's microbatch count, Perseus' blocking power (A100 83.64 W, A40 70.38 W) and the file's
time unit (1 ms for A100, 0.1 ms for A40). Solve time is the median of --reps runs (emo's own
`solve_ms`: model fit, DAG, every deadline's plan, checks and evaluation; file reading excluded).

usage: scripts/pipeline_vs_perseus.py [--emo build/tools/emo/emo] [--shared ../shared] [--reps 3]
                                      [--no-clocks]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODELS = [("gpt3-175b", "GPT-3 175B"), ("bloom", "BLOOM 176B")]
GPUS = [("a100_sxm", "A100 SXM", 83.64), ("a40", "A40", 70.38)]
MICROBATCHES = [12, 24, 48, 96]
# lowtime v0.2.0 on this machine kind (ANCHORS.md): GPT-3 A100, 12 and 24 microbatches.
LOWTIME_S = {("gpt3-175b", "a100_sxm", 12): 21.8, ("gpt3-175b", "a100_sxm", 24): 131.0}


def run(emo, profile, mb, power, published, accounting, out):
    cmd = [emo, "pipeline", "--profile", profile, "--microbatches", str(mb), "--blocking-power", str(power),
           "--compare", published, "--accounting", accounting, "--json", out]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    with open(out) as f:
        return json.load(f)


def pct(x):
    return f"{100 * x:+.2g} %" if abs(x) >= 1e-4 else f"{100 * x:+.1e} %"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-clocks", action="store_true", help="skip the clocks-only accounting column")
    a = ap.parse_args()
    dvfs = os.path.join(a.shared, "dvfs")
    if not os.path.isdir(dvfs):
        sys.exit(f"skip: {dvfs} is absent")
    tmp = tempfile.mkdtemp(prefix="emo_pipeline_")
    out = os.path.join(tmp, "r.json")

    print("| model | GPU | µbatches | nodes | published points | ours ≤ theirs | within 1e-5 | "
          "max (ours − theirs) / theirs | mean | largest saving | vs their step function: max / mean | "
          "clocks only: max | solve (ms) | lowtime (s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for model, model_name in MODELS:
        for gpu, gpu_name, power in GPUS:
            profile = os.path.join(dvfs, f"zeus-kronos__emulation__stage_profile__{model}_{gpu}_bf16.csv")
            for mb in MICROBATCHES:
                published = os.path.join(dvfs, f"zeus-kronos__emulation__iteration_time_energy__{gpu}__{model}_bf16_mb{mb}.csv")
                if not (os.path.exists(profile) and os.path.exists(published)):
                    print(f"| {model_name} | {gpu_name} | {mb} | — | — | missing | | | | | | | | |")
                    continue
                times = []
                for _ in range(max(1, a.reps)):
                    j = run(a.emo, profile, mb, power, published, "lowtime", out)
                    times.append(j["solve_ms"])
                c = j["comparison"]
                s = c["vs_their_step"]
                worst = max(worst, c["max_rel_diff"])
                clocks = "—"
                if not a.no_clocks:
                    jc = run(a.emo, profile, mb, power, published, "clocks", out)
                    clocks = pct(jc["comparison"]["max_rel_diff"])
                lt = LOWTIME_S.get((model, gpu, mb))
                print(f"| {model_name} | {gpu_name} | {mb} | {j['nodes']} | {c['points']} | {c['ours_le']} | "
                      f"{c['ours_within_tolerance']} | {pct(c['max_rel_diff'])} | {pct(c['mean_rel_diff'])} | "
                      f"{pct(c['min_rel_diff'])} | {pct(s['max_rel_diff'])} / {pct(s['mean_rel_diff'])} | {clocks} | "
                      f"{statistics.median(times):.0f} | {lt if lt else '—'} |")
    print(f"\nlargest (ours − theirs) / theirs over all files: {worst:+.2e}")


if __name__ == "__main__":
    main()
