#!/usr/bin/env python3
"""Writes the golden test inputs in tests/golden/inputs/ (Python 3 standard library only).

    python3 tests/golden/make_inputs.py --emo build/tools/emo/emo

Hand-made traces are built here by a tiny event model (a CPU thread, in-order CUDA streams, CUDA
events, blocking syncs), so every timestamp is consistent with the dependencies the trace states and
`emo analyze` replays the step to within rounding. The synthetic ones are `emo synth` runs (the
commands are in SYNTH below), stored gzipped (the reader recognizes gzip by its magic bytes).

Rerunning this rewrites the inputs; the expected outputs then have to be regenerated as well
(`python3 scripts/golden.py --emo build/tools/emo/emo --regenerate`). Inputs rarely need rewriting:
they are stored so that the goldens do not move when `emo synth` changes.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "inputs")
REPO = os.path.dirname(os.path.dirname(HERE))

# name -> emo synth arguments (one stored .json.gz per rank).
SYNTH = {
    "synth_train_dp": ["train-dp", "--ranks", "2", "--layers", "1", "--steps", "1"],
    "synth_train_pp": ["train-pp", "--ranks", "2", "--layers", "1", "--microbatches", "2", "--steps", "1"],
    "synth_train_tp": ["train-tp", "--ranks", "2", "--layers", "1", "--steps", "1"],
    "synth_infer_decode": ["infer-decode", "--ranks", "1", "--layers", "1", "--decode-tokens", "5", "--steps", "1"],
    "synth_dataloader": ["dataloader", "--ranks", "1", "--layers", "1", "--steps", "1"],
}

# Copied as they are from tests/data/traces (steps of 0.1 ms: too short for `emo optimize`).
COPIED = {
    "tiny_legacy": "tests/data/traces/tiny_legacy.json",
    "tiny_modern": "tests/data/traces/tiny_modern.json",
}

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
GEMM2 = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn"
ELTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#1}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)"
LAYERNORM = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)"
REDUCE = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)"
ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float*, double, double, double, double, double, double, bool, float*, float*>"

CBID = {"cudaLaunchKernel": 211, "cudaGraphLaunch": 311, "cudaMemcpyAsync": 41, "cudaMemcpy": 31,
        "cudaMemsetAsync": 51, "cudaEventRecord": 135, "cudaStreamWaitEvent": 147,
        "cudaStreamSynchronize": 131, "cudaEventSynchronize": 137, "cudaDeviceSynchronize": 165}


def us(x):
    return round(x, 3)


class Trace:
    """One rank's Kineto trace, written in the modern (PyTorch 2.x) or the legacy (2021-era)
    spelling, with a model of the CPU thread and the streams that keeps every time consistent."""

    def __init__(self, spelling, sync_records, name):
        assert spelling in ("modern", "legacy")
        self.legacy = spelling == "legacy"
        self.sync_records = sync_records  # write cuda_sync records (modern Kineto only)
        self.name = name
        self.ev = []
        self.now = 1000.0  # CPU thread time, µs
        self.tid = 100
        self.free = {}  # stream -> time its last op ends
        self.corr = 0
        self.ext = 0
        self.stack = []  # open cpu ops: (name, start, ext)
        self.events = {}  # CUDA event name -> (stream, record corr, time)

    # ---- spelling ----
    def cat(self, what):
        modern = {"step": "user_annotation", "cpu": "cpu_op", "rt": "cuda_runtime", "kernel": "kernel",
                  "memcpy": "gpu_memcpy", "memset": "gpu_memset", "sync": "cuda_sync"}
        legacy = {"step": "Operator", "cpu": "Operator", "rt": "Runtime", "kernel": "Kernel",
                  "memcpy": "Memcpy", "memset": "Memset"}
        return (legacy if self.legacy else modern)[what]

    def cpu_tid(self):
        return str(self.tid) if self.legacy else self.tid

    def gpu_tid(self, stream):
        return f"stream {stream}" if self.legacy else stream

    def ext_key(self):
        return "external id" if self.legacy else "External id"

    def next_corr(self):
        self.corr += 1
        return self.corr

    def cur_ext(self):
        return self.stack[-1][2] if self.stack else 0

    # ---- CPU side ----
    def begin(self, name, pre=3.0, step=False):
        self.ext += 1
        self.stack.append((name, self.now, self.ext, step))
        self.now += pre

    def end(self, post=2.0):
        name, start, ext, step = self.stack.pop()
        self.now += post
        args = {"External id": ext}
        if self.legacy:
            args["Device"] = 100
        self.ev.append({"ph": "X", "cat": self.cat("step" if step else "cpu"), "name": name, "pid": 100,
                        "tid": self.cpu_tid(), "ts": us(start), "dur": us(self.now - start), "args": args})

    def cpu(self, us_):
        self.now += us_

    def runtime(self, name, t0, dur, corr):
        args = {"cbid": CBID.get(name, 0), "correlation": corr, self.ext_key(): self.cur_ext()}
        self.ev.append({"ph": "X", "cat": self.cat("rt"), "name": name, "pid": 100, "tid": self.cpu_tid(),
                        "ts": us(t0), "dur": us(dur), "args": args})

    def flow(self, corr, t_cpu, t_gpu, stream):
        cat, name = ("async", "launch") if self.legacy else ("ac2g", "ac2g")
        self.ev.append({"ph": "s", "id": corr, "pid": 100, "tid": self.tid, "ts": us(t_cpu), "cat": cat, "name": name})
        self.ev.append({"ph": "f", "id": corr, "pid": 0, "tid": self.gpu_tid(stream), "ts": us(t_gpu), "cat": cat,
                        "name": name, "bp": "e"})

    # ---- GPU side ----
    def gpu_op(self, kind, name, stream, start, dur, corr, extra=None):
        args = {self.ext_key(): self.cur_ext(), "device": 0, "context": 1, "stream": stream, "correlation": corr}
        if kind == "kernel":
            args.update({"queued": 0, "grid": [132, 1, 1], "block": [256, 1, 1]})
        if extra:
            args.update(extra)
        self.ev.append({"ph": "X", "cat": self.cat(kind), "name": name, "pid": 0, "tid": self.gpu_tid(stream),
                        "ts": us(start), "dur": us(dur), "args": args})

    def enqueue(self, stream, earliest, dur):
        start = max(earliest, self.free.get(stream, 0.0) + 1.0)
        self.free[stream] = start + dur
        return start

    def launch(self, kname, stream, dur, api_dur=5.0, lat=5.0):
        t0, corr = self.now, self.next_corr()
        start = self.enqueue(stream, t0 + lat, dur)
        self.runtime("cudaLaunchKernel", t0, api_dur, corr)
        self.gpu_op("kernel", kname, stream, start, dur, corr)
        self.flow(corr, t0, start, stream)
        self.now = t0 + api_dur

    def op(self, name, kname, stream, dur, pre=4.0, post=2.0):
        self.begin(name, pre)
        self.launch(kname, stream, dur)
        self.end(post)

    def memcpy_async(self, direction, stream, dur, nbytes):
        names = {"HtoD": "Memcpy HtoD (Pinned -> Device)", "DtoH": "Memcpy DtoH (Device -> Pinned)",
                 "DtoD": "Memcpy DtoD (Device -> Device)"}
        t0, corr = self.now, self.next_corr()
        start = self.enqueue(stream, t0 + 4.0, dur)
        self.runtime("cudaMemcpyAsync", t0, 6.0, corr)
        self.gpu_op("memcpy", names[direction], stream, start, dur, corr, {"bytes": nbytes})
        self.flow(corr, t0, start, stream)
        self.now = t0 + 6.0

    def memcpy_blocking_dtoh(self, stream, dur, nbytes):
        # cudaMemcpy (not Async): the call returns a few µs after its copy ends.
        t0, corr = self.now, self.next_corr()
        start = self.enqueue(stream, t0 + 4.0, dur)
        end = start + dur + 3.0
        self.runtime("cudaMemcpy", t0, end - t0, corr)
        self.gpu_op("memcpy", "Memcpy DtoH (Device -> Pageable)", stream, start, dur, corr, {"bytes": nbytes})
        self.flow(corr, t0, start, stream)
        self.now = end

    def memset(self, stream, dur, nbytes):
        t0, corr = self.now, self.next_corr()
        start = self.enqueue(stream, t0 + 4.0, dur)
        self.runtime("cudaMemsetAsync", t0, 5.0, corr)
        self.gpu_op("memset", "Memset (Device)", stream, start, dur, corr, {"bytes": nbytes})
        self.flow(corr, t0, start, stream)
        self.now = t0 + 5.0

    def graph_launch(self, kernels, api_dur=9.0, lat=6.0):
        """cudaGraphLaunch of `kernels` [(name, stream, dur)]: one correlation for all of them; in
        order on each stream, each stream's first one as soon as the launch reaches the GPU."""
        t0, corr = self.now, self.next_corr()
        self.runtime("cudaGraphLaunch", t0, api_dur, corr)
        first = True
        for kname, stream, dur in kernels:
            start = self.enqueue(stream, t0 + lat, dur)
            self.gpu_op("kernel", kname, stream, start, dur, corr)
            if first:
                self.flow(corr, t0, start, stream)
                first = False
        self.now = t0 + api_dur

    # ---- CUDA events and syncs ----
    def sync_record(self, kind, t0, end, corr, stream, wait_stream=None, wait_corr=None, event_id=None):
        if not self.sync_records:
            return
        sts = t0 + 0.6
        sdur = max(0.3, end - 0.3 - sts)
        args = {"External id": self.cur_ext(), "cuda_sync_kind": kind}
        if event_id is not None:
            args.update({"wait_on_stream": wait_stream, "wait_on_cuda_event_record_corr_id": wait_corr,
                         "wait_on_cuda_event_id": event_id})
        args.update({"stream": stream, "correlation": corr, "device": 0, "context": 1})
        gpu_tid = stream if stream >= 0 else 0
        self.ev.append({"ph": "X", "cat": "cuda_sync", "name": kind, "pid": 0, "tid": gpu_tid, "ts": us(sts),
                        "dur": us(sdur), "args": args})

    def record(self, event, stream, write_call=True):
        t0, corr = self.now, self.next_corr()
        self.events[event] = (stream, corr, max(self.free.get(stream, 0.0), t0 + 1.0))
        if write_call:  # some profilers drop cudaEventRecord calls
            self.runtime("cudaEventRecord", t0, 2.0, corr)
        self.now = t0 + 2.0

    def wait(self, event, stream):
        t0, corr = self.now, self.next_corr()
        ev_stream, ev_corr, ev_time = self.events[event]
        self.free[stream] = max(self.free.get(stream, 0.0), ev_time)
        self.runtime("cudaStreamWaitEvent", t0, 2.5, corr)
        self.sync_record("Stream Wait Event", t0, t0 + 2.5, corr, stream, ev_stream, ev_corr,
                         list(self.events).index(event) + 1)
        self.now = t0 + 2.5

    def stream_sync(self, stream, records=True):
        t0, corr = self.now, self.next_corr()
        end = max(t0 + 2.5, self.free.get(stream, 0.0) + 3.0)
        self.runtime("cudaStreamSynchronize", t0, end - t0, corr)
        if records:
            self.sync_record("Stream Sync", t0, end, corr, stream)
        self.now = end

    def event_sync(self, event):
        t0, corr = self.now, self.next_corr()
        ev_stream, ev_corr, ev_time = self.events[event]
        end = max(t0 + 2.5, ev_time + 3.0)
        self.runtime("cudaEventSynchronize", t0, end - t0, corr)
        self.sync_record("Event Sync", t0, end, corr, -1, ev_stream, ev_corr, list(self.events).index(event) + 1)
        self.now = end

    def device_sync(self):
        t0, corr = self.now, self.next_corr()
        end = max([t0 + 3.0] + [f + 3.0 for f in self.free.values()])
        self.runtime("cudaDeviceSynchronize", t0, end - t0, corr)
        self.sync_record("Context Sync", t0, end, corr, -1)
        self.now = end

    # ---- output ----
    def write(self, path, streams):
        meta = [{"name": "process_name", "ph": "M", "ts": 1000, "pid": 100, "tid": 0, "args": {"name": "python"}},
                {"name": "thread_name", "ph": "M", "ts": 1000, "pid": 100, "tid": self.cpu_tid(),
                 "args": {"name": f"thread {self.tid} (python)"}}]
        for s in streams:
            meta.append({"name": "thread_name", "ph": "M", "ts": 1000, "pid": 0, "tid": self.gpu_tid(s),
                         "args": {"name": f"stream {s} "}})
        span = {"ph": "X", "cat": "Trace", "ts": 990, "dur": us(self.now - 990 + 10),
                "pid": "Traces" if self.legacy else "Spans", "tid": "PyTorch Profiler",
                "name": "PyTorch Profiler (0)", "args": {"Op count": 0}}
        doc = {"schemaVersion": 1,
               "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045231616,
                                     "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
               "traceEvents": self.ev + meta + [span]}
        if not self.legacy:
            doc["traceName"] = os.path.basename(path)
        with open(path, "w") as f:
            f.write('{\n  "schemaVersion": 1,\n')
            f.write('  "deviceProperties": ' + json.dumps(doc["deviceProperties"]) + ",\n")
            f.write('  "traceEvents": [\n')
            f.write(",\n".join("    " + json.dumps(e) for e in doc["traceEvents"]))
            f.write("\n  ]")
            if "traceName" in doc:
                f.write(',\n  "traceName": ' + json.dumps(doc["traceName"]))
            f.write("\n}\n")


