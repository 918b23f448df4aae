#!/usr/bin/env python3
"""`mpirun -np P emo ...` at scale (docs/mpi.md, "Measured"): synthetic jobs of 64 to 1,024 ranks, each
subcommand at P = 1 (no launcher) and P = 2, 4, ... under mpirun; wall time of the run, and each process's
peak resident memory against the bytes of its shard of the rank files; the outputs of every P compared
(timing fields aside: they must be the same).

A job of N ranks mixes the families (--families mix): N/2 ranks of train-dp, N/4 of train-pp and N/4 of
train-tp, written by `emo synth` (--layers) and renumbered as one world (process groups renamed and moved
with their ranks), so that the shards hold files of every kind. These are three jobs side by side (emo
warns that the ranks form three groups with steps of different lengths): right for timing the reading,
not for judging a policy. --families train-dp (or train-pp, train-tp) writes one job of N ranks. Each
configuration runs --reps times; the median wall is shown.

A model of the wall time is fitted to the measured points of each subcommand (least squares) and printed
beside them, with its error on each point, then used for larger P:
    wall = start(P) + a * (MB of the largest shard) + b * ranks        (a, b >= 0)
where start(P) is mpirun's start-up (measured: `mpirun -np P true`; 0 at P = 1), a the read time per MB
of a shard (the shards are read at once) and b what process 0 does per rank once the shards are in (the
assembly, the graph, the replay and, for optimize, the later stages). The prediction for larger P
assumes shards of equal bytes and a core per process. --model-from FILE refits a saved run.

usage: bench/mpi_scale.py --emo build/tools/emo/emo [--ranks 64,256,1024] [--procs 1,2] [--commands analyze]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return time.perf_counter() - t0, p


def renumber(t, prefix, base, world):
    """One family's rank file made a part of a larger world: its rank moved by `base`, its process groups
    renamed (`prefix` + name) and their ranks moved, on the file and on each collective kernel, so that no
    two families' groups share a name (they would be matched as one collective)."""
    info = t["distributedInfo"]
    info["rank"] += base
    info["world_size"] = world
    for pg in info.get("pg_config", []):
        pg["pg_name"] = prefix + pg["pg_name"]
        pg["ranks"] = [r + base for r in pg["ranks"]]
    for e in t["traceEvents"]:
        args = e.get("args")
        if not isinstance(args, dict) or "Process Group Name" not in args:
            continue
        args["Process Group Name"] = prefix + args["Process Group Name"]
        if "Process Group Ranks" in args:
            ranks = json.loads(args["Process Group Ranks"])
            args["Process Group Ranks"] = "[" + ", ".join(str(r + base) for r in ranks) + "]"
        if isinstance(args.get("Global rank start"), int):
            args["Global rank start"] += base


