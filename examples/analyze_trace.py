#!/usr/bin/env python3
"""Analyze one step of a PyTorch profiler (Kineto) trace with EMO and look at it as DataFrames.

usage: examples/analyze_trace.py [TRACE ...] [--step N]

Without traces it writes a small synthetic data-parallel training step (`emo synth train-dp`) into a
temporary folder and analyzes that. Prints the replay check, the critical path's breakdown, the GPU
ops with the most slack, and the time per kernel name on and off the critical path.
"""
import argparse
import tempfile

import emo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", help="one trace file per rank (.json or .json.gz)")
    ap.add_argument("--step", type=int, default=None, help="ProfilerStep number (default: the last complete one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = args.traces or emo.synth("train-dp", tmp, ranks=2, layers=4)
        try:
            a = emo.analyze(paths, step=args.step, progress=True)
        except emo.Error as e:
            raise SystemExit(f"error: {e}")
        for w in a.warnings:
            print(f"warning: {w}")
        print(a)
        print(f"step: measured {a.measured_span_us / 1e3:.3f} ms, replayed {a.replayed_span_us / 1e3:.3f} ms "
              f"({a.replay_error_pct:+.3f} %)")
        print("critical path:", ", ".join(f"{k} {100 * v / a.critical_path_us:.1f} %"
                                          for k, v in sorted(a.breakdown.items(), key=lambda kv: -kv[1]) if v > 0))
        print(a.gpus.to_string(index=False))

        k = a.kernels
        print(f"\n{len(k)} GPU ops, {int(k.on_critical_path.sum())} on the critical path; the 10 with the most slack:")
        cols = ["rank", "index", "name", "stream", "dur_us", "slack_us"]
        print(k.nlargest(10, "slack_us")[cols].to_string(index=False, max_colwidth=50))

        print("\nGPU time per kernel name (ms), on and off the critical path, top 10:")
        by_name = (k.assign(ms=k.dur_us / 1e3)
                    .pivot_table(index="name", columns="on_critical_path", values="ms", aggfunc="sum",
                                 fill_value=0.0, observed=True)
                    .rename(columns={True: "on_path", False: "off_path"}))
        by_name["total"] = by_name.sum(axis=1)
        print(by_name.nlargest(10, "total").round(3).to_string(max_colwidth=50))


if __name__ == "__main__":
    main()