# ---- the hand-made steps ----

def mlp_steps(t):
    """Two ProfilerSteps of a small MLP training step on one stream; the second is analyzed.
    Syncs: cudaStreamSynchronize after the loss copy (a cuda_sync record in the modern spelling,
    found by name in the legacy one) and a cudaDeviceSynchronize at the end."""
    for n in (1, 2):
        t.begin(f"ProfilerStep#{n}", pre=6.0, step=True)
        t.begin("aten::to", 3.0)
        t.memcpy_async("HtoD", 7, 90.0, 4194304)
        t.end(2.0)
        t.begin("aten::zero_", 2.0)
        t.memset(7, 12.0, 1048576)
        t.end(1.0)
        for layer in range(3):
            t.op("aten::mm", GEMM, 7, 310.0 + 20 * layer)
            t.op("aten::gelu", ELTWISE, 7, 85.0)
        t.op("aten::sum", REDUCE, 7, 40.0)
        t.begin("aten::item", 3.0)
        t.memcpy_async("DtoH", 7, 4.0, 4)
        t.stream_sync(7)
        t.end(2.0)
        t.cpu(60.0)  # Python: logging the loss
        for layer in range(3):
            t.op("aten::mm", GEMM2, 7, 300.0 + 15 * layer)
            t.op("aten::mm", GEMM2, 7, 290.0)
            t.op("aten::gelu_backward", ELTWISE, 7, 95.0)
        t.op("Optimizer.step#Adam.step", ADAM, 7, 160.0, pre=20.0)
        t.device_sync()
        t.cpu(25.0)
        t.end(4.0)
        t.cpu(40.0)


