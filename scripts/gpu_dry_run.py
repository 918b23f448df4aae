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

class Nvml:
    """The few NVML queries this script makes, all read-only (no clock, limit or mode is ever set)."""

    def __init__(self, index=0):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit_v2 failed")
        self.h = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.h)) != 0:
            self.lib.nvmlShutdown()
            raise OSError(f"no GPU {index}")

    def close(self):
        self.lib.nvmlShutdown()

    def name(self):
        b = ctypes.create_string_buffer(96)
        self.lib.nvmlDeviceGetName(self.h, b, 96)
        return b.value.decode()

    def energy_mj(self):
        """The board's energy counter (mJ since the driver loaded), or None."""
        e = ctypes.c_ulonglong(0)
        return e.value if self.lib.nvmlDeviceGetTotalEnergyConsumption(self.h, ctypes.byref(e)) == 0 else None

    def power_w(self):
        p = ctypes.c_uint(0)
        return p.value / 1e3 if self.lib.nvmlDeviceGetPowerUsage(self.h, ctypes.byref(p)) == 0 else None

    def clock_mhz(self, kind=1):  # NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2
        c = ctypes.c_uint(0)
        return c.value if self.lib.nvmlDeviceGetClockInfo(self.h, kind, ctypes.byref(c)) == 0 else None

    def clocks_event_reasons(self):
        r = ctypes.c_ulonglong(0)
        return r.value if self.lib.nvmlDeviceGetCurrentClocksEventReasons(self.h, ctypes.byref(r)) == 0 else None

    def supported_clocks(self):
        out = {}
        n = ctypes.c_uint(64)
        mem = (ctypes.c_uint * 64)()
        if self.lib.nvmlDeviceGetSupportedMemoryClocks(self.h, ctypes.byref(n), mem) == 0 and n.value:
            sm = (ctypes.c_uint * 512)()
            n2 = ctypes.c_uint(512)
            if self.lib.nvmlDeviceGetSupportedGraphicsClocks(self.h, mem[0], ctypes.byref(n2), sm) == 0:
                out["supported_sm_clocks_mhz"] = sorted({sm[i] for i in range(n2.value)})
            out["memory_clock_mhz"] = mem[0]
        lim = ctypes.c_uint(0)
        if self.lib.nvmlDeviceGetPowerManagementLimit(self.h, ctypes.byref(lim)) == 0:
            out["power_limit_w"] = lim.value / 1e3
        app = ctypes.c_uint(0)
        if self.lib.nvmlDeviceGetDefaultApplicationsClock(self.h, 1, ctypes.byref(app)) == 0:
            out["default_application_sm_clock_mhz"] = app.value
        return out


def nvml_readonly(index=0, reads=200):
    try:
        nv = Nvml(index)
    except OSError as e:
        return {"error": f"NVML: {e}"}
    try:
        out = {"name": nv.name()}
        out.update(nv.supported_clocks())
        cost, values, times = [], [], []
        for _ in range(reads):
            t0 = time.perf_counter_ns()
            v = nv.energy_mj()
            t1 = time.perf_counter_ns()
            if v is None:
                out["energy_error"] = "nvmlDeviceGetTotalEnergyConsumption failed"
                break
            cost.append((t1 - t0) / 1e3)
            values.append(v)
            times.append(t1)
            time.sleep(0.002)
        out["energy_read_us"] = summary(cost)
        changes = [times[i] for i in range(1, len(values)) if values[i] != values[i - 1]]
        out["counter_update_ms"] = summary([(b - a) / 1e6 for a, b in zip(changes, changes[1:])])
        out["sm_clock_now_mhz"] = nv.clock_mhz(1)
        out["idle_power_w"] = nv.power_w()
    finally:
        nv.close()
    return out


# ---- busy power per kind of kernel, at the GPU's own clocks --------------------------------------

