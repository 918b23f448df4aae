#!/usr/bin/env python3
"""The independent executor (emo-execute) against the measured traces and against `emo whatif`.

For every GPU trace of ../shared/traces that `emo analyze` loads (and the 8-rank DLRM set as one step),
the project's H200 captures (tests/data/traces) and the synthetic families of `emo synth`:
  (a) the executor's step span at scale 1 vs the measured step;
  (b) for each scenario of the set (kernel classes x0.6 / x1.5 / x3, the busiest stream x2, collectives x2,
      the host's own time x0.5 / x2)
      the step change the executor predicts vs the one `emo whatif` predicts; the disagreement is
      their difference in percent of the step.
Prints two markdown tables and the worst figures.
usage: scripts/executor_agreement.py [--emo build/tools/emo/emo] [--execute build/tools/executor/emo-execute]
                                     [--shared ../shared] [--no-synth]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

SKIP = ("_et.json", "dlrm_pytorch_et", "/chakra/", "_et_")
SYNTH = ("train-dp", "train-pp", "train-tp", "infer-decode", "dataloader")


def run_json(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[0]
    return json.loads(p.stdout), None


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--execute", default="build/tools/executor/emo-execute")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--no-synth", action="store_true")
    a = ap.parse_args()
    runs = []
    root = os.path.join(a.shared, "traces")
    if os.path.isdir(root):
        files = sorted(p for p in glob.glob(os.path.join(root, "**", "*.json*"), recursive=True)
                       if p.endswith((".json", ".json.gz")) and not any(s in p for s in SKIP))
        runs += [([f], os.path.relpath(f, root)) for f in files]
        dlrm = sorted(glob.glob(os.path.join(root, "param/et_replay/tests/inputs/extracted/dlrm_kineto/*.json")))
        if dlrm:
            runs.append((dlrm, "param/.../dlrm_kineto/worker{0..7} (8 ranks, one step)"))
    else:
        print(f"note: {root} is absent; synthetic families only", file=sys.stderr)
    # The project's own real captures (H200; backward on the autograd thread, the profiler's host cost).
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "traces")
    for f in sorted(glob.glob(os.path.join(here, "h200_*.json.gz"))):
        runs.append(([f], "tests/data/traces/" + os.path.basename(f)))
    tmp = tempfile.TemporaryDirectory()
    if not a.no_synth:
        for w in SYNTH:
            out = os.path.join(tmp.name, w)
            j, err = run_json([a.emo, "synth", w, "-o", out, "--json", "-"])
            fs = sorted(glob.glob(os.path.join(out, "*.json*")))
            if fs:
                runs.append((fs, f"synth {w} ({len(fs)} ranks)"))
            else:
                print(f"note: emo synth {w}: {err}", file=sys.stderr)

    fid, agree = [], []
    for fs, name in runs:
        ana, err = run_json([a.emo, "analyze", *fs, "--json", "-"])
        if ana is None or ana["slack"]["gpu_ops"] == 0:
            continue  # not loaded, or no GPU work
        ex, err = run_json([a.execute, *fs, "--scenarios"])
        if ex is None:
            fid.append((name, ana, None, err))
            continue
        fid.append((name, ana, ex, None))
        base_e = ex["span_us"]
        for sc in ex["scenarios"]:
            if "span_us" not in sc:
                agree.append((name, sc["name"], None, None, sc.get("error")))
                continue
            wi, err = run_json([a.emo, "whatif", *fs, "--scale", sc["whatif_scale"], "--json", "-"])
            if wi is None:
                agree.append((name, sc["name"], None, None, err))
                continue
            d_e = 100.0 * (sc["span_us"] - base_e) / base_e if base_e else 0.0
            d_r = 100.0 * (wi["predicted_span_us"] - wi["baseline_span_us"]) / wi["baseline_span_us"] \
                if wi["baseline_span_us"] else 0.0
            agree.append((name, sc["name"], d_e, d_r, None))

    print("| trace | GPU ops | measured (µs) | executed (µs) | error | replayed (µs) |")
    print("|---|---:|---:|---:|---:|---:|")
    worst = 0.0
    for name, ana, ex, err in fid:
        if ex is None:
            print(f"| {name} | {ana['slack']['gpu_ops']} | {ana['measured_span_us']:.0f} | — | {err} | "
                  f"{ana['replayed_span_us']:.0f} |")
            continue
        worst = max(worst, abs(ex["error_pct"]))
        print(f"| {name} | {ex['gpu_ops']} | {ex['measured_span_us']:.0f} | {ex['span_us']:.0f} | "
              f"{ex['error_pct']:+.3f} % | {ana['replayed_span_us']:.0f} |")
    print(f"\nworst |error| at scale 1: {worst:.3f} %\n")

    print("| trace | scenarios | worst disagreement | scenario | executor Δ | replay Δ | over 2 % |")
    print("|---|---:|---:|---|---:|---:|---|")
    by = {}
    for name, sc, d_e, d_r, err in agree:
        by.setdefault(name, []).append((sc, d_e, d_r, err))
    overall = 0.0
    for name, rows in by.items():
        ok = [r for r in rows if r[3] is None]
        bad = [f"{r[0]} ({r[3]})" for r in rows if r[3] is not None]
        if not ok:
            print(f"| {name} | 0 | — | {'; '.join(bad)} | | | |")
            continue
        w = max(ok, key=lambda r: abs(r[2] - r[1]))
        dis = w[2] - w[1]
        overall = max(overall, abs(dis))
        over = ", ".join(f"{r[0]}: {r[2] - r[1]:+.2f}" for r in ok if abs(r[2] - r[1]) > 2.0)
        print(f"| {name} | {len(ok)} | {dis:+.2f} | {w[0]} | {w[1]:+.2f} % | {w[2]:+.2f} % | {over} |")
    print(f"\nworst what-if disagreement (replay Δ − executor Δ, % of the step): {overall:.2f}")
    for label, keep in (("GPU", lambda sc: not sc.startswith("host")), ("host x0.5", lambda sc: sc == "host x0.5"),
                        ("host x2", lambda sc: sc == "host x2")):
        ds = [abs(d_r - d_e) for _, sc, d_e, d_r, err in agree if err is None and keep(sc)]
        if ds:
            print(f"worst {label} what-if disagreement: {max(ds):.2f} ({len(ds)} scenarios)")


if __name__ == "__main__":
    main()
