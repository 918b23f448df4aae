#!/usr/bin/env python3
"""Golden (snapshot) tests of emo's answers: `emo analyze --json`, `emo pack --json` and
`emo optimize --json` plus the policy of `emo optimize -o`, on the small traces in
tests/golden/inputs/ (one folder per input, one trace file per rank).

    python3 scripts/golden.py --emo build/tools/emo/emo            # compare (the default, --check)
    python3 scripts/golden.py --emo build/tools/emo/emo --regenerate

--check runs every command on every input and compares the outputs with
tests/golden/expected/INPUT/*.json; it exits 1 on any difference and prints the input, the file,
the JSON path, the expected and the actual value of the first differences. --regenerate rewrites
the expected files from the current build: do that only when an answer is meant to change, and say
so in the commit. A command that fails is pinned too: CMD.error.json holds its exit code and its
stderr, and the check fails if it then succeeds (or fails differently).

Before storing and before comparing, the outputs are normalized (see VOLATILE_KEYS and PATH_KEYS):
wall-clock timings are dropped and input paths cut to their file name. Numbers compare with a
relative tolerance of 1e-9 (absolute 1e-12 near zero), so the Release and the sanitizer builds
agree; strings, booleans, integers, keys and array lengths compare exactly.

Python 3 standard library only. See tests/golden/README.md for what each input covers.
"""
import argparse
import concurrent.futures
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(REPO, "tests", "golden")
INPUTS = os.path.join(GOLDEN, "inputs")
EXPECTED = os.path.join(GOLDEN, "expected")

# ---- what is not compared: the one place that lists it ----
# Keys whose values are wall-clock measurements (they differ on every run): dropped wherever they occur.
VOLATILE_KEYS = frozenset({"solve_ms", "stage_ms"})
# Keys whose values are input file paths (where the checkout lies): cut to the file's base name.
PATH_KEYS = frozenset({"file"})
# Any other string that contains the inputs folder or the scratch folder gets a placeholder instead.
PLACEHOLDERS = (("<inputs>", INPUTS), ("<out>", None))  # None: the run's scratch folder

REL_TOL = 1e-9
ABS_TOL = 1e-12
MAX_SHOWN = 20  # differences printed
MIN_FULL_OPTIMIZE = 8  # inputs that must have a complete optimize golden (optimize.json + policy.json)

# ---- the commands: (name, emo arguments after the subcommand's traces, files written) ----
# {out} is the scratch folder of the run; the traces come right after the subcommand.
COMMANDS = (
    ("analyze", ["--json", "{out}/analyze.json"], ("analyze.json",)),
    ("pack", ["--device", "h100", "--json", "{out}/pack.json"], ("pack.json",)),
    ("optimize", ["--device", "h100", "--max-slowdown", "0.05", "--json", "{out}/optimize.json",
                  "-o", "{out}/policy.json"], ("optimize.json", "policy.json")),
)


def trace_files(input_dir):
    """The input's trace files (one per rank), in name order."""
    return sorted(os.path.join(input_dir, f) for f in os.listdir(input_dir)
                  if f.endswith(".json") or f.endswith(".json.gz"))


def list_inputs():
    if not os.path.isdir(INPUTS):
        return []
    return sorted(d for d in os.listdir(INPUTS) if os.path.isdir(os.path.join(INPUTS, d)))


def scrub(s, out_dir):
    for name, path in PLACEHOLDERS:
        path = out_dir if path is None else path
        if path:
            s = s.replace(path, name)
    return s


def normalize(v, out_dir, key=None):
    if isinstance(v, dict):
        return {k: normalize(x, out_dir, k) for k, x in v.items() if k not in VOLATILE_KEYS}
    if isinstance(v, list):
        return [normalize(x, out_dir) for x in v]
    if isinstance(v, str):
        if key in PATH_KEYS:
            return os.path.basename(v)
        return scrub(v, out_dir)
    return v


