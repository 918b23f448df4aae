#!/usr/bin/env python3
"""A read-only check of EMO's runtime on a real GPU (docs/runtime.md). Never locks a clock, never changes
a setting: NVML is only queried and the runtime runs as a dry run (every change decided and recorded,
none made).

For a small PyTorch transformer training step and an inference loop on the GPU, it

1. captures a trace of the step with emo.torch's profiler settings (enable_cuda_sync_events);
2. makes a policy for it (emo.optimize with the GPU's built-in profile, profiled on its emulated twin);
3. runs the steps again with the runtime in dry-run mode, anchored on the job's CUDA stream
   (cuLaunchHostFunc), while torch.profiler records them, and compares
   - each step's anchor with the start of the step's first GPU operation in the trace (the anchor
     error: goal p99 < 1 ms),
   - each decided change with the start of its pack's first operation (how early or late it would
     have been issued);

and measures the cost of an NVML energy read, the counter's update period and the supported clocks.
Everything goes to OUT/gpu_dry_run.json (OUT: $OUT on the device machine, else ./gpu_dry_run_out).

usage: scripts/gpu_dry_run.py [--out DIR] [--steps 40] [--skip-train] [--skip-infer]
Without a CUDA device it says so and exits 2. Without the emo package (pip install .) it measures only
what needs no EMO (NVML, the anchor error of a bare cuLaunchHostFunc) and says so in the JSON.
"""
import argparse
import ctypes
import gzip
import json
import os
import statistics
import sys
import time


def percentile(v, q):
    if not v:
        return None
    s = sorted(v)
    return s[min(len(s) - 1, max(0, int(round(q / 100 * (len(s) - 1)))))]


def summary(v):
    if not v:
        return {"n": 0}
    return {"n": len(v), "p50": percentile(v, 50), "p99": percentile(v, 99), "max": max(v), "min": min(v),
            "mean": statistics.fmean(v)}


# ---- NVML, read-only ----------------------------------------------------------------------------

def nvml_readonly(index=0, reads=200):
    out = {}
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        return {"error": f"libnvidia-ml.so.1: {e}"}
    if nvml.nvmlInit_v2() != 0:
        return {"error": "nvmlInit_v2 failed"}
    try:
        h = ctypes.c_void_p()
        if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(h)) != 0:
            return {"error": f"no GPU {index}"}
        name = ctypes.create_string_buffer(96)
        nvml.nvmlDeviceGetName(h, name, 96)
        out["name"] = name.value.decode()
        n = ctypes.c_uint(0)
        mem = (ctypes.c_uint * 64)()
        n.value = 64
        if nvml.nvmlDeviceGetSupportedMemoryClocks(h, ctypes.byref(n), mem) == 0 and n.value:
            mclk = mem[0]
            sm = (ctypes.c_uint * 512)()
            n2 = ctypes.c_uint(512)
            if nvml.nvmlDeviceGetSupportedGraphicsClocks(h, mclk, ctypes.byref(n2), sm) == 0:
                out["supported_sm_clocks_mhz"] = sorted({sm[i] for i in range(n2.value)})
            out["memory_clock_mhz"] = mclk
        e = ctypes.c_ulonglong(0)
        cost, values, times = [], [], []
        for _ in range(reads):
            t0 = time.perf_counter_ns()
            rc = nvml.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(e))
            t1 = time.perf_counter_ns()
            if rc != 0:
                out["energy_error"] = rc
                break
            cost.append((t1 - t0) / 1e3)
            values.append(e.value)
            times.append(t1)
            time.sleep(0.002)
        out["energy_read_us"] = summary(cost)
        changes = [times[i] for i in range(1, len(values)) if values[i] != values[i - 1]]
        out["counter_update_ms"] = summary([(b - a) / 1e6 for a, b in zip(changes, changes[1:])])
        clk = ctypes.c_uint(0)
        if nvml.nvmlDeviceGetClockInfo(h, 1, ctypes.byref(clk)) == 0:
            out["sm_clock_now_mhz"] = clk.value
    finally:
        nvml.nvmlShutdown()
    return out


# ---- the trace: each step's first GPU op and each pack's first op ---------------------------------