def kind_power(torch, seconds=2.0, warm=0.4):
    """Mean board power (the energy counter's difference over the window) while the GPU runs one kind of
    kernel back to back at whatever clock it picks itself: idle, bf16 and fp32 matrix products
    (compute-bound), an elementwise op, a copy and a reduction over 1 GiB (memory-bound), and a tiny
    kernel (launch-bound). The SM clock and the clock-event reasons are read in the middle of each window.
    Nothing is set: this is what a power model's per-kind activity should reproduce at the default clock."""
    try:
        nv = Nvml(torch.cuda.current_device())
    except OSError as e:
        return {"error": f"NVML: {e}"}
    dev = "cuda"
    n = 1 << 28  # 256 Mi floats: 1 GiB
    a16 = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b16 = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    a32 = torch.randn(4096, 4096, device=dev)
    b32 = torch.randn(4096, 4096, device=dev)
    x = torch.randn(n, device=dev)
    y = torch.empty_like(x)
    tiny = torch.ones(256, device=dev)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 on the FMA units, not the tensor cores
    kinds = {
        "idle": (None, 0, 0),
        "gemm_bf16_8192": (lambda: torch.mm(a16, b16), 2 * 8192 ** 3, 3 * 8192 * 8192 * 2),
        "gemm_fp32_4096": (lambda: torch.mm(a32, b32), 2 * 4096 ** 3, 3 * 4096 * 4096 * 4),
        "elementwise_mul_add_1GiB": (lambda: torch.add(x, x, alpha=0.5, out=y), n, 3 * 4 * n),
        "copy_1GiB": (lambda: y.copy_(x), 0, 2 * 4 * n),
        "sum_1GiB": (lambda: x.sum(), n, 4 * n),
        "tiny_add_256": (lambda: tiny.add_(1.0), 256, 3 * 4 * 256),
    }
    out = {}
    try:
        for name, (fn, flops, nbytes) in kinds.items():
            ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t_end = time.perf_counter() + warm
            while fn is not None and time.perf_counter() < t_end:
                for _ in range(8):
                    fn()
                torch.cuda.synchronize()
            if fn is None:
                time.sleep(warm)
            e0, t0 = nv.energy_mj(), time.perf_counter()
            ev0.record()
            iters, clocks, reasons = 0, [], []
            mid = t0 + seconds / 2
            while time.perf_counter() - t0 < seconds:
                if fn is None:
                    time.sleep(0.05)
                else:
                    for _ in range(8):
                        fn()
                    iters += 8
                    torch.cuda.synchronize()
                if not clocks and time.perf_counter() >= mid:
                    clocks.append(nv.clock_mhz(1))
                    reasons.append(nv.clocks_event_reasons())
            ev1.record()
            torch.cuda.synchronize()
            e1, t1 = nv.energy_mj(), time.perf_counter()
            gpu_ms = ev0.elapsed_time(ev1)
            r = {"seconds": t1 - t0, "iterations": iters, "sm_clock_mhz": clocks[0] if clocks else None,
                 "clocks_event_reasons": reasons[0] if reasons else None, "memory_clock_mhz": nv.clock_mhz(2)}
            if e0 is not None and e1 is not None:
                r["mean_power_w"] = (e1 - e0) / 1e3 / (t1 - t0)
            if iters:
                per = gpu_ms / 1e3 / iters
                r["us_per_kernel"] = per * 1e6
                if flops:
                    r["tflops"] = flops / per / 1e12
                if nbytes:
                    r["gb_per_s"] = nbytes / per / 1e9
            out[name] = r
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        nv.close()
        del a16, b16, a32, b32, x, y
        torch.cuda.empty_cache()
    return out


# ---- the trace: each step's first GPU op and each pack's first op ---------------------------------

def kineto_ns(doc):
    """A function from an event's "ts" (µs) to ns on the realtime clock: newer Kineto writes ts relative
    to baseTimeNanoseconds, older writes it since the epoch."""
    base = int(doc.get("baseTimeNanoseconds", 0))
    first = next((e["ts"] for e in doc["traceEvents"] if "ts" in e), 0)
    if base and float(first) < 1e14:
        return lambda ts: base + int(round(float(ts) * 1000))
    return lambda ts: int(round(float(ts) * 1000))


def gpu_ops_by_step(trace_path):
    """[(step number, [(start_ns_abs, name, stream), ...] sorted)] from a Kineto trace on its realtime clock."""
    opener = gzip.open if trace_path.endswith(".gz") else open
    with opener(trace_path, "rt") as f:
        doc = json.load(f)
    ns = kineto_ns(doc)
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    # The host's step annotations (newer Kineto repeats each on the GPU's timeline as gpu_user_annotation).
    steps = sorted((e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")
                    and e.get("cat") != "gpu_user_annotation"), key=lambda e: e["ts"])
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
                ops.append((ns(k["ts"]), k["name"], k.get("args", {}).get("stream", -1)))
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


def find_op(ops, ref):
    """The op a policy's {"index", "stream", "name", "occurrence"} names in a step's ops (sorted by start):
    by stream, name and occurrence when the reference has them, else by index."""
    if "name" in ref and "occurrence" in ref:
        seen = 0
        for op in ops:
            if op[1] == ref["name"] and ("stream" not in ref or op[2] == ref["stream"]):
                if seen == ref["occurrence"]:
                    return op
                seen += 1
        return None
    i = ref.get("index")
    return ops[i] if i is not None and i < len(ops) else None