def run_input(emo, name):
    """Runs every command on one input: {file name: normalized JSON}."""
    traces = trace_files(os.path.join(INPUTS, name))
    if not traces:
        raise RuntimeError(f"{name}: no .json or .json.gz trace in {os.path.join(INPUTS, name)}")
    results = {}
    with tempfile.TemporaryDirectory(prefix=f"emo-golden-{name}-") as out:
        for cmd, args, files in COMMANDS:
            argv = [emo, cmd, *traces, *[a.replace("{out}", out) for a in args]]
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            written = [f for f in files if os.path.exists(os.path.join(out, f))]
            if p.returncode != 0:
                results[f"{cmd}.error.json"] = {
                    "exit_code": p.returncode,
                    "stderr": scrub(p.stderr, out).splitlines(),
                    "files_written": written,
                }
            else:
                for f in files:
                    path = os.path.join(out, f)
                    if not os.path.exists(path):
                        raise RuntimeError(f"{name}: `emo {cmd}` exited 0 but wrote no {f}")
                    with open(path) as fh:
                        results[f] = normalize(json.load(fh), out)
            for f in written:
                os.remove(os.path.join(out, f))
    return results


# ---- comparison ----

def kind(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "null"
    return "array" if isinstance(v, list) else "object"


def short(v):
    s = json.dumps(v)
    return s if len(s) <= 120 else s[:117] + "..."


def compare(exp, act, path, diffs):
    """Appends (json path, expected, actual) for every difference."""
    ke, ka = kind(exp), kind(act)
    if ke != ka:
        diffs.append((path, f"{short(exp)} ({ke})", f"{short(act)} ({ka})"))
        return
    if ke == "object":
        for k in exp:
            if k not in act:
                diffs.append((f"{path}.{k}", short(exp[k]), "(key missing)"))
            else:
                compare(exp[k], act[k], f"{path}.{k}", diffs)
        for k in act:
            if k not in exp:
                diffs.append((f"{path}.{k}", "(no such key)", short(act[k])))
    elif ke == "array":
        if len(exp) != len(act):
            diffs.append((f"{path} (length)", str(len(exp)), str(len(act))))
        for i in range(min(len(exp), len(act))):
            compare(exp[i], act[i], f"{path}[{i}]", diffs)
    elif ke == "number":
        if not (math.isfinite(exp) and math.isfinite(act)):
            same = exp == act or (math.isnan(exp) and math.isnan(act))
        else:
            same = abs(exp - act) <= max(REL_TOL * max(abs(exp), abs(act)), ABS_TOL)
        if not same:
            diffs.append((path, repr(exp), repr(act)))
    elif exp != act:
        diffs.append((path, short(exp), short(act)))


def write_json(path, v):
    with open(path, "w") as f:
        json.dump(v, f, indent=1, ensure_ascii=False)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", required=True, help="the emo binary (e.g. build/tools/emo/emo)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare with the expected files (default)")
    mode.add_argument("--regenerate", action="store_true", help="rewrite the expected files")
    ap.add_argument("--only", action="append", default=[], metavar="INPUT", help="only this input (repeatable)")
    ap.add_argument("--actual", metavar="DIR", help="also write the normalized actual outputs to DIR/INPUT/")
    ap.add_argument("-j", "--jobs", type=int, default=min(4, os.cpu_count() or 1), help="inputs run at once")
    a = ap.parse_args()

    emo = os.path.abspath(a.emo)
    if not (os.path.isfile(emo) and os.access(emo, os.X_OK)):
        print(f"FAIL: golden: {a.emo} is not an executable file", file=sys.stderr)
        return 1
    inputs = list_inputs()
    if not inputs:
        print(f"FAIL: golden: no inputs in {INPUTS}", file=sys.stderr)
        return 1
    if a.only:
        unknown = [n for n in a.only if n not in inputs]
        if unknown:
            print(f"FAIL: golden: no such input: {', '.join(unknown)} (have: {', '.join(inputs)})", file=sys.stderr)
            return 1
        inputs = [n for n in inputs if n in a.only]

    t0 = time.monotonic()
    actual = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            for name, res in zip(inputs, pool.map(lambda n: run_input(emo, n), inputs)):
                actual[name] = res
    except (RuntimeError, OSError, json.JSONDecodeError) as e:
        print(f"FAIL: golden: {e}", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - t0

    if a.actual:
        for name, res in actual.items():
            d = os.path.join(a.actual, name)
            os.makedirs(d, exist_ok=True)
            for f, v in res.items():
                write_json(os.path.join(d, f), v)

    if a.regenerate:
        for name, res in actual.items():
            d = os.path.join(EXPECTED, name)
            if os.path.isdir(d):
                shutil.rmtree(d)
            os.makedirs(d)
            for f, v in res.items():
                write_json(os.path.join(d, f), v)
        if not a.only and os.path.isdir(EXPECTED):
            for stale in sorted(set(os.listdir(EXPECTED)) - set(inputs)):
                shutil.rmtree(os.path.join(EXPECTED, stale))
                print(f"removed expected/{stale} (no such input)")
        full = sum(1 for res in actual.values() if "policy.json" in res)
        print(f"golden: wrote the expected outputs of {len(actual)} inputs ({full} with a full optimize) "
              f"to {os.path.relpath(EXPECTED, REPO)} in {elapsed:.1f} s")
        if full < MIN_FULL_OPTIMIZE and not a.only:
            print(f"warning: only {full} inputs have a full optimize golden (want at least {MIN_FULL_OPTIMIZE})")
        return 0

    # ---- check ----
    diffs = []  # (input, file, json path, expected, actual)
    files = 0
    for name, res in actual.items():
        d = os.path.join(EXPECTED, name)
        if not os.path.isdir(d):
            diffs.append((name, "-", "-", "(no expected outputs)", "run scripts/golden.py --regenerate"))
            continue
        expected_files = sorted(f for f in os.listdir(d) if f.endswith(".json"))
        for f in sorted(set(expected_files) | set(res)):
            files += 1
            if f not in res:
                hint = ""
                cmd = next((c for c, _, fs in COMMANDS if f in fs), f.split(".")[0])
                err = res.get(f"{cmd}.error.json")
                if err:
                    hint = f": exit {err['exit_code']}: " + " / ".join(err["stderr"])[:300]
                diffs.append((name, f, "-", "(file expected)", "not produced" + hint))
                continue
            if f not in expected_files:
                diffs.append((name, f, "-", "(no such file expected)", "produced"))
                continue
            with open(os.path.join(d, f)) as fh:
                exp = json.load(fh)
            file_diffs = []
            compare(exp, res[f], "$", file_diffs)
            diffs.extend((name, f, p, e, x) for p, e, x in file_diffs)
    if not a.only and os.path.isdir(EXPECTED):
        for stale in sorted(set(os.listdir(EXPECTED)) - set(inputs)):
            diffs.append((stale, "-", "-", "(expected outputs)", "no such input in tests/golden/inputs"))
        full = sum(1 for n in inputs if os.path.exists(os.path.join(EXPECTED, n, "policy.json")))
        if full < MIN_FULL_OPTIMIZE:
            diffs.append(("-", "-", "-", f"at least {MIN_FULL_OPTIMIZE} inputs with a full optimize golden",
                          f"{full}"))

    if diffs:
        print(f"FAIL: golden: {len(diffs)} difference(s) from tests/golden/expected "
              f"({len(actual)} inputs, {files} files, {elapsed:.1f} s):")
        for name, f, p, e, x in diffs[:MAX_SHOWN]:
            print(f"  {name}/{f}: {p}\n      expected {e}\n      actual   {x}")
        if len(diffs) > MAX_SHOWN:
            print(f"  ... and {len(diffs) - MAX_SHOWN} more")
        print("An answer changed. If the change is intended, regenerate with\n"
              "  python3 scripts/golden.py --emo build/tools/emo/emo --regenerate\n"
              "and say so in the commit; otherwise it is a regression.")
        return 1
    print(f"golden: {len(actual)} inputs, {files} files match ({elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
