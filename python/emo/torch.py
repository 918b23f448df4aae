"""EMO inside a PyTorch job: traces recorded the way EMO reads them, and an energy optimizer in the loop.

    import emo.torch
    opt = emo.torch.EnergyOptimizer(max_slowdown=0.05, device="nvml:auto")   # or "emulated:h100"
    for batch in loader:
        opt.on_step_begin()
        train_step(batch)
        opt.on_step_end()
    print(opt.report())          # {"saving_pct": ..., "slowdown_pct": ..., "phase": ..., ...}

The optimizer runs warm-up -> capture (torch.profiler, a few steps) -> solve on a background thread
(emo.optimize over the captured trace) -> apply -> verify, and re-plans with a tighter target when the
measured slowdown runs over the bound. On a GPU (`nvml:N`) the policy is applied by the runtime inside
this process (emo._emo.Runtime: the step anchored on the job's CUDA stream, changes issued by its
controller thread through NVML, or through the node's `emo clockd` with clockd="SOCKET"); on an
emulated GPU (`emulated:NAME`) the captured step is run by `emo apply` on that GPU instead, so the
whole loop can be tried without one (a CPU-only run's operators stand in for the kernels,
emo.trace's `cpu_ops_as_kernels`). Every decision is the C++ library's; this module only sequences it.
Adapters: `HuggingFaceCallback(opt)` (a transformers TrainerCallback) and `LightningCallback(opt)`.
"""

from __future__ import annotations

import os
import tempfile
import threading
import warnings
from typing import Any, Dict, List, Optional

from . import _emo
from ._api import Policy, apply as _apply, deprofile as _deprofile, optimize as _optimize

__all__ = ["capture", "trace_handler", "profiler_kwargs", "EnergyOptimizer", "HuggingFaceCallback",
           "LightningCallback"]


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - the message is the point
        raise ImportError("emo.torch needs PyTorch: pip install torch") from e
    return torch


def _rank_world() -> tuple:
    torch = _torch()
    d = torch.distributed
    if d.is_available() and d.is_initialized():
        return d.get_rank(), d.get_world_size()
    return int(os.environ.get("EMO_PROFILE_RANK", os.environ.get("RANK", "0"))), int(os.environ.get("WORLD_SIZE", "1"))


def profiler_kwargs() -> Dict[str, Any]:
    """What EMO needs of a torch.profiler.profile, to merge into one's own: CPU and CUDA activities and,
    where the installed torch has it, enable_cuda_sync_events (the GPU-side record of every sync)."""
    torch = _torch()
    from torch.profiler import ProfilerActivity

    kw: Dict[str, Any] = {"activities": [ProfilerActivity.CPU]}
    if torch.cuda.is_available():
        kw["activities"].append(ProfilerActivity.CUDA)
        try:
            from torch._C._profiler import _ExperimentalConfig

            kw["experimental_config"] = _ExperimentalConfig(enable_cuda_sync_events=True)
        except (ImportError, TypeError):  # an older torch: syncs are then inferred from the CPU side
            pass
    return kw


def trace_handler(out_dir: Optional[str] = None, gzip: bool = True):
    """An on_trace_ready for one's own torch.profiler schedule: writes OUT_DIR/rank<R>.json[.gz] (the rank
    from torch.distributed, else $EMO_PROFILE_RANK / $RANK, else 0), one file per rank as EMO reads them.
    OUT_DIR defaults to $EMO_PROFILE_DIR (set by `emo profile --command`), else the current folder."""
    out = out_dir or os.environ.get("EMO_PROFILE_DIR") or "."
    os.makedirs(out, exist_ok=True)

    def ready(prof) -> None:
        rank, _ = _rank_world()
        path = os.path.join(out, f"rank{rank}.json" + (".gz" if gzip else ""))
        tmp = path + ".part" + (".json.gz" if gzip else ".json")
        prof.export_chrome_trace(tmp)
        os.replace(tmp, path)
        ready.paths.append(path)

    ready.paths = []  # type: ignore[attr-defined]
    return ready