def issue_leads(steps_ops, issues, anchors_ns, policy):
    """For each decided change: its pack's first op start − the decided issue time (µs; > 0: ahead).
    A record's step is the runtime's step count from 0, the profiled steps' order."""
    firsts = {i: p["first"] for i, p in enumerate(policy["packs"])}
    leads = []
    by_step = {k: ops for k, (_, ops) in enumerate(steps_ops)}
    for rec, t_ns in zip(issues["records"], issues["at_ns"]):
        ops = by_step.get(rec["step"])
        ref = firsts.get(rec["pack"])
        if not ops or ref is None:
            continue
        op = find_op(ops, ref)
        if op is not None:
            leads.append((op[0] - t_ns) / 1e3)
    return leads


# ---- the workloads ----------------------------------------------------------------------------------

def transformer(torch, train, dev="cuda", small=False):
    """A 4-layer transformer encoder: a training step (AdamW, a loss.item() sync as real loops have) or a
    one-sequence inference step of 32 tokens (sub-millisecond on a large GPU: a decode-like step)."""
    torch.manual_seed(0)
    d, ff, seq, batch = (64, 128, 32, 4) if small else (512, 2048, 256, 16)
    layer = torch.nn.TransformerEncoderLayer(d_model=d, nhead=8, dim_feedforward=ff, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4).to(dev)
    x = torch.randn(batch, seq, d, device=dev)
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


def measure(name, step, out_dir, steps, emo_mod, torch, cuda=True):
    """Capture, solve, and run the dry run under torch.profiler (see the module's text)."""
    import emo.torch as et
    res = {}
    cap = os.path.join(out_dir, name, "capture")
    for _ in range(5):
        step()
    t0 = time.perf_counter()
    with et.capture(cap, steps=2, wait=3, warmup=1) as p:
        for _ in range(6):
            step()
            p.step()
    res["capture_s"] = time.perf_counter() - t0
    trace = os.path.join(cap, "rank0.json.gz")
    with gzip.open(trace, "rt") as f:
        res["untraced_step_us"] = json.load(f).get("emo_untraced_step_us")
    a = emo_mod.analyze([trace], cpu_ops_as_kernels=not cuda)
    res["traced_step_us"] = a.measured_span_us
    res["warnings"] = a.warnings
    t0 = time.perf_counter()
    pol = emo_mod.optimize([trace], device=profile_name(torch), max_slowdown=0.05, cpu_ops_as_kernels=not cuda)
    res["optimize_s"] = time.perf_counter() - t0
    pol.save(os.path.join(out_dir, name, "policy.json"))
    res["policy_packs"] = len(pol.document["packs"])
    res["policy_clocks_mhz"] = sorted({p["clock_mhz"] for p in pol.document["packs"]})
    res["predicted"] = pol.document.get("predicted")
    # The dry run, recorded.
    stream = torch.cuda.current_stream().cuda_stream if cuda else 0
    # A dry run (clock ""): every change decided, none made; the energy counter (read only) beside it.
    rt = emo_mod._emo.Runtime(pol.text, "policy.json", rank=0, clock="", meter=0 if cuda else -1, gpu_anchor=cuda,
                              stream=stream, block_steps=4, log=False)
    handler = et.trace_handler(os.path.join(out_dir, name, "dry_run"))
    from torch.profiler import profile, schedule
    t0 = time.perf_counter()
    with profile(schedule=schedule(wait=0, warmup=0, active=steps, repeat=1), on_trace_ready=handler,
                 **et.profiler_kwargs()) as p:
        for _ in range(steps):
            rt.step_begin()
            step()
            rt.step_end()
            p.step()
    if cuda:
        torch.cuda.synchronize()
    rep = rt.stop()
    res["dry_run_s"] = time.perf_counter() - t0
    with open(os.path.join(out_dir, name, "runtime_report.json"), "w") as f:
        json.dump(rep, f, indent=1, default=str)
    ops = gpu_ops_by_step(handler.paths[0])
    anchors = [a["anchor_realtime_ns"] for a in rep["anchors"]]
    res["anchors"] = len(anchors)
    res["profiled_steps"] = len(ops)
    errs = anchor_errors(ops, anchors)
    res["anchor_error_us"] = summary(errs)
    res["anchor_abs_error_us"] = summary([abs(e) for e in errs])  # its p99 is the goal's (< 1 ms)
    res["issue_lead_us"] = summary(issue_leads(ops, {"records": rep["issues"], "at_ns": rep["issue_realtime_ns"]},
                                               anchors, pol.document))
    res["issue_late_us"] = summary([r["late_us"] for r in rep["issues"]])
    res["decided_changes"] = rep["clock_changes"]
    res["runtime_errors"] = rep["errors"]
    res["step_time_us"] = summary([(b - a) / 1e3 for a, b in zip(anchors, anchors[1:])])
    return res


