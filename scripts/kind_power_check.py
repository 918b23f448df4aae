#!/usr/bin/env python3
"""Busy power by kind of kernel on real measurements, against EMO's prior (docs/profiling.md).

EMO prices a unit's busy power from its time curve alone (docs/models.md §1): with u_c the unit's compute
share at f_max, P = const_w + mem_w·(1 − u_c) + dynamic_w·(clock_frac + (1 − clock_frac)·u_c) there. This
script reads the measured V100-PCIe sweeps of ../shared/dvfs (NV-DVFS-Benchmark: 20 real applications and
the microbenchmarks, each at ~10 locked clocks with its mean power), takes each kernel's compute share
from how its time grows between f_max and the clock nearest 0.79·f_max (1/f: compute share 1; flat: 0),
and prints the ratio of its measured dynamic power (P − const_w − the prior's memory term) to the prior's
SM term: the activity the prior would need for that kernel. Kernels are grouped by their compute share.

It answers one question before a prior per kernel kind is built: do the kinds differ on real hardware, and
in which direction? Usage:

    python3 scripts/kind_power_check.py [--emo build/tools/emo/emo] [--shared ../shared]
"""
import argparse
import collections
import csv
import json
import os
import statistics
import subprocess
import sys


def profile(emo, name):
    out = subprocess.run([emo, "devices", name, "--json", "-"], capture_output=True, text=True, check=True).stdout
    d = json.loads(out)["devices"][0]
    pm = d["power_model"]
    return {k: pm[k]["value"] for k in ("const_w", "dynamic_w", "clock_frac", "mem_w")}


def rows_by_kernel(path):
    by = collections.defaultdict(dict)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            key = (r["benchmark"], r["arg"], r["kernel"])
            by[key][float(r["sm_mhz"])] = (float(r["time_s"]), float(r["avg_power_w"]))
    return by


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", default="build/tools/emo/emo")
    ap.add_argument("--shared", default="../shared")
    args = ap.parse_args()
    p = profile(args.emo, "v100-pcie")
    groups = collections.OrderedDict((("compute-bound (u_c >= 0.8)", []), ("mixed", []), ("memory-bound (u_c <= 0.3)", [])))
    print(f"v100-pcie prior: const {p['const_w']} W, dynamic {p['dynamic_w']} W, clock_frac {p['clock_frac']}, "
          f"mem {p['mem_w']} W")
    print(f"{'set':5s} {'benchmark':24s} {'kernel':28s} {'u_c':>5s} {'P meas':>7s} {'P prior':>7s} {'activity':>8s}")
    for kind in ("real", "micro"):
        path = os.path.join(args.shared, "dvfs", f"dvfs_v100pcie_nvdvfsbench_{kind}_slim.csv")
        if not os.path.exists(path):
            print(f"skipped: {path} is absent", file=sys.stderr)
            continue
        for (bench, arg, kernel), pts in sorted(rows_by_kernel(path).items()):
            fs = sorted(pts)
            if len(fs) < 3:
                continue
            fmax = fs[-1]
            f2 = min(fs, key=lambda f: abs(f - 0.79 * fmax))
            if f2 >= fmax:
                continue
            t_top, p_top = pts[fmax]
            grow = pts[f2][0] / t_top
            uc = min(1.0, max(0.0, (grow - 1) / (fmax / f2 - 1)))
            sm = p["dynamic_w"] * (p["clock_frac"] + (1 - p["clock_frac"]) * uc)
            mem = p["mem_w"] * (1 - uc)
            activity = (p_top - p["const_w"] - mem) / sm
            g = "compute-bound (u_c >= 0.8)" if uc >= 0.8 else "memory-bound (u_c <= 0.3)" if uc <= 0.3 else "mixed"
            groups[g].append(activity)
            if kind == "real":
                print(f"{kind:5s} {bench[:24]:24s} {kernel[:28]:28s} {uc:5.2f} {p_top:7.1f} "
                      f"{p['const_w'] + mem + sm:7.1f} {activity:8.2f}")
    print()
    print("activity the prior would need, by compute share (real and micro together):")
    for g, xs in groups.items():
        if xs:
            q = statistics.quantiles(xs, n=4) if len(xs) >= 4 else [min(xs), statistics.median(xs), max(xs)]
            print(f"  {g:28s} n={len(xs):4d}  median {statistics.median(xs):.2f}  quartiles {q[0]:.2f}..{q[-1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
