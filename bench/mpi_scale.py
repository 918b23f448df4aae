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

A model of the wall time is fitted to the measured points of each subcommand (least squares on relative
errors) and printed beside them, with its error on each point, then used for larger P:
    wall = start(P) + a * (MB of the largest shard) + d * ranks / P + b * ranks + c * (ranks / 1000)^2
                                                                                  (a, d, b, c >= 0)
where start(P) is the start-up and end of P processes of emo (measured: `mpirun -np P emo --version`, which
starts and ends MPI and nothing else; 0 at P = 1), a the read time per MB of a shard (the shards are read at
once), d what each process does per rank of its own part (analyze, whatif and pack build, replay and pack
their parts, all processes at once), b what process 0 does per rank of the step (the assembly, graph and
replay of the other subcommands; the parts' gathered facts) and c what grows faster (optimize: its search
replays every rank for each of a number of plans that grows with the packs). With P = 1 and 2 only, d and b
part where P = 2 took less than P = 1 per rank (they are one term at P = 1). The prediction for larger P
assumes shards of equal bytes and a core per process. --model-from FILE refits a saved run.

usage: bench/mpi_scale.py --emo build/tools/emo/emo [--ranks 64,256,1024] [--procs 1,2] [--commands analyze,whatif,pack]
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

CORES = os.cpu_count() or 1


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


def solve(m, v):
    """Gaussian elimination for a small square system; None when singular."""
    n = len(v)
    a = [row[:] + [y] for row, y in zip(m, v)]
    for i in range(n):
        piv = max(range(i, n), key=lambda r: abs(a[r][i]))
        if abs(a[piv][i]) < 1e-12:
            return None
        a[i], a[piv] = a[piv], a[i]
        for r in range(n):
            if r != i:
                f = a[r][i] / a[i][i]
                a[r] = [x - f * y for x, y in zip(a[r], a[i])]
    return [a[i][n] / a[i][i] for i in range(n)]


# The model's terms: the read of the largest shard (MB, every process at once), what each process does
# per rank of its part (analyze, whatif, pack: the graph, replays and packs of its own ranks, all
# processes at once), what process 0 does per rank of the step (the assembly, graph and replay of the
# other subcommands; the gathered facts of the parts), and per rank squared (optimize: each of the
# search's replays covers every rank, and the number of replays grows with the packs).
TERMS = [("ms per MB of the largest shard", lambda r: r["largest_shard_mb"]),
         ("ms per rank of a process's part", lambda r: r["ranks"] / r["procs"]),
         ("ms per rank", lambda r: float(r["ranks"])),
         ("ms per 1,000 ranks squared", lambda r: (r["ranks"] / 1000.0) ** 2)]


def fit(pts, starts):
    """Least squares for wall - start(P) = sum of coefficient x term, every coefficient at least 0: the
    best fit over the subsets of terms whose unconstrained solution is nonnegative. Relative errors are
    minimised (each point weighted by 1 / wall), so the small runs count as much as the large ones."""
    ys = [r["wall_s"] - starts.get(r["procs"], 0.0) for r in pts]
    ws = [1.0 / max(r["wall_s"], 1e-6) for r in pts]
    best, best_err = [0.0] * len(TERMS), float("inf")
    for mask in range(1, 1 << len(TERMS)):
        idx = [i for i in range(len(TERMS)) if mask >> i & 1]
        cols = [[TERMS[i][1](r) for r in pts] for i in idx]
        m = [[sum(w * w * x * y for w, x, y in zip(ws, ci, cj)) for cj in cols] for ci in cols]
        v = [sum(w * w * x * y for w, x, y in zip(ws, ci, ys)) for ci in cols]
        c = solve(m, v)
        if c is None or any(x < 0 for x in c):
            continue
        coef = [0.0] * len(TERMS)
        for i, x in zip(idx, c):
            coef[i] = x
        err = sum((w * (y - sum(k * t[1](r) for k, t in zip(coef, TERMS)))) ** 2 for w, y, r in zip(ws, ys, pts))
        if err < best_err:
            best, best_err = coef, err
    return best


def model_wall(coef, starts, row):
    return starts.get(row["procs"], 0.0) + sum(k * t[1](row) for k, t in zip(coef, TERMS))