def cross_stream_steps(t, inferred_wait):
    """A compute stream (7) and a side stream (13) that exchange work through CUDA events: 7 -> 13
    (the side stream waits for the projection), 13 -> 7 (the compute stream waits for the side
    branch), each pair more than once. With inferred_wait, the step starts with a
    cudaStreamWaitEvent whose cudaEventRecord the profiler dropped (the source is inferred)."""
    t.begin("ProfilerStep#5", pre=6.0, step=True)
    if inferred_wait:
        t.op("aten::mm", GEMM, 7, 420.0)
        t.begin("record_stream_wait", 2.0)
        t.record("e0", 7, write_call=False)
        t.wait("e0", 13)
        t.end(1.0)
        t.op("aten::add", ADD, 13, 60.0)
    for block in range(3):
        t.op("aten::layer_norm", LAYERNORM, 7, 45.0)
        t.op("aten::mm", GEMM, 7, 260.0)
        # Fork. Without cuda_sync records the recording stream is that of the op launched last
        # before cudaEventRecord, and the waiting one that of the op launched next after the wait.
        t.begin("fork", 2.0)
        t.record(f"f{block}", 7)
        t.wait(f"f{block}", 13)
        t.end(1.0)
        t.op("aten::mm", GEMM2, 13, 380.0)  # side branch: waits for the projection
        t.op("aten::gelu", ELTWISE, 13, 70.0)
        t.begin("record_join", 2.0)
        t.record(f"j{block}", 13)
        t.end(1.0)
        t.op("aten::softmax", SOFTMAX, 7, 55.0)  # runs alongside the branch
        t.begin("join", 2.0)
        t.wait(f"j{block}", 7)
        t.end(1.0)
        t.op("aten::add", ADD, 7, 35.0)  # waits for the branch
    t.op("aten::sum", REDUCE, 7, 30.0)
    t.stream_sync(7, records=t.sync_records)
    t.cpu(20.0)
    t.end(3.0)