def optimizer_in_loop(torch, out_dir, cuda=True, seconds=120.0):
    """emo.torch.EnergyOptimizer in a plain training loop on this machine's device, the GPU side emulated
    (device emulated:<this GPU's profile>): real traces of the real loop, captured and solved in the loop,
    the policy measured on the emulated twin. Nothing is set on the real GPU."""
    import emo.torch as et
    step = transformer(torch, True, "cuda" if cuda else "cpu", small=not cuda)
    opt = et.EnergyOptimizer(max_slowdown=0.05, device=f"emulated:{profile_name(torch)}",
                             work_dir=os.path.join(out_dir, "optimizer"), cpu_ops_as_kernels=None if cuda else True)
    t0 = time.perf_counter()
    n = 0
    while opt.phase not in ("done", "failed") and time.perf_counter() - t0 < seconds:
        opt.on_step_begin()
        step()
        opt.on_step_end()
        n += 1
    rep = opt.close()
    keep = ("phase", "device", "bound", "replans", "saving_pct", "slowdown_pct", "saving_ci_pct", "fallbacks", "history")
    out = {k: rep.get(k) for k in keep}
    out["loop_steps"] = n
    out["seconds"] = time.perf_counter() - t0
    return out


def profile_name(torch):
    """The built-in profile of this GPU, by product name (profiling then runs on its emulated twin: the
    real GPU's clocks are never touched)."""
    if not torch.cuda.is_available():
        return "h100"
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
    ap.add_argument("--skip-power", action="store_true", help="skip the busy power per kind of kernel")
    ap.add_argument("--skip-optimizer", action="store_true", help="skip EnergyOptimizer in the loop")
    ap.add_argument("--rehearse", action="store_true",
                    help="without a GPU: run every stage that can on the CPU with a small model (the code paths, "
                         "not the figures), to check the script before a GPU's time is spent on it")
    ap.add_argument("--job", type=int, default=0, metavar="N",
                    help="only run N training steps of the transformer, no profiler, nothing measured: a job for "
                         "the CUPTI injection (CUDA_INJECTION64_PATH=libemo_inject.so EMO_CLOCK=dry-run "
                         "EMO_POLICY=OUT/train/policy.json) to find the steps of and decide the changes for")
    a = ap.parse_args()
    if a.job:
        import torch
        step = transformer(torch, True, "cuda" if torch.cuda.is_available() else "cpu",
                           small=not torch.cuda.is_available())
        t0 = time.perf_counter()
        times = []
        for _ in range(a.job):
            s0 = time.perf_counter()
            step()  # ends in a sync: the wall time is the step's
            times.append(1e3 * (time.perf_counter() - s0))
        late = sorted(times[len(times) // 5:])  # the first fifth is warm-up
        print(f"gpu_dry_run: job: {a.job} steps in {time.perf_counter() - t0:.2f} s; step median "
              f"{late[len(late) // 2]:.3f} ms over the last {len(late)}", file=sys.stderr)
        return 0
    os.makedirs(a.out, exist_ok=True)
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "read_only": True}
    try:
        import torch
    except ImportError:
        print("gpu_dry_run: no torch", file=sys.stderr)
        return 2
    cuda = torch.cuda.is_available()
    if not cuda and not a.rehearse:
        print("gpu_dry_run: no CUDA device: nothing to measure (--rehearse runs the code paths on the CPU)",
              file=sys.stderr)
        return 2
    result["torch"] = torch.__version__
    result["gpu"] = torch.cuda.get_device_name(0) if cuda else None
    if cuda:
        result["nvml"] = nvml_readonly(0)
    try:
        import emo
        result["emo"] = emo.__version__
    except ImportError as e:
        emo = None
        result["emo"] = f"not importable ({e}): only NVML was measured"

    def stage(key, fn):
        t0 = time.perf_counter()
        try:
            result[key] = fn()
        except Exception as e:  # keep what the other stages measured
            import traceback
            result[key] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-2000:]}
        print(f"gpu_dry_run: {key}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)

    if cuda and not a.skip_power:
        stage("kind_power", lambda: kind_power(torch))
    if emo is not None:
        dev = "cuda" if cuda else "cpu"
        for name, train, skip in (("train", True, a.skip_train), ("infer", False, a.skip_infer)):
            if not skip:
                stage(name, lambda: measure(name, transformer(torch, train, dev, small=not cuda), a.out,
                                            a.steps, emo, torch, cuda))
        if not a.skip_optimizer:
            stage("optimizer", lambda: optimizer_in_loop(torch, a.out, cuda))
    path = os.path.join(a.out, "gpu_dry_run.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2, default=str)
    print(json.dumps(result, indent=2, default=str)[:6000])
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