def gpu_ops_by_step(trace_path):
    """[(step number, [(start_ns_abs, name, stream), ...] sorted)] from a Kineto trace on its realtime clock."""
    opener = gzip.open if trace_path.endswith(".gz") else open
    with opener(trace_path, "rt") as f:
        doc = json.load(f)
    base = int(doc.get("baseTimeNanoseconds", 0))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    runtime = {e["args"]["correlation"]: e for e in ev
               if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    out = []
    for s in steps:
        b, t = s["ts"], s["ts"] + s["dur"]
        ops = []
        for k in gpu:
            r = runtime.get(k.get("args", {}).get("correlation"))
            if r is not None and b <= r["ts"] <= t:  # launched from inside the step
                ops.append((base + int(k["ts"] * 1000), k["name"], k.get("args", {}).get("stream", -1)))
        ops.sort()
        out.append((int(s["name"].split("#")[1]), ops))
    return out


def anchor_errors(steps_ops, anchors_ns):
    """Anchor − the step's first GPU op start, in µs, for steps both have (in order)."""
    errs = []
    for (_, ops), a in zip(steps_ops, anchors_ns):
        if ops:
            errs.append((a - ops[0][0]) / 1e3)
    return errs


def issue_leads(steps_ops, issues, anchors_ns, policy):
    """For each decided change: its pack's first op start − the decided issue time (µs; > 0: ahead)."""
    firsts = {}
    for i, p in enumerate(policy["packs"]):
        firsts[i] = p["first"]["index"]
    leads = []
    by_step = {k: ops for k, (_, ops) in enumerate(steps_ops)}
    for rec, t_ns in zip(issues["records"], issues["at_ns"]):
        ops = by_step.get(rec["step"])
        if not ops:
            continue
        idx = firsts.get(rec["pack"])
        if idx is None or idx >= len(ops):
            continue
        leads.append((ops[idx][0] - t_ns) / 1e3)
    return leads


# ---- the workloads ----------------------------------------------------------------------------------

def transformer(torch, train):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4).cuda()
    x = torch.randn(16, 256, 512, device="cuda")
    if train:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.item()  # a sync, as real loops have
    else:
        model.eval()

        @torch.no_grad()
        def step():
            return model(x[:1, :32]).sum().item()
    return step


def measure(name, step, out_dir, steps, emo_mod, torch):
    import emo.torch as et
    res = {}
    cap = os.path.join(out_dir, name, "capture")
    for _ in range(5):
        step()
    with et.capture(cap, steps=2, wait=1, warmup=1) as p:
        for _ in range(4):
            step()
            p.step()
    trace = os.path.join(cap, "rank0.json.gz")
    pol = emo_mod.optimize([trace], device=profile_name(torch), max_slowdown=0.05)
    pol.save(os.path.join(out_dir, name, "policy.json"))
    res["policy_packs"] = len(pol.document["packs"])
    res["predicted"] = pol.document.get("predicted")
    # The dry run, recorded.
    rt = emo_mod._emo.Runtime(pol.text, "policy.json", rank=0, clock="", gpu_anchor=True,
                              stream=torch.cuda.current_stream().cuda_stream, block_steps=4, log=False)
    handler = et.trace_handler(os.path.join(out_dir, name, "dry_run"))
    from torch.profiler import profile, schedule
    with profile(schedule=schedule(wait=0, warmup=0, active=steps, repeat=1), on_trace_ready=handler,
                 **et.profiler_kwargs()) as p:
        for _ in range(steps):
            rt.step_begin()
            step()
            rt.step_end()
            p.step()
    torch.cuda.synchronize()
    rep = rt.stop()
    ops = gpu_ops_by_step(handler.paths[0])
    anchors = [a["anchor_realtime_ns"] for a in rep["anchors"]]
    res["anchor_error_us"] = summary(anchor_errors(ops, anchors))
    res["issue_lead_us"] = summary(issue_leads(ops, {"records": rep["issues"], "at_ns": rep["issue_realtime_ns"]}, anchors,
                                               pol.document))
    res["decided_changes"] = rep["clock_changes"]
    res["step_time_us"] = summary([(b - a) / 1e3 for a, b in zip(anchors, anchors[1:])])
    return res


def profile_name(torch):
    """The built-in profile of this GPU, by product name (profiling then runs on its emulated twin: the
    real GPU's clocks are never touched)."""
    n = torch.cuda.get_device_name(0).lower()
    for p in ("h200", "h100", "a100", "v100"):
        if p in n:
            return p
    return "h100"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu_dry_run_out"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--skip-infer", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "read_only": True}
    try:
        import torch
    except ImportError:
        print("gpu_dry_run: no torch", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_dry_run: no CUDA device: nothing to measure", file=sys.stderr)
        return 2
    result["torch"] = torch.__version__
    result["gpu"] = torch.cuda.get_device_name(0)
    result["nvml"] = nvml_readonly(0)
    try:
        import emo
        result["emo"] = emo.__version__
    except ImportError as e:
        emo = None
        result["emo"] = f"not importable ({e}): only NVML was measured"
    if emo is not None:
        for name, train, skip in (("train", True, a.skip_train), ("infer", False, a.skip_infer)):
            if skip:
                continue
            try:
                result[name] = measure(name, transformer(torch, train), a.out, a.steps, emo, torch)
            except Exception as e:  # keep what the other workload measured
                result[name] = {"error": f"{type(e).__name__}: {e}"}
    path = os.path.join(a.out, "gpu_dry_run.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2)[:4000])
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