def gpu_cpu_sync_steps(t):
    """Every way the CPU waits for the GPU: cudaEventSynchronize (Event Sync on the recording
    stream), cudaDeviceSynchronize (Context Sync, waits for both streams), cudaStreamSynchronize
    (Stream Sync), a blocking cudaMemcpy DtoH, and a cudaStreamSynchronize without its cuda_sync
    record (matched by the call's name). Between them the CPU does work that depends on the result."""
    t.begin("ProfilerStep#2", pre=6.0, step=True)
    t.begin("aten::to", 3.0)
    t.memcpy_async("HtoD", 7, 120.0, 5242880)
    t.end(2.0)
    t.op("aten::mm", GEMM, 7, 480.0)
    t.op("aten::gelu", ELTWISE, 7, 90.0)
    t.begin("aten::_local_scalar_dense", 2.0)
    t.record("done", 7)
    t.event_sync("done")
    t.end(2.0)
    t.cpu(150.0)  # CPU work on the result
    t.op("aten::mm", GEMM, 7, 360.0)
    t.op("aten::mm", GEMM2, 13, 520.0)
    t.op("aten::add", ADD, 13, 40.0)
    t.begin("torch.cuda.synchronize", 2.0)
    t.device_sync()
    t.end(2.0)
    t.cpu(120.0)
    t.op("aten::softmax", SOFTMAX, 7, 210.0)
    t.op("aten::mm", GEMM, 7, 400.0)
    t.begin("aten::item", 2.0)
    t.stream_sync(7)
    t.end(2.0)
    t.cpu(90.0)
    t.op("aten::layer_norm", LAYERNORM, 7, 140.0)
    t.op("aten::sum", REDUCE, 7, 60.0)
    t.begin("aten::copy_", 3.0)
    t.memcpy_blocking_dtoh(7, 25.0, 1048576)
    t.end(2.0)
    t.cpu(80.0)
    t.op("aten::mm", GEMM2, 7, 330.0)
    t.begin("aten::item", 2.0)
    t.stream_sync(7, records=False)
    t.end(2.0)
    t.cpu(30.0)
    t.end(3.0)