class _StepClock:
    """The period of a job's steps without the profiler: a mark at each step boundary (a CUDA event on
    the current stream when there is a GPU, so that an asynchronous loop is timed on the GPU's side;
    else the wall clock), read once when the profiler starts recording."""

    UNTRACED_KEY = "emo_untraced_step_us"

    def __init__(self) -> None:
        torch = _torch()
        self._cuda = torch.cuda.is_available()
        self._marks: List[Any] = []

    def mark(self) -> None:
        if self._cuda:
            torch = _torch()
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self._marks.append(ev)
        else:
            import time

            self._marks.append(time.perf_counter())

    def periods_us(self) -> List[float]:
        if len(self._marks) < 2:
            return []
        if self._cuda:
            self._marks[-1].synchronize()
            return [1000.0 * a.elapsed_time(b) for a, b in zip(self._marks, self._marks[1:])]
        return [1e6 * (b - a) for a, b in zip(self._marks, self._marks[1:])]

    def write_into(self, prof) -> None:
        """Adds the periods to the trace `prof` is recording (a top-level key of the exported file, read
        by EMO, which warns when the recorded step is slower than these: docs/replay.md)."""
        import json

        p = [round(x, 3) for x in self.periods_us() if x > 0]
        if p and hasattr(prof, "add_metadata_json"):
            prof.add_metadata_json(self.UNTRACED_KEY, json.dumps(p))


def capture(out_dir: Optional[str] = None, steps: int = 2, wait: int = 3, warmup: int = 1, gzip: bool = True):
    """A torch.profiler.profile that records `steps` steps after `wait` + `warmup` others and writes them
    with trace_handler(out_dir). Use it as torch's own: `with emo.torch.capture(d) as p: ... p.step()`.
    The `wait` steps run without the profiler and are timed: their periods go into the trace
    (`emo_untraced_step_us`), so that EMO can say when the profiler slowed the recorded step."""
    from torch.profiler import ProfilerAction, profile, schedule

    if steps < 1 or wait < 0 or warmup < 0:
        raise ValueError("capture: steps must be 1 or more, wait and warmup 0 or more")

    class _Capture(profile):
        def start(self):
            self._emo_clock = _StepClock()
            self._emo_sent = False
            super().start()
            if self.current_action == ProfilerAction.NONE:
                self._emo_clock.mark()

        def step(self):
            if self.current_action == ProfilerAction.NONE:
                self._emo_clock.mark()  # the end of an untraced step
            super().step()
            recording = self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
            if recording and not self._emo_sent:
                self._emo_sent = True
                self._emo_clock.write_into(self)

    return _Capture(schedule=schedule(wait=wait, warmup=warmup, active=steps, repeat=1),
                    on_trace_ready=trace_handler(out_dir, gzip), **profiler_kwargs())


