#!/usr/bin/env python3
"""Packing reduction and end-to-end savings tables (docs/optimize.md).

1. `emo pack` on every real trace in ../shared/traces and on `emo synth` workloads: packs, signatures,
   profiled units vs per-kernel units.
2. `emo optimize` + `emo evaluate` on `emo synth` workloads on emulated GPUs at several slowdown targets:
   true energy saved and true slowdown of the policy and of every baseline.
3. The same on real traces of ../shared/traces (REAL below: one step of each, emulated at its clocks).
usage: scripts/pack_and_savings.py [--emo build/tools/emo/emo] [--shared ../shared] [--quick] [--real [--no-synth]]
       [--devices a100,h100,h200]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

SKIP = ("_et.json", "dlrm_pytorch_et", "/chakra/", "_et_")
FAMILIES = [("train-dp", ["--ranks", "2", "--layers", "24"]),
            ("train-pp", ["--ranks", "4", "--layers", "4", "--microbatches", "8"]),
            ("train-tp", ["--ranks", "2", "--layers", "24"]),
            ("infer-decode", ["--ranks", "1", "--layers", "24", "--decode-tokens", "64"]),
            ("dataloader", ["--ranks", "2"])]


# Real traces for the savings table (paths under ../shared/traces; a list = the ranks of one job).
REAL = [("dlrm 8 ranks (param)", ["param/et_replay/tests/inputs/extracted/dlrm_kineto/worker*_step_12.*.json"]),
        ("resnet50 (kineto)", ["kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz"]),
        ("nccl_data (hta)", ["hta/tests/data/nccl_parser_config/nccl_data.json.gz"]),
        ("timesformer (tracelens h100)",
         ["tracelens/tests/traces/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"])]


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[0]
    return p.stdout, None


def pack_row(emo, files, name, device):
    out, err = run([emo, "pack", *files, "--device", device, "--json", "-"])
    if out is None:
        return f"| {name} | {err} | | | | |"
    j = json.loads(out)
    return (f"| {name} | {j['kernel_ops']} | {j['packs_total']} | {len(j['signatures'])} | "
            f"{j['profiled_units']} vs {j['kernel_units']} | {j['reduction']:.1f}× |")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--quick", action="store_true", help="one device, two targets")
    ap.add_argument("--real", action="store_true", help="also the real traces in REAL (slow: minutes each)")
    ap.add_argument("--devices", help="comma-separated devices for the savings table (default a100,h100,h200)")
    ap.add_argument("--no-synth", action="store_true", help="savings table: real traces only")
    ap.add_argument("--eval-steps", type=int, default=12, help="steps each plan runs for in `emo evaluate`")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="emo_tables_")
    synth = {}
    for fam, opts in FAMILIES:
        d = os.path.join(tmp, fam)
        out, err = run([a.emo, "synth", fam, *opts, "--steps", "3", "-o", d])
        if out is None:
            sys.exit(f"synth {fam}: {err}")
        synth[fam] = sorted(glob.glob(os.path.join(d, "*.json")))

    print("### Packing: profiled units vs per-kernel profiling (device h100, 4 plan clocks)\n")
    print("| input | GPU ops | packs | signatures | profiled units | reduction |")
    print("|---|---:|---:|---:|---:|---:|")
    for fam, opts in FAMILIES:
        print(pack_row(a.emo, synth[fam], f"synth {fam} {' '.join(opts)}", "h100"))
    root = os.path.join(a.shared, "traces")
    if os.path.isdir(root):
        files = sorted(p for p in glob.glob(os.path.join(root, "**", "*.json*"), recursive=True)
                       if p.endswith((".json", ".json.gz")) and not any(s in p for s in SKIP))
        for f in files:
            print(pack_row(a.emo, [f], os.path.relpath(f, root), "h100"))
    else:
        print(f"\n(skipped the real traces: {root} is absent)")

    devices = ["h100"] if a.quick else ["a100", "h100", "h200"]
    if a.devices:
        devices = a.devices.split(",")
    deltas = [0.02, 0.05] if a.quick else [0.01, 0.02, 0.05, 0.10]
    print("\n### True savings on the emulated GPU (energy saved % / slowdown %)\n")
    print("| workload | device | δ | policy | static clock | slack-only | per-phase | policy from |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    rows = [] if a.no_synth else [(fam, synth[fam]) for fam, _ in FAMILIES]
    if a.real and os.path.isdir(root):
        for name, pats in REAL:
            files = sorted(f for pat in pats for f in glob.glob(os.path.join(root, pat)))
            if files:
                rows.append((name, files))
    for name, files in rows:
        for dev in devices:
            for d in deltas:
                pol = os.path.join(tmp, f"{abs(hash(name))}_{dev}_{d}.json")
                out, err = run([a.emo, "optimize", *files, "--device", dev, "--max-slowdown", str(d),
                                "-o", pol, "--json", "-"])
                if out is None:
                    print(f"| {name} | {dev} | {d:.0%} | {err} | | | | |")
                    continue
                opt = json.loads(out)
                out, err = run([a.emo, "evaluate", pol, *files, "--device", f"emulated:{dev}", "--steps",
                                str(a.eval_steps), "--json", "-"])
                if out is None:
                    print(f"| {name} | {dev} | {d:.0%} | {err} | | | | |")
                    continue
                e = json.loads(out)
                cell = lambda r: f"{r['saving_pct']:.1f} / {r['slowdown_pct']:+.1f}"
                b = e.get("baselines", {})
                print(f"| {name} | {dev} | {d:.0%} | {cell(e['policy'])} | {cell(b['static_clock'])} | "
                      f"{cell(b['slack_only'])} | {cell(b['per_phase'])} | {opt['policy_from']} |", flush=True)

if __name__ == "__main__":
    main()