def cuda_graph_steps(t):
    """A decode-like step replayed from CUDA graphs: two cudaGraphLaunch calls, each covering
    several kernels under one correlation (the second on two streams), eager kernels around them,
    and a cudaStreamSynchronize at the end."""
    t.begin("ProfilerStep#3", pre=6.0, step=True)
    t.op("aten::embedding", ADD, 7, 30.0)
    for g in range(2):
        t.begin("CUDAGraph::replay", 8.0)
        if g == 0:
            kernels = [(LAYERNORM, 7, 40.0), (GEMM, 7, 420.0), (SOFTMAX, 7, 75.0), (GEMM2, 7, 390.0),
                       (ELTWISE, 7, 60.0), (GEMM, 7, 450.0)]
        else:
            kernels = [(LAYERNORM, 7, 42.0), (GEMM, 7, 410.0), (ADD, 7, 35.0), (GEMM2, 7, 380.0),
                       (GEMM2, 13, 300.0), (ELTWISE, 13, 55.0)]
        t.graph_launch(kernels)
        t.end(3.0)
        t.cpu(40.0)
    t.op("aten::argmax", REDUCE, 7, 25.0)
    t.begin("aten::item", 2.0)
    t.memcpy_async("DtoH", 7, 3.0, 8)
    t.stream_sync(7)
    t.end(2.0)
    t.cpu(35.0)
    t.end(3.0)