class EnergyOptimizer:
    """Lowers the GPU's energy within `max_slowdown` from inside the training or inference loop.

    Call on_step_begin() / on_step_end() around every step (Zeus's hook names). Phases, in `.phase`:
    warmup -> capture -> solve (background thread) -> apply -> done (emulated) or running (a GPU).
    """

    def __init__(self, max_slowdown: float = 0.05, device: str = "nvml:auto", *, warmup_steps: int = 3,
                 capture_steps: int = 2, work_dir: Optional[str] = None, verify: bool = False,
                 apply_steps: int = 0, clockd: Optional[str] = None, replans: int = 1,
                 cpu_ops_as_kernels: Optional[bool] = None, solve_wait_steps: int = 5,
                 block_steps: int = 0, progress=None) -> None:
        if not (0 < max_slowdown < 1):
            raise ValueError(f"max_slowdown must be between 0 and 1, got {max_slowdown}")
        if warmup_steps < 0 or capture_steps < 1:
            raise ValueError("warmup_steps must be 0 or more and capture_steps 1 or more")
        self.max_slowdown = max_slowdown
        self.device = device
        self.emulated = device.startswith("emulated:")
        if not self.emulated and not device.startswith("nvml:"):
            raise ValueError(f"device must be 'nvml:auto', 'nvml:N' or 'emulated:NAME[@SEED]', got {device!r}")
        self.warmup_steps = warmup_steps
        self.capture_steps = capture_steps
        self.verify = verify
        self.apply_steps = apply_steps
        self.clockd = clockd
        self.replans = replans
        self.solve_wait_steps = solve_wait_steps
        self.block_steps = block_steps
        self.progress = progress
        self._cpu_stand_in = cpu_ops_as_kernels
        self._own_dir = None
        if work_dir is None:
            self._own_dir = tempfile.TemporaryDirectory(prefix="emo-torch-")
            work_dir = self._own_dir.name
        self.work_dir = work_dir
        os.makedirs(work_dir, exist_ok=True)
        self.phase = "warmup"
        self._step = 0
        self._prof = None
        self._handler = None
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None
        self._policy: Optional[Policy] = None
        self._result: Dict[str, Any] = {}
        self._runtime = None
        self._bound = max_slowdown
        self._replanned = 0
        self._solve_started_at = 0
        self._history: List[Dict[str, Any]] = []
        self._warnings: List[str] = []  # what emo.optimize doubts about the captured step
        self._deprofiled: Optional[Dict[str, Any]] = None  # the profiler's cost taken out of the step
        self._waiting_for_rank0 = False
        self._clock: Optional[_StepClock] = None

    # ---- the hooks ----
    def on_step_begin(self) -> None:
        self._raise_if_failed()
        if self.phase == "warmup" and self._step >= 1:  # the warm-up steps after the first are timed
            if self._clock is None:
                self._clock = _StepClock()
            self._clock.mark()
        if self.phase == "warmup" and self._step >= self.warmup_steps:
            self._start_capture()
        elif self.phase == "solve" and not self.emulated and self._step >= self._solve_started_at + self.solve_wait_steps:
            self._start_runtime()
        elif (self.emulated and self._waiting_for_rank0 and self._step >= self._solve_started_at + self.solve_wait_steps):
            self._share_emulated()
        if self._runtime is not None:
            self._runtime.step_begin()

    def on_step_end(self) -> None:
        self._step += 1
        if self.phase == "capture":
            self._prof.step()
            if self._handler.paths:
                self._prof.stop()
                self._prof = None
                self._start_solve()
        elif self._runtime is not None:
            self._runtime.step_end()
            if self._step % 50 == 0:
                self._watch()

    # ---- what happened ----
    def report(self) -> Dict[str, Any]:
        """At least `saving_pct` and `slowdown_pct` as measured (None until measured), the phase, the
        device, the bound the policy was made for, the fallbacks, the re-plans, `warnings`: what
        emo.optimize doubted about the captured step, and `deprofiled`: where the profiler slowed the
        captured step past EMO's doubt (10 %), the factor on host time that took its cost out
        (emo.deprofile; host_scale, traced_ms, untraced_ms), else None."""
        self._raise_if_failed()
        out: Dict[str, Any] = {"phase": self.phase, "device": self.device, "max_slowdown": self.max_slowdown,
                               "bound": self._bound, "replans": self._replanned, "saving_pct": None,
                               "slowdown_pct": None, "fallbacks": [], "history": list(self._history),
                               "warnings": list(self._warnings), "deprofiled": self._deprofiled}
        measured = None
        if self._runtime is not None:
            snap = self._runtime.snapshot()
            measured = snap.get("measured")
            out["fallbacks"] = snap.get("fallbacks", [])
        elif self._result:
            measured = self._result.get("measured")
            out["fallbacks"] = self._result.get("fallbacks", [])
        if measured:
            pol = measured["policy"]
            out["saving_pct"] = pol.get("saving_pct")
            out["slowdown_pct"] = pol.get("slowdown_pct")
            out["saving_ci_pct"] = pol.get("saving_ci_pct")
            out["measured"] = measured
        if self._policy is not None:
            out["policy"] = os.path.join(self.work_dir, "policy.json")
        return out

    def close(self) -> Dict[str, Any]:
        """Stops the runtime (the clock back at its default) and returns the last report."""
        if self._thread is not None:
            self._thread.join()
        rep = self.report()
        if self._runtime is not None:
            final = self._runtime.stop()
            rep["measured"] = final.get("measured")
            rep["fallbacks"] = final.get("fallbacks", [])
            if rep["measured"]:
                rep["saving_pct"] = rep["measured"]["policy"].get("saving_pct")
                rep["slowdown_pct"] = rep["measured"]["policy"].get("slowdown_pct")
            self._runtime = None
            self.phase = rep["phase"] = "done"
        return rep

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- internals ----
    def _say(self, line: str) -> None:
        if callable(self.progress):
            self.progress(line)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            self.phase = "failed"
            raise err

    def _traces(self) -> List[str]:
        _, world = _rank_world()
        return [os.path.join(self.work_dir, "capture", f"rank{r}.json.gz") for r in range(world)]

    def _start_capture(self) -> None:
        from torch.profiler import profile, schedule

        self._handler = trace_handler(os.path.join(self.work_dir, "capture"))
        self._prof = profile(schedule=schedule(wait=0, warmup=0, active=self.capture_steps, repeat=1),
                             on_trace_ready=self._handler, **profiler_kwargs())
        self._prof.start()
        if self._clock is not None:
            self._clock.write_into(self._prof)  # the untraced steps' periods, into the trace
        self.phase = "capture"
        self._say(f"emo: capturing {self.capture_steps} steps")

    def _start_solve(self) -> None:
        torch = _torch()
        d = torch.distributed
        if d.is_available() and d.is_initialized():
            d.barrier()  # every rank's trace is written (work_dir is shared by the ranks)
        rank, _ = _rank_world()
        self.phase = "solve"
        self._solve_started_at = self._step
        self._waiting_for_rank0 = bool(d.is_available() and d.is_initialized())
        if rank == 0:
            self._thread = threading.Thread(target=self._solve, name="emo-solve", daemon=True)
            self._thread.start()

    def _profile_device(self) -> str:
        if self.emulated:
            return self.device
        idx = self._gpu_index()
        return f"nvml:{idx}"

    def _gpu_index(self) -> int:
        if self.device != "nvml:auto":
            return int(self.device.split(":", 1)[1])
        torch = _torch()
        return torch.cuda.current_device() if torch.cuda.is_available() else 0

    def _solve(self) -> None:
        try:
            traces = [p for p in self._traces() if os.path.exists(p)]
            stand_in = self._stand_in_of(traces)
            traces, stand_in = self._without_profiler_cost(traces, stand_in)
            while True:
                self._say(f"emo: solving for {100 * self._bound:.1f} %")
                pol = _optimize(traces, device=self._profile_device(), max_slowdown=self._bound,
                                cpu_ops_as_kernels=stand_in)
                pol.save(os.path.join(self.work_dir, "policy.json"))
                self._warnings = list(pol.warnings)
                for w in self._warnings:
                    self._say(f"emo: warning: {w}")
                self._policy = pol
                if not self.emulated:
                    return
                self.phase = "apply"
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # a fallback is in the report
                    res = _apply(pol, traces, device=self.device, steps=self.apply_steps, verify=self.verify,
                                 block_steps=self.block_steps, cpu_ops_as_kernels=stand_in)
                m = res["measured"]["policy"]
                self._history.append({"bound": self._bound, "saving_pct": m["saving_pct"],
                                      "slowdown_pct": m["slowdown_pct"], "fallbacks": len(res["fallbacks"])})
                self._result = res
                over = m["slowdown_pct"] > 100 * self.max_slowdown or res["fallbacks"]
                if over and self._replanned < self.replans:
                    self._replanned += 1
                    self._bound *= 0.7
                    continue
                self.phase = "done"
                return
        except BaseException as e:  # raised on the job's thread at its next hook
            self._error = e

    def _without_profiler_cost(self, traces: List[str], stand_in: bool):
        """The captured step as the job runs it, where the profiler slowed it by more than EMO doubts
        (docs/replay.md, "The profiler's cost"): the warm-up steps were timed without the profiler, so
        emo.deprofile finds the host time that explains the difference and writes the step without it.
        The plan is made, and on an emulated GPU applied, on that step. Else the traces as captured."""
        import emo

        try:
            d = _deprofile(traces, os.path.join(self.work_dir, "deprofiled"), cpu_ops_as_kernels=stand_in)
        except emo.Error:  # no untraced times in the trace, or the profiler did not slow the step
            return traces, stand_in
        pct = 100.0 * (d["traced_ms"] / d["untraced_ms"] - 1.0)
        if pct <= _emo.profiler_slowdown_doubt_pct:
            return traces, stand_in
        self._deprofiled = {k: d[k] for k in ("host_scale", "traced_ms", "untraced_ms", "replayed_ms", "explained")}
        self._say(f"emo: the profiler slowed the captured step by {pct:+.0f} % ({d['traced_ms']:.3f} ms against "
                  f"{d['untraced_ms']:.3f} ms without it): its host cost taken out (host time x{d['host_scale']:.3f})")
        for w in d["warnings"]:
            self._say(f"emo: warning: {w}")
        return list(d["files"]), False  # stand-in kernels, if any, are GPU ops of the written step

    def _stand_in_of(self, traces: List[str]) -> bool:
        if self._cpu_stand_in is not None:
            return bool(self._cpu_stand_in)
        if not self.emulated:
            return False
        import emo

        try:
            a = emo.analyze(traces)
        except emo.Error:
            return True
        return len(a.kernels) == 0

    def _share_emulated(self) -> None:
        # Rank 0 solved and ran the emulated job for every rank; the others get its result.
        torch = _torch()
        d = torch.distributed
        rank, _ = _rank_world()
        box: List[Any] = [None]
        if rank == 0:
            if self._thread is not None:
                self._thread.join()
            failed = repr(self._error) if self._error is not None else None
            box = [{"result": self._result, "history": self._history, "bound": self._bound,
                    "replanned": self._replanned, "failed": failed, "warnings": self._warnings,
                    "deprofiled": self._deprofiled}]
        d.broadcast_object_list(box, src=0)
        self._waiting_for_rank0 = False
        got = box[0]
        if rank != 0:
            if got["failed"]:
                raise RuntimeError(f"emo: rank 0 failed: {got['failed']}")
            self._result, self._history = got["result"], got["history"]
            self._bound, self._replanned = got["bound"], got["replanned"]
            self._warnings = list(got.get("warnings", []))
            self._deprofiled = got.get("deprofiled")
            self._policy = Policy.load(os.path.join(self.work_dir, "policy.json"))
            self.phase = "done"
        self._raise_if_failed()

    def _start_runtime(self) -> None:
        torch = _torch()
        d = torch.distributed
        text = None
        rank, _ = _rank_world()
        if rank == 0 and self._thread is not None:
            self._thread.join()
            self._raise_if_failed()
            text = self._policy.text if self._policy is not None else None
        if d.is_available() and d.is_initialized():
            box = [text]
            d.broadcast_object_list(box, src=0)
            text = box[0]
        if text is None:
            raise RuntimeError("emo: no policy was made")
        stream = torch.cuda.current_stream().cuda_stream if torch.cuda.is_available() else 0
        clock = f"clockd:{self.clockd}#{self._gpu_index()}" if self.clockd else f"nvml:{self._gpu_index()}"
        self._runtime = _emo.Runtime(text, "policy.json", rank=rank, clock=clock, meter=self._gpu_index(),
                                     gpu_anchor=torch.cuda.is_available(), stream=stream, verify=self.verify,
                                     block_steps=self.block_steps)
        self.phase = "running"
        self._say("emo: applying the policy")

    def _watch(self) -> None:
        snap = self._runtime.snapshot()
        if snap.get("fallbacks") and self._replanned < self.replans:
            # The runtime dropped the policy: solve again for a tighter target, apply that instead.
            self._replanned += 1
            self._bound *= 0.7
            self._history.append({"bound": self._bound / 0.7, "fallbacks": snap["fallbacks"]})
            self._runtime.stop()
            self._runtime = None
            self._start_solve()


