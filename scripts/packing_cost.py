#!/usr/bin/env python3
"""What packing costs and how well the pack models predict (docs/optimize.md).

1. Fidelity: `emo pack --fidelity-at F` on `emo synth` workloads: pack models fitted from the profiling
   plan's runs, predictions at unprofiled clocks against the emulated GPU (per pack and the step).
2. Pack-level against kernel-level optimization on small cases: `emo optimize` with the normal packs and
   with `--per-kernel` (every GPU op its own pack, no minimum length), both evaluated on the emulated GPU
   with `emo evaluate`: predicted and true energy saved / slowdown.
usage: scripts/packing_cost.py [--emo build/tools/emo/emo] [--device h100]
"""
import argparse
import glob
import json
import os
import sys
import tempfile

from pack_and_savings import run  # the same subprocess helper (same folder)

CASES = [("train-dp", ["--ranks", "2", "--layers", "4"]),
         ("train-pp", ["--ranks", "4", "--layers", "2", "--microbatches", "4"]),
         ("train-tp", ["--ranks", "2", "--layers", "4"]),
         ("infer-decode", ["--ranks", "1", "--layers", "4", "--decode-tokens", "16"])]
FIDELITY = [("train-dp", ["--ranks", "2", "--layers", "24"]),
            ("train-pp", ["--ranks", "4", "--layers", "4", "--microbatches", "8"]),
            ("train-tp", ["--ranks", "2", "--layers", "24"]),
            ("infer-decode", ["--ranks", "1", "--layers", "24", "--decode-tokens", "64"])]


def synth(emo, tmp, fam, opts):
    d = os.path.join(tmp, fam + "_" + "_".join(o.strip("-") for o in opts))
    out, err = run([emo, "synth", fam, *opts, "--steps", "3", "-o", d])
    if out is None:
        sys.exit(f"synth {fam}: {err}")
    return sorted(glob.glob(os.path.join(d, "*.json")))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--device", default="h100")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="emo_packing_")
    dev = a.device

    print(f"### Pack models at unprofiled clocks (emulated {dev}; |error| over packs: median / p90 / max)\n")
    print("| workload | clock MHz | packs | step time | step energy | pack time median / p90 / max | "
          "pack energy median / p90 / max |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for fam, opts in FIDELITY:
        files = synth(a.emo, tmp, fam, opts)
        for clock in (1755, 1305):
            out, err = run([a.emo, "pack", *files, "--device", f"emulated:{dev}", "--fidelity-at", str(clock),
                            "--json", "-"])
            if out is None:
                print(f"| {fam} | {clock} | {err} | | | | |")
                continue
            f = json.loads(out)["fidelity"]
            t, e = f["pack_time_abs_error_pct"], f["pack_energy_abs_error_pct"]
            print(f"| {fam} {' '.join(opts)} | {clock} | {f['packs']} | {f['step_time_error_pct']:+.2f} % | "
                  f"{f['step_energy_error_pct']:+.2f} % | {t['median']:.2f} / {t['p90']:.2f} / {t['max']:.2f} % | "
                  f"{e['median']:.2f} / {e['p90']:.2f} / {e['max']:.2f} % |")

    print(f"\n### Pack-level against kernel-level optimization (emulated {dev}; energy saved % / slowdown %)\n")
    print("| workload | δ | packs | kernel packs | pack-level predicted | kernel-level predicted | "
          "pack-level true | kernel-level true | clock changes per step (pack / kernel) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for fam, opts in CASES:
        files = synth(a.emo, tmp, fam, opts)
        for d in (0.02, 0.05):
            cells = {}
            for level, extra in (("pack", []), ("kernel", ["--per-kernel"])):
                pol = os.path.join(tmp, f"{fam}_{level}_{d}.json")
                out, err = run([a.emo, "optimize", *files, "--device", dev, "--max-slowdown", str(d), *extra,
                                "-o", pol, "--json", "-"])
                if out is None:
                    cells[level] = (err, "", "", "")
                    continue
                o = json.loads(out)
                ev, err = run([a.emo, "evaluate", pol, *files, "--device", f"emulated:{dev}", "--json", "-"])
                e = json.loads(ev) if ev else None
                p = json.load(open(pol))
                changes = 0
                last = {}
                for pk in p["packs"]:
                    r = pk["rank"]
                    if r in last and last[r] != pk["clock_mhz"]:
                        changes += 1
                    last[r] = pk["clock_mhz"]
                cells[level] = (o["packs"], f"{o['policy']['saving_pct']:.1f} / {o['policy']['slowdown_pct']:+.1f}",
                                f"{e['policy']['saving_pct']:.1f} / {e['policy']['slowdown_pct']:+.1f}" if e else err,
                                changes)
            pk, kl = cells["pack"], cells["kernel"]
            print(f"| {fam} {' '.join(opts)} | {d:.0%} | {pk[0]} | {kl[0]} | {pk[1]} | {kl[1]} | {pk[2]} | {kl[2]} | "
                  f"{pk[3]} / {kl[3]} |")


if __name__ == "__main__":
    main()
