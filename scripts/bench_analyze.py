#!/usr/bin/env python3
"""Speed and memory of `emo analyze` against a bare simdjson parse of the same file.

Generates a >= 1 M-event data-parallel training trace with `emo synth`, then runs,
alternating, `bare_parse FILE` and `emo analyze FILE --json OUT` (REPS times each) and
reports the median wall time of each, their ratio, and emo's peak RSS against the
file size. Targets (issue: foundation): ratio <= 3, peak RSS <= 1.5 x file size.

usage: scripts/bench_analyze.py [--build build] [--events 1000000] [--reps 3] [--keep DIR]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def measure(cmd):
    """Wall time and peak RSS of one run of cmd, isolated in a fresh python child."""
    code = ("import resource,subprocess,sys,time;t=time.perf_counter();"
            "r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.PIPE);"
            "d=time.perf_counter()-t;"
            "sys.exit(r.stderr.decode()) if r.returncode else "
            "print(d, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024)")
    p = subprocess.run([sys.executable, "-c", code] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed: {p.stderr}")
    secs, rss = p.stdout.split()
    return float(secs), int(rss)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", help="directory for the generated trace (default: a temp dir)")
    a = ap.parse_args()
    emo = os.path.join(a.build, "tools/emo/emo")
    bare = os.path.join(a.build, "bench/bare_parse")
    for exe in (emo, bare):
        if not os.access(exe, os.X_OK):
            sys.exit(f"error: {exe} not found; build first (cmake --build {a.build})")
    work = a.keep or tempfile.mkdtemp(prefix="emo_bench_")
    os.makedirs(work, exist_ok=True)
    synth = subprocess.run([emo, "synth", "train-dp", "--ranks", "1", "--steps", "1", "--min-events",
                            str(a.events), "-o", work, "--json", "-"], check=True, stdout=subprocess.PIPE, text=True)
    file_events = json.loads(synth.stdout)["events"][0]
    trace = os.path.join(work, "train-dp_rank0.json")
    size = os.path.getsize(trace)
    out_json = os.path.join(work, "analysis.json")
    bare_t, emo_t, emo_rss = [], [], []
    for _ in range(a.reps):
        t, _ = measure([bare, trace])
        bare_t.append(t)
        t, rss = measure([emo, "analyze", trace, "--json", out_json])
        emo_t.append(t)
        emo_rss.append(rss)
    with open(out_json) as f:
        events = json.load(f)["events"]
    b, e = statistics.median(bare_t), statistics.median(emo_t)
    print(f"trace: {file_events} traceEvents entries ({events} complete events kept), {size / 1e6:.1f} MB")
    print(f"bare simdjson parse (median of {a.reps}): {b:.3f} s")
    print(f"emo analyze        (median of {a.reps}): {e:.3f} s   ratio {e / b:.2f}x (target <= 3)")
    print(f"emo analyze peak RSS: {max(emo_rss) / 1e6:.1f} MB = {max(emo_rss) / size:.2f}x file size (target <= 1.5)")


if __name__ == "__main__":
    main()