def long_phases_steps(t):
    """A step long enough (~120 ms) for several packs per GPU (a pack lasts at least one clock
    switch, ~25 ms on the H100): compute-bound GEMM phases, a memory-bound phase, and a CPU stall
    (the host waits on the GPU, then prepares the next batch) that gives the GPU idle time. The
    two GEMM phases repeat one structure, so they share a signature."""
    t.begin("ProfilerStep#7", pre=6.0, step=True)
    for phase in range(2):
        t.begin(f"forward_{phase}", 3.0)
        for i in range(8):
            t.op("aten::mm", GEMM, 7, 3100.0 + 50 * (i % 3))
            t.op("aten::gelu", ELTWISE, 7, 400.0)
        t.end(2.0)
        t.begin(f"update_{phase}", 3.0)
        for i in range(6):
            t.op("aten::add_", ADD, 7, 2200.0)
            t.op("aten::layer_norm", LAYERNORM, 7, 900.0)
        t.end(2.0)
        t.begin("aten::item", 2.0)
        t.stream_sync(7)
        t.end(2.0)
        t.begin("next_batch", 10.0)
        t.cpu(14000.0)  # host-side input preparation: the GPU idles
        t.memcpy_async("HtoD", 7, 800.0, 36000000)
        t.end(5.0)
    t.op("Optimizer.step#Adam.step", ADAM, 7, 1500.0, pre=20.0)
    t.stream_sync(7)
    t.cpu(20.0)
    t.end(3.0)


HANDMADE = {
    # name -> (spelling, cuda_sync records, step builder, streams)
    "legacy_mlp": ("legacy", False, mlp_steps, [7]),
    "modern_mlp": ("modern", True, mlp_steps, [7]),
    "cross_stream_sync_records": ("modern", True, lambda t: cross_stream_steps(t, False), [7, 13]),
    "cross_stream_runtime_pairs": ("legacy", False, lambda t: cross_stream_steps(t, True), [7, 13]),
    "gpu_cpu_syncs": ("modern", True, gpu_cpu_sync_steps, [7, 13]),
    "cuda_graph": ("modern", True, cuda_graph_steps, [7, 13]),
    "long_phases": ("modern", True, long_phases_steps, [7]),
}


def write_handmade(name):
    spelling, records, build, streams = HANDMADE[name]
    d = os.path.join(INPUTS, name)
    os.makedirs(d, exist_ok=True)
    t = Trace(spelling, records, name)
    build(t)
    t.write(os.path.join(d, f"{name}.json"), streams)


def write_synth(name, emo):
    d = os.path.join(INPUTS, name)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([emo, "synth", *SYNTH[name], "-o", tmp], check=True, stdout=subprocess.DEVNULL)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        for f in sorted(os.listdir(tmp)):
            if not f.endswith(".json"):
                continue
            with open(os.path.join(tmp, f), "rb") as src:
                data = src.read()
            # mtime=0 and no file name: the same trace gives the same bytes.
            with open(os.path.join(d, f + ".gz"), "wb") as out:
                out.write(gzip.compress(data, compresslevel=9, mtime=0))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emo", help="the emo binary (needed for the synthetic inputs)")
    ap.add_argument("only", nargs="*", help="inputs to write (default: all)")
    a = ap.parse_args()
    names = a.only or [*HANDMADE, *SYNTH, *COPIED]
    for name in names:
        if name in HANDMADE:
            write_handmade(name)
        elif name in SYNTH:
            if not a.emo:
                sys.exit(f"{name}: --emo is needed to run emo synth")
            write_synth(name, a.emo)
        elif name in COPIED:
            d = os.path.join(INPUTS, name)
            os.makedirs(d, exist_ok=True)
            shutil.copyfile(os.path.join(REPO, COPIED[name]), os.path.join(d, os.path.basename(COPIED[name])))
        else:
            sys.exit(f"unknown input {name}")
        print(f"wrote {os.path.relpath(os.path.join(INPUTS, name), REPO)}")


if __name__ == "__main__":
    main()