class HuggingFaceCallback:
    """A transformers TrainerCallback over an EnergyOptimizer: Trainer(..., callbacks=[HuggingFaceCallback(opt)])."""

    def __init__(self, optimizer: EnergyOptimizer) -> None:
        self.optimizer = optimizer

    def on_step_begin(self, args=None, state=None, control=None, **kwargs):
        self.optimizer.on_step_begin()
        return control

    def on_step_end(self, args=None, state=None, control=None, **kwargs):
        self.optimizer.on_step_end()
        return control

    def on_train_end(self, args=None, state=None, control=None, **kwargs):
        self.optimizer.close()
        return control

    def __getattr__(self, name: str):
        # Every other TrainerCallback event is a no-op returning `control`.
        if name.startswith("on_"):
            return lambda args=None, state=None, control=None, **kw: control
        raise AttributeError(name)


class LightningCallback:
    """A Lightning Callback over an EnergyOptimizer: Trainer(callbacks=[LightningCallback(opt)])."""

    def __init__(self, optimizer: EnergyOptimizer) -> None:
        self.optimizer = optimizer

    def on_train_batch_start(self, trainer=None, pl_module=None, batch=None, batch_idx=None, *a, **kw) -> None:
        self.optimizer.on_step_begin()

    def on_train_batch_end(self, trainer=None, pl_module=None, outputs=None, batch=None, batch_idx=None, *a, **kw) -> None:
        self.optimizer.on_step_end()

    def on_train_end(self, trainer=None, pl_module=None) -> None:
        self.optimizer.close()
