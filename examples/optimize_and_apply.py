#!/usr/bin/env python3
"""Optimize a clock policy for a step, save it, and run it on the emulated GPU two ways: `evaluate`
(the default clocks, the policy and each baseline, side by side) and `apply` (the runtime applying
the policy online, as inside a real job).

usage: examples/optimize_and_apply.py [TRACE ...] [--device h100] [--max-slowdown 0.05] [-o policy.json]

Without traces it writes a small pipeline-parallel training step with bubbles (`emo synth train-pp`)
into a temporary folder and uses that.
"""
import argparse
import tempfile

import emo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", help="one trace file per rank (.json or .json.gz)")
    ap.add_argument("--device", default="h100", help="the GPU the policy is for (a built-in profile)")
    ap.add_argument("--max-slowdown", type=float, default=0.05, help="allowed step-time increase (0.05 = 5 %%)")
    ap.add_argument("-o", "--output", default=None, help="write the policy (emo-policy/1) to this file")
    ap.add_argument("--steps", type=int, default=200, help="steps of the online run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = args.traces or emo.synth("train-pp", tmp, ranks=4, layers=4)
        try:
            policy = emo.optimize(paths, device=args.device, max_slowdown=args.max_slowdown, progress=True)
            for w in policy.warnings:
                print(f"warning: {w}")
            print(policy)
            pred = policy.result["policy"]
            print(f"predicted: {pred['saving_pct']:.2f} % energy saved at {pred['slowdown_pct']:+.2f} % step time")
            if args.output:
                policy.save(args.output)
                print(f"policy written to {args.output}")
            print(policy.packs[["rank", "clock_mhz", "issue_at_us", "first_name", "last_name"]].to_string(index=False, max_colwidth=40))

            emulated = f"emulated:{args.device}"
            ev = emo.evaluate(policy, paths, device=emulated)
            print(f"\non {emulated} ({int(ev['steps'].iloc[0])} steps each, first left out):")
            print(ev[["time_us", "energy_j", "slowdown_pct", "saving_pct"]].round(3).to_string())

            r = emo.apply(policy, paths, device=emulated, steps=args.steps)
            m = r["measured"]["policy"]
            lo, hi = m.get("saving_ci_pct", [float("nan")] * 2)
            print(f"\nruntime, {r['steps']} steps online: saving {m['saving_pct']:.2f} % [{lo:.2f}, {hi:.2f}], "
                  f"slowdown {m['slowdown_pct']:+.2f} % (bound {100 * policy.max_slowdown:.1f} %), "
                  f"{r['clock_changes']['calls']} clock calls, fallbacks: {len(r['fallbacks'])}")
        except emo.Error as e:
            raise SystemExit(f"error: {e}")


if __name__ == "__main__":
    main()