def write_job(emo, ranks, layers, out, families="mix"):
    """N ranks of one family, or (mix) half train-dp, a quarter train-pp, a quarter train-tp: three jobs
    renumbered 0..N-1 as one world (each family's process groups renamed and moved with its ranks)."""
    os.makedirs(out, exist_ok=True)
    if families == "mix":
        parts = [("train-dp", ranks // 2), ("train-pp", ranks // 4), ("train-tp", ranks - ranks // 2 - ranks // 4)]
    else:
        parts = [(families, ranks)]
    rank = 0
    files = []
    for fam, n in parts:
        if n == 0:
            continue
        d = os.path.join(out, fam)
        subprocess.run([emo, "synth", fam, "--ranks", str(n), "--layers", str(layers), "-o", d],
                       check=True, stdout=subprocess.DEVNULL)
        base = rank
        for f in sorted(os.listdir(d), key=lambda s: int(re.search(r"rank(\d+)", s).group(1))):
            path = os.path.join(d, f)
            with open(path) as fh:
                t = json.load(fh)
            if len(parts) > 1:
                renumber(t, fam + ":", base, ranks)
            dst = os.path.join(out, f"rank{rank:05d}.json")
            with open(dst, "w") as fh:
                json.dump(t, fh)
            files.append(dst)
            rank += 1
        shutil.rmtree(d)
    return files


def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in ("stage_ms", "solve_ms")}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v


def shard_bounds(sizes, procs):
    """The shards process 0 hands out (dist::shard_by_weight over the files' bytes + 1)."""
    w = [x + 1 for x in sizes]
    total = sum(w)
    bounds = [0] + [len(w)] * procs
    before, part = 0, 0
    for i, x in enumerate(w):
        mine = min(procs - 1, int((before + x / 2) * procs / total))
        while part < mine:
            part += 1
            bounds[part] = i
        before += x
    return bounds


def solve3(m, v):
    """Gaussian elimination for a 3x3 system; None when singular."""
    a = [row[:] + [y] for row, y in zip(m, v)]
    for i in range(3):
        piv = max(range(i, 3), key=lambda r: abs(a[r][i]))
        if abs(a[piv][i]) < 1e-12:
            return None
        a[i], a[piv] = a[piv], a[i]
        for r in range(3):
            if r != i:
                f = a[r][i] / a[i][i]
                a[r] = [x - f * y for x, y in zip(a[r], a[i])]
    return [a[i][3] / a[i][i] for i in range(3)]


def fit(pts, starts):
    """Least squares for wall - start(P) = a * shard_mb + b * ranks (both at least 0: a negative one is
    dropped and the other refitted)."""
    ys = [r["wall_s"] - starts.get(r["procs"], 0.0) for r in pts]
    x1 = [r["largest_shard_mb"] for r in pts]
    x2 = [float(r["ranks"]) for r in pts]
    s11, s22, s12 = sum(x * x for x in x1), sum(x * x for x in x2), sum(x * y for x, y in zip(x1, x2))
    t1, t2 = sum(x * y for x, y in zip(x1, ys)), sum(x * y for x, y in zip(x2, ys))
    det = s11 * s22 - s12 * s12
    if abs(det) > 1e-12:
        a = (t1 * s22 - t2 * s12) / det
        b = (s11 * t2 - s12 * t1) / det
        if a >= 0 and b >= 0:
            return a, b
    one_a = t1 / s11 if s11 else 0.0
    one_b = t2 / s22 if s22 else 0.0
    err_a = sum((y - one_a * x) ** 2 for x, y in zip(x1, ys))
    err_b = sum((y - one_b * x) ** 2 for x, y in zip(x2, ys))
    return (max(one_a, 0.0), 0.0) if err_a <= err_b else (0.0, max(one_b, 0.0))


def report_model(rows, starts):
    for cmd in sorted({r["command"] for r in rows}):
        pts = [r for r in rows if r["command"] == cmd]
        if len(pts) < 3:
            continue
        ca, cb = fit(pts, starts)
        print(f"model for {cmd}: wall = start(P) + {ca * 1e3:.2f} ms per MB of the largest shard + {cb * 1e3:.2f} ms "
              f"per rank   (start(P): " + ", ".join(f"P={p} {t:.2f} s" for p, t in sorted(starts.items())) + ")")
        for r in pts:
            mod = starts.get(r["procs"], 0.0) + ca * r["largest_shard_mb"] + cb * r["ranks"]
            r["model_s"] = mod
            print(f"  {r['ranks']:5d} ranks P={r['procs']}: measured {r['wall_s']:6.2f} s, model {mod:6.2f} s "
                  f"({100 * (mod - r['wall_s']) / r['wall_s']:+.0f} %)")
        n = max(r["ranks"] for r in pts)
        total = max(r["files_mb"] for r in pts if r["ranks"] == n)
        last = starts[max(starts)] if starts else 0.0
        preds = [f"P={p} {last + ca * total / p + cb * n:.1f} s" for p in (4, 16, 64, 256) if p <= n]
        print(f"  {n} ranks, shards of equal bytes, a core per process: " + ", ".join(preds))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", required=True)
    ap.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    ap.add_argument("--ranks", default="64,256,1024")
    ap.add_argument("--procs", default="1,2")
    ap.add_argument("--commands", default="analyze", help="analyze and/or optimize, comma-separated")
    ap.add_argument("--optimize-max-ranks", type=int, default=64, help="optimize only up to this many ranks")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--families", default="mix",
                    help="mix (three jobs: half train-dp, a quarter each train-pp and train-tp, renumbered as one "
                         "world), or one family (train-dp, train-pp, train-tp) as one job")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", help="write the rows to FILE")
    ap.add_argument("--model-from", help="fit and print the model from the rows of an earlier --json FILE only")
    a = ap.parse_args()
    if a.model_from:
        with open(a.model_from) as fh:
            saved = json.load(fh)
        report_model(saved["rows"], {int(k): v for k, v in saved["mpirun_start_s"].items()})
        return
    gnu_time = shutil.which("time") or "/usr/bin/time"
    if not os.access(gnu_time, os.X_OK):
        sys.exit("error: GNU time (/usr/bin/time) is needed for each process's peak memory")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    procs = [int(x) for x in a.procs.split(",")]
    starts = {}
    for p in procs:
        if p > 1:
            starts[p] = statistics.median(run([a.mpirun, "--oversubscribe", "-np", str(p), "true"], env)[0]
                                          for _ in range(a.reps))
    rows = []
    tmp = tempfile.mkdtemp(prefix="emo_mpi_scale_")
    try:
        for n in [int(x) for x in a.ranks.split(",")]:
            files = write_job(a.emo, n, a.layers, os.path.join(tmp, f"job{n}"), a.families)
            sizes = [os.path.getsize(f) for f in files]
            for cmd in a.commands.split(","):
                if cmd == "optimize" and n > a.optimize_max_ranks:
                    continue
                ref = None
                base = None
                for p in procs:
                    walls, peaks = [], None
                    for _ in range(a.reps):
                        mem = os.path.join(tmp, "mem")
                        out = os.path.join(tmp, f"out{p}.json")
                        args = [gnu_time, "-f", "%M", "-a", "-o", mem, a.emo, cmd] + files + ["--json", out]
                        if cmd == "optimize":
                            args += ["-o", os.path.join(tmp, f"policy{p}.json")]
                        if os.path.exists(mem):
                            os.remove(mem)
                        full = args if p == 1 else [a.mpirun, "--oversubscribe", "-np", str(p)] + args
                        wall, r = run(full, env)
                        if r.returncode != 0:
                            sys.exit(f"error: {cmd} on {n} ranks at P={p} exited {r.returncode}: {r.stderr[-500:]}")
                        walls.append(wall)
                        with open(mem) as fh:
                            kb = [int(x) for x in fh.read().split()]
                        peaks = kb if peaks is None else [max(x, y) for x, y in zip(sorted(peaks), sorted(kb))]
                    with open(out) as fh:
                        got = strip(json.load(fh))
                    same = True
                    if ref is None:
                        ref = got
                    else:
                        same = got == ref
                    bounds = shard_bounds(sizes, p)
                    shard_mb = max(sum(sizes[bounds[q]:bounds[q + 1]]) for q in range(p)) / 1e6
                    wall = statistics.median(walls)
                    row = {"command": cmd, "ranks": n, "procs": p, "files_mb": sum(sizes) / 1e6,
                           "largest_shard_mb": shard_mb, "wall_s": wall,
                           "peak_mb_per_process": [k / 1024 for k in sorted(peaks, reverse=True)],
                           "same_as_p1": same}
                    if p == 1:
                        base = row
                    rows.append(row)
                    peak = max(row["peak_mb_per_process"])
                    ratio = f"{wall / base['wall_s']:.2f}x P=1" if base and p > 1 else ""
                    print(f"{cmd:9s} {n:5d} ranks  P={p}  {wall:7.2f} s {ratio:12s} peak {peak:7.1f} MB/process "
                          f"(largest shard {shard_mb:7.1f} MB of files: {peak / shard_mb:.2f}x)  "
                          f"{'same answer' if same else 'DIFFERENT ANSWER'}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report_model(rows, starts)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"rows": rows, "mpirun_start_s": starts}, fh, indent=1)
    if any(not r["same_as_p1"] for r in rows):
        sys.exit("error: an answer differs from P=1's")


if __name__ == "__main__":
    main()