def report_model(rows, starts):
    for cmd in sorted({r["command"] for r in rows}):
        pts = [r for r in rows if r["command"] == cmd]
        if len(pts) < 3:
            continue
        coef = fit(pts, starts)
        print(f"model for {cmd}: wall = start(P) + " +
              " + ".join(f"{k * 1e3:.3g} {t[0]}" for k, t in zip(coef, TERMS) if k > 0) +
              "   (start(P): " + ", ".join(f"P={p} {t:.2f} s" for p, t in sorted(starts.items())) + ")")
        for r in pts:
            mod = model_wall(coef, starts, r)
            r["model_s"] = mod
            print(f"  {r['ranks']:5d} ranks P={r['procs']}: measured {r['wall_s']:6.2f} s, model {mod:6.2f} s "
                  f"({100 * (mod - r['wall_s']) / r['wall_s']:+.0f} %)")
        n = max(r["ranks"] for r in pts)
        total = max(r["files_mb"] for r in pts if r["ranks"] == n)
        last = max(starts) if starts else 1
        preds = [f"P={p} {model_wall(coef, {p: starts.get(last, 0.0)}, {'procs': p, 'ranks': n, 'largest_shard_mb': total / p}):.1f} s"
                 for p in (4, 16, 64, 256) if p <= n]
        print(f"  {n} ranks, shards of equal bytes, a core per process: " + ", ".join(preds))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", required=True)
    ap.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    ap.add_argument("--ranks", default="64,256,1024")
    ap.add_argument("--procs", default="1,2")
    ap.add_argument("--commands", default="analyze",
                    help="analyze, whatif (--scale on the GEMMs and --topology: 8 GPUs a host, a 25 GB/s network), "
                         "pack and/or optimize, comma-separated")
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
            starts[p] = statistics.median(run([a.mpirun, "--oversubscribe", "-np", str(p), a.emo, "--version"], env)[0]
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
                    walls, peaks, cpus = [], None, []
                    for _ in range(a.reps):
                        mem = os.path.join(tmp, "mem")
                        out = os.path.join(tmp, f"out{p}.json")
                        args = [gnu_time, "-f", "%M %U %S", "-a", "-o", mem, a.emo, cmd] + files + ["--json", out]
                        if cmd == "optimize":
                            args += ["-o", os.path.join(tmp, f"policy{p}.json")]
                        if cmd == "whatif":
                            topo = os.path.join(tmp, "topology.json")
                            with open(topo, "w") as fh:
                                json.dump({"gpus_per_host": 8, "intra_host": {"bandwidth_gb_s": 200, "latency_us": 6},
                                           "inter_host": {"bandwidth_gb_s": 25, "latency_us": 10}}, fh)
                            args += ["--scale", "gemm|Gemm|sm90=1.2", "--topology", topo]
                        if os.path.exists(mem):
                            os.remove(mem)
                        full = args if p == 1 else [a.mpirun, "--oversubscribe", "-np", str(p)] + args
                        wall, r = run(full, env)
                        if r.returncode != 0:
                            sys.exit(f"error: {cmd} on {n} ranks at P={p} exited {r.returncode}: {r.stderr[-500:]}")
                        walls.append(wall)
                        with open(mem) as fh:  # one line per process: peak KB, user s, system s
                            lines = [ln.split() for ln in fh.read().splitlines() if ln.strip()]
                        kb = [int(ln[0]) for ln in lines]
                        cpus.append(sum(float(ln[1]) + float(ln[2]) for ln in lines))
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
                    cpu = statistics.median(cpus)
                    row = {"command": cmd, "ranks": n, "procs": p, "files_mb": sum(sizes) / 1e6,
                           "largest_shard_mb": shard_mb, "wall_s": wall, "cpu_s": cpu,
                           "peak_mb_per_process": [k / 1024 for k in sorted(peaks, reverse=True)],
                           "same_as_p1": same}
                    if p == 1:
                        base = row
                    rows.append(row)
                    peak = max(row["peak_mb_per_process"])
                    ratio = f"{wall / base['wall_s']:.2f}x P=1" if base and p > 1 else ""
                    # CPU time over wall time: the cores the run kept busy. At P = 1, its CPU time over this
                    # machine's cores is the least wall time any P could reach here with the same work.
                    floor = f"  (the floor on {CORES} cores: {cpu / CORES / wall:.2f}x)" if p == 1 else ""
                    print(f"{cmd:9s} {n:5d} ranks  P={p}  {wall:7.2f} s {ratio:12s} {cpu / wall:4.2f} cores busy  "
                          f"peak {peak:7.1f} MB/process (largest shard {shard_mb:7.1f} MB of files: "
                          f"{peak / shard_mb:.2f}x)  {'same answer' if same else 'DIFFERENT ANSWER'}{floor}", flush=True)
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
