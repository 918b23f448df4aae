"""The pipeline from Python: each function opens the library's session (the same one every CLI
subcommand drives) and returns its results as DataFrames and dicts. No stage runs here; see
include/emo/session/session.h and include/emo/report/views.h for what each result is."""

from __future__ import annotations

import copy
import json
import os
import tempfile
from functools import cached_property
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _emo
from ._errors import DeviceError, InputError, OptionError
from ._progress import Progress, ProgressArg

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Analysis", "Packing", "Policy", "analyze", "whatif", "pack", "optimize", "evaluate", "run", "apply", "synth",
    "POLICY_SCHEMA",
]

PathLike = Union[str, "os.PathLike[str]"]
Paths = Union[PathLike, Sequence[PathLike]]
POLICY_SCHEMA = "emo-policy/1"


def _paths(paths: Paths) -> List[str]:
    """One trace file per rank: a path, a folder of rank files (HTA's trace_dir: its .json and .json.gz
    files, in byte order), or a sequence of them, as the CLI takes them (not resolved)."""
    if isinstance(paths, (str, os.PathLike)):
        out = [os.fspath(paths)]
    else:
        out = [os.fspath(p) for p in paths]
    if not out:
        raise InputError("no trace files given", note="pass one Kineto trace per rank (.json or .json.gz)")
    return list(_emo.expand_trace_paths(out))


def _frame(cols: Mapping[str, Any]) -> "pd.DataFrame":
    """A DataFrame from the bindings' columns: numpy arrays, and (codes, categories) for text."""
    import pandas as pd

    data = {}
    for name in cols["columns"]:
        v = cols["data"][name]
        if isinstance(v, tuple):
            codes, categories = v
            data[name] = pd.Categorical.from_codes(codes, categories=categories)
        else:
            data[name] = v
    return pd.DataFrame(data, columns=list(cols["columns"]))


def _session(paths: Paths, progress: Progress, **options: Any) -> "_emo.Session":
    options = {k: ("" if v is None and k in _TEXT_OPTIONS else v) for k, v in options.items()}
    return _emo.Session(_paths(paths), progress=progress.callback, **options)


_TEXT_OPTIONS = {"profile_on", "profiled_dir", "policy_file"}


# ---- analyze / whatif ------------------------------------------------------------------------------


class Analysis:
    """One step of a set of traces, analyzed: `emo analyze`'s results.

    `kernels` and `critical_path` are DataFrames built from column arrays the library fills;
    `to_json()` is `emo analyze --json`'s document (with ``per_kernel=True``, `--per-kernel`'s).
    """

    def __init__(self, session: "_emo.Session") -> None:
        self._s = session

    @cached_property
    def _document(self) -> Dict[str, Any]:
        return self._s.analyze_document(False)

    def to_json(self, per_kernel: bool = False) -> Dict[str, Any]:
        """`emo analyze --json` (`--per-kernel` adds the `kernels` list) as a dict."""
        return self._s.analyze_document(True) if per_kernel else copy.deepcopy(self._document)

    @cached_property
    def kernels(self) -> "pd.DataFrame":
        """One row per GPU op (kernels, collective kernels, memcpy, memset), in the order of
        `--per-kernel`'s list: rank, index (the op's place in its rank's index order: start time, ties
        by stream — the numbering of the policy file and of packs' first_op/last_op), name, stream,
        start_us (from the step's measured start), dur_us, slack_us (how much longer it may run before
        the step ends later), on_critical_path (the extracted critical path runs through it; ops with
        no slack are ``slack_us == 0``, a superset), kind, node (the graph's node id)."""
        return _frame(self._s.kernels())

    @cached_property
    def critical_path(self) -> "pd.DataFrame":
        """The critical path piece by piece, in time order (`--critical-path-csv`): segment (node: the
        node's own time, edge: a dependency's latency), kind (node kind or edge kind), rank, name,
        start_us, dur_us, node, from_node (edges: their source; else -1)."""
        return _frame(self._s.critical_path())

    @property
    def breakdown(self) -> Dict[str, float]:
        """µs of the critical path per category: gpu_compute, communication, gpu_memory, cpu,
        launch_overhead, sync_wait, idle."""
        return dict(self._document["critical_path"]["breakdown"])

    @property
    def critical_path_us(self) -> float:
        return float(self._document["critical_path"]["length_us"])

    @property
    def measured_span_us(self) -> float:
        return float(self._document["measured_span_us"])

    @property
    def replayed_span_us(self) -> float:
        return float(self._document["replayed_span_us"])

    @property
    def replay_error_pct(self) -> float:
        return float(self._document["replay_error_pct"])

    @cached_property
    def gpus(self) -> "pd.DataFrame":
        """Per GPU: rank, device, ops, busy_us, idle_us."""
        import pandas as pd

        return pd.DataFrame(self._document["gpus"], columns=["rank", "device", "ops", "busy_us", "idle_us"])

    @cached_property
    def warnings(self) -> List[str]:
        """What `emo analyze` warns about on stderr (analysis::step_warnings): malformed events
        skipped, events outside the profiler window dropped, missing ranks, launch calls without GPU
        activity, a replay away from the trace. Empty when there is nothing."""
        return list(self._s.step_warnings())

    def whatif(self, scales: "Scales") -> Dict[str, Any]:
        """`emo whatif --json` on this step (see emo.whatif)."""
        return self._s.whatif_document(_scales(scales))

    def __repr__(self) -> str:
        d = self._document
        return (f"<emo.Analysis {len(d['ranks'])} rank(s), {d['slack']['gpu_ops']} GPU ops, step "
                f"{d['measured_span_us'] / 1e3:.3f} ms, critical path {d['critical_path']['length_us'] / 1e3:.3f} ms>")


def analyze(paths: Paths, step: Optional[int] = None, *, split_collectives: bool = True,
            cpu_ops_as_kernels: bool = False, deprofile: bool = False, progress: ProgressArg = None) -> Analysis:
    """`emo analyze PATHS [--step N]`: load one step of the traces (one file per rank, .json or
    .json.gz), build its dependency graph, replay it, and find the critical path and each GPU op's slack.

    `cpu_ops_as_kernels`: the trace is of a CPU-only run, whose leaf CPU operators stand in for the
    kernels of a GPU job (`--cpu-ops-as-kernels`; pass it to every later call on the same traces).
    `deprofile`: where the profiler slowed the step by more than 10 % against the job's untraced steps the
    trace carries, work on the step without the profiler's host cost (`--deprofile`, emo.deprofile; pass
    it to every later call on the same traces too).

    Raises emo.InputError for a missing, unreadable or malformed trace, emo.OptionError for a bad step.
    """
    with Progress(progress) as p:
        s = _session(paths, p, step=step, split_collectives=split_collectives, cpu_ops_as_kernels=cpu_ops_as_kernels,
                     deprofile=deprofile)
        a = Analysis(s)
        a._document  # runs the stages now, so that errors are raised here
        return a


Scales = Union[Mapping[str, float], Iterable[str]]


def _scales(scales: Scales) -> List[str]:
    if isinstance(scales, str):
        return [scales]
    if isinstance(scales, Mapping):
        return [f"{k}={v!r}" for k, v in scales.items()]
    return [str(s) for s in scales]


def whatif(paths: Paths, scales: Scales, step: Optional[int] = None, *, cpu_ops_as_kernels: bool = False,
           progress: ProgressArg = None) -> Dict[str, Any]:
    """`emo whatif PATHS --scale SEL=F ...`: scale the durations of the selected ops and replay.
    `scales` is ``{"gemm": 1.2, "stream:20": 0.5}`` or ``["gemm=1.2", "stream:20=0.5"]`` (a
    kernel-name regex, ``stream:N`` or ``cat:NAME``; ``cat:host`` is every CPU node's own time). Returns
    baseline_span_us, predicted_span_us,
    change_pct, matched_nodes."""
    with Progress(progress) as p:
        return _session(paths, p, step=step, cpu_ops_as_kernels=cpu_ops_as_kernels).whatif_document(_scales(scales))


# ---- pack ------------------------------------------------------------------------------------------


class Packing:
    """`emo pack`'s results: the packs, their signatures and the profiling plan."""

    def __init__(self, session: "_emo.Session") -> None:
        self._s = session

    @cached_property
    def _document(self) -> Dict[str, Any]:
        return self._s.pack_document(True, 0)

    def to_json(self, all: bool = False) -> Dict[str, Any]:
        """`emo pack --json` (the first 1000 packs; `all=True`: `--all`, every pack)."""
        return self._s.pack_document(all, 0)

    @cached_property
    def packs(self) -> "pd.DataFrame":
        """One row per pack: pack, rank, begin_us, end_us, busy_us (from the step's replayed start),
        slack_class, boundness, first_op, last_op (op indices in the rank's index order; -1 for a pack of
        idle time only), kernels, atoms, first_name, signature."""
        return _frame(self._s.packs(False))

    @cached_property
    def signatures(self) -> "pd.DataFrame":
        """One row per signature (profiled once): hash, members, ops, boundness, first_name."""
        import pandas as pd

        return pd.DataFrame(self._document["signatures"], columns=["hash", "members", "ops", "boundness", "first_name"])

    @property
    def plan(self) -> Dict[str, Any]:
        """The profiling plan and its cost: plan_clocks_mhz, plan_steps_per_clock, profiling_gpu_s,
        kernel_units (per-kernel profiling), profiled_units, reduction, replica_sets (distinct op
        sequences among the GPUs) and profiled_units_per_gpu (each GPU profiled on its own)."""
        keys = ("plan_clocks_mhz", "plan_steps_per_clock", "profiling_gpu_s", "kernel_units", "profiled_units",
                "reduction", "replica_sets", "profiled_units_per_gpu")
        return {k: self._document[k] for k in keys}

    def fidelity(self, clock_mhz: int) -> Dict[str, Any]:
        """`emo pack --fidelity-at MHZ`'s "fidelity": the pack models against the emulated GPU at a clock."""
        return self._s.pack_document(False, int(clock_mhz))["fidelity"]

    def __repr__(self) -> str:
        d = self._document
        return f"<emo.Packing {d['packs_total']} packs, {len(d['signatures'])} signatures, {d['reduction']:.1f}x fewer units>"


def _pack_options(step, min_pack, min_pack_ms, critical_slack_us, profile_clocks, per_kernel,
                  cpu_ops_as_kernels) -> Dict[str, Any]:
    return dict(step=step, min_pack=min_pack, min_pack_ms=min_pack_ms, critical_slack_us=critical_slack_us,
                profile_clocks=profile_clocks, per_kernel=per_kernel, cpu_ops_as_kernels=cpu_ops_as_kernels)


def pack(paths: Paths, device: str = "h100", *, step: Optional[int] = None, min_pack: float = 1.0,
         min_pack_ms: Optional[float] = None, critical_slack_us: float = 50.0, profile_clocks: int = 4,
         per_kernel: bool = False, cpu_ops_as_kernels: bool = False, progress: ProgressArg = None) -> Packing:
    """`emo pack PATHS --device DEV`: cut each GPU's step into packs (a clock each), group them by
    signature (one model each) and plan their profiling."""
    with Progress(progress) as p:
        s = _session(paths, p, device=device, **_pack_options(step, min_pack, min_pack_ms, critical_slack_us,
                                                               profile_clocks, per_kernel, cpu_ops_as_kernels))
        k = Packing(s)
        k._document
        return k


# ---- optimize / policy ---------------------------------------------------------------------------------


class Policy:
    """A clock policy (schema emo-policy/1): `emo optimize -o`'s file, from emo.optimize or Policy.load.

    `document` is the file as a dict and `text` its bytes as the CLI writes them; `result` is
    `emo optimize --json`'s document when the policy comes from emo.optimize (None when loaded).
    """

    def __init__(self, text: str, *, path: Optional[str] = None, result: Optional[Dict[str, Any]] = None,
                 session: Optional["_emo.Session"] = None) -> None:
        self.text = text
        self.path = path
        self.result = result
        self._s = session
        where = path or "policy"
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"not JSON: {e.msg} at line {e.lineno}, column {e.colno}", where=where, file=path,
                             note="a policy is the file `emo optimize -o` or emo.Policy.save writes") from None
        if not isinstance(doc, dict) or doc.get("schema") != POLICY_SCHEMA:
            got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
            raise InputError(f"not an {POLICY_SCHEMA} policy (schema: {got!r})", where=where, file=path,
                             note="a policy is the file `emo optimize -o` or emo.Policy.save writes")
        self.document: Dict[str, Any] = doc

    @classmethod
    def load(cls, path: PathLike) -> "Policy":
        """Reads a policy file. Only its form is checked here; emo.evaluate and emo.apply check it
        against the step and device (ranks, GPU-op counts, each pack's first and last op)."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise InputError("cannot open: no such file", where=path, file=path) from None
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"cannot read: {e}", where=path, file=path) from None
        return cls(text, path=path)

    def save(self, path: PathLike) -> None:
        """Writes the file, byte for byte as `emo optimize -o` writes it (complete or not at all)."""
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(self.text)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        self.path = path

    @property
    def device(self) -> str:
        return self.document["device"]

    @property
    def max_slowdown(self) -> float:
        return float(self.document["max_slowdown"])

    @property
    def default_clock_mhz(self) -> int:
        return int(self.document["default_clock_mhz"])

    @cached_property
    def packs(self) -> "pd.DataFrame":
        """The file's packs (those with ops), in its order: rank, clock_mhz, issue_at_us and, for the
        first and last op, index / stream / name / occurrence."""
        import pandas as pd

        rows = []
        for p in self.document.get("packs", []):
            row = {"rank": p["rank"], "clock_mhz": p["clock_mhz"], "issue_at_us": p["issue_at_us"]}
            for end in ("first", "last"):
                for k in ("index", "stream", "name", "occurrence"):
                    row[f"{end}_{k}"] = p[end][k]
            rows.append(row)
        cols = ["rank", "clock_mhz", "issue_at_us"] + [f"{e}_{k}" for e in ("first", "last")
                                                       for k in ("index", "stream", "name", "occurrence")]
        return pd.DataFrame(rows, columns=cols)

    @property
    def baselines(self) -> Dict[str, List[int]]:
        """Each baseline stored beside the policy: its clock per pack, in the file's pack order."""
        return {name: list(b["clocks_mhz"]) for name, b in self.document.get("baselines", {}).items()}

    @property
    def warnings(self) -> List[str]:
        """The optimization's warnings (`emo optimize` prints them on stderr); empty when loaded."""
        return list(self.result.get("warnings", [])) if self.result else []

    @cached_property
    def all_packs(self) -> "pd.DataFrame":
        """Every pack of the step (emo.Packing.packs) with the policy's clock_mhz; only for a policy
        from emo.optimize."""
        if self._s is None:
            raise InputError("a loaded policy has no packing: use emo.pack for the packs, Policy.packs for its clocks",
                             where=self.path or "policy", file=self.path)
        return _frame(self._s.packs(True))

    def evaluate(self, paths: Paths, device: str = "emulated:h100", **kwargs: Any) -> "pd.DataFrame":
        """emo.evaluate(self, paths, device, ...)."""
        return evaluate(self, paths, device, **kwargs)

    def apply(self, paths: Paths, device: str = "emulated:h100", **kwargs: Any) -> Dict[str, Any]:
        """emo.apply(self, paths, device, ...)."""
        return apply(self, paths, device, **kwargs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and other.document == self.document

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"<emo.Policy {self.device}, {len(self.document.get('packs', []))} packs, max_slowdown "
                f"{self.max_slowdown:g}{', ' + self.path if self.path else ''}>")


def optimize(paths: Paths, device: str = "h100", max_slowdown: float = 0.05, *, reserve: float = 0.1,
             check: bool = True, refine_profile: bool = True, profile_on: Optional[str] = None,
             profiled_dir: Optional[PathLike] = None, step: Optional[int] = None, min_pack: float = 1.0, min_pack_ms: Optional[float] = None,
             critical_slack_us: float = 50.0, profile_clocks: int = 4, per_kernel: bool = False,
             cpu_ops_as_kernels: bool = False, deprofile: bool = False, accept_doubt: bool = False,
             progress: ProgressArg = None) -> Policy:
    """`emo optimize PATHS --device DEV --max-slowdown D`: pack, profile the packs on the emulated GPU
    of `device` (or `profile_on`, or fit from runs recorded in `profiled_dir`), fit the models, solve for
    a clock per pack within `max_slowdown`, and (unless check=False) run the policy on the profiling
    device before handing it out. With `refine_profile` (the default; `--no-refine-profile` is False) a
    clock where the first plan (or a baseline) mostly runs, away from the profiled ones, is profiled too and the step
    solved again (docs/profiling.md, "Profiling where the plan runs"). A step too doubtful to optimize (most launches without GPU activity,
    a replay far from the trace, a step mostly blocked on GPU work the trace does not record) raises
    emo.InputError, as the CLI stops, unless `accept_doubt` (`--accept-doubt`)."""
    with Progress(progress) as p:
        s = _session(paths, p, device=device, max_slowdown=max_slowdown, reserve=reserve, check=check,
                     refine_profile=refine_profile, profile_on=profile_on, profiled_dir=os.fspath(profiled_dir) if profiled_dir else None,
                     deprofile=deprofile, **_pack_options(step, min_pack, min_pack_ms, critical_slack_us, profile_clocks, per_kernel,
                                     cpu_ops_as_kernels))
        if not accept_doubt:
            s.refuse_doubtful_step()
        result = s.optimize_document()
        return Policy(s.policy_text(), result=result, session=s)


class _PolicyFile:
    """A path to hand the library for a policy: its own file when it holds the policy's text, else a
    temporary copy (removed on exit)."""

    def __init__(self, policy: Union[Policy, PathLike]) -> None:
        self.policy = policy
        self.path: Optional[str] = None
        self._tmp: Optional[str] = None

    def __enter__(self) -> "_PolicyFile":
        if isinstance(self.policy, (str, os.PathLike)):
            self.path = os.fspath(self.policy)
            return self
        if not isinstance(self.policy, Policy):
            raise TypeError(f"policy must be an emo.Policy or a path, not {type(self.policy).__name__}")
        if self.policy.path:
            try:
                with open(self.policy.path, encoding="utf-8") as f:
                    if f.read() == self.policy.text:
                        self.path = self.policy.path
                        return self
            except OSError:
                pass
        fd, self._tmp = tempfile.mkstemp(prefix="emo-policy-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(self.policy.text)
        self.path = self._tmp
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tmp and os.path.exists(self._tmp):
            os.unlink(self._tmp)


def _require_emulated(s: "_emo.Session", what: str) -> None:
    if not s.emulated:
        raise DeviceError(what, where=f"--device {s.device}", option="device",
                          note="use emulated:NAME; on hardware the runtime runs inside the job (docs/runtime.md)")


def evaluate(policy: Union[Policy, PathLike], paths: Paths, device: str = "emulated:h100", *, steps: int = 12,
             step: Optional[int] = None, cpu_ops_as_kernels: bool = False, deprofile: bool = False,
             progress: ProgressArg = None) -> "pd.DataFrame":
    """`emo evaluate POLICY PATHS --device emulated:NAME`: run the default clocks, the policy and each
    baseline stored in it for `steps` steps on the emulated GPU (the first a warm-up).

    Returns one row per plan, indexed by name (default, policy, then the baselines): time_us,
    energy_j (per step, all GPUs), saving_pct, slowdown_pct (against the default clocks), predicted,
    predicted_time_us, predicted_energy_j (NaN where the plan is not the solution's), steps.
    ``.attrs["document"]`` is `emo evaluate --json`'s document."""
    with Progress(progress) as p, _PolicyFile(policy) as pf:
        s = _session(paths, p, device=device, step=step, eval_steps=steps, policy_file=pf.path,
                     cpu_ops_as_kernels=cpu_ops_as_kernels, deprofile=deprofile)
        _require_emulated(s, "evaluate runs on the emulated GPU")
        doc = s.evaluate_document()
        df = _frame(s.evaluation())
    df["name"] = df["name"].astype(str)
    df = df.set_index("name")
    df.attrs["document"] = doc
    return df


def apply(policy: Union[Policy, PathLike], paths: Paths, device: str = "emulated:h100", steps: int = 0,
          verify: bool = False, *, block_steps: int = 0, seed: int = 1, evaluate: bool = False,
          step: Optional[int] = None, cpu_ops_as_kernels: bool = False, deprofile: bool = False,
          progress: ProgressArg = None) -> Dict[str, Any]:
    """`emo apply POLICY PATHS --device emulated:NAME --steps N [--verify] --json`: run the step for
    `steps` steps (0: 24 blocks of steps, fewer where they would not fit in 1000) on the emulated GPU with the runtime applying the policy online, as inside a real
    job, and return what the runtime measured (`emo apply --json`'s document: measured.default /
    measured.policy, saving and slowdown with their intervals, fallbacks, clock calls...). "policy" is
    the policy file's path (None for a policy held only in memory)."""
    import warnings

    with Progress(progress) as p, _PolicyFile(policy) as pf:
        s = _session(paths, p, device=device, step=step, policy_file=pf.path, cpu_ops_as_kernels=cpu_ops_as_kernels,
                     deprofile=deprofile)
        out = s.apply(steps=steps, verify=verify, block_steps=block_steps, seed=seed, evaluate=evaluate)
        doc = out["document"]
        doc["policy"] = pf.path if pf._tmp is None else None
    for w in out["warnings"]:
        warnings.warn(w, RuntimeWarning, stacklevel=2)
    return doc


# ---- run / synth -----------------------------------------------------------------------------------


def run(paths: Optional[Paths] = None, out_dir: PathLike = "emo-report", device: str = "h100",
        max_slowdown: float = 0.05, *, reserve: float = 0.1, steps: int = 12, check: bool = True,
        refine_profile: bool = True, profiled_dir: Optional[PathLike] = None, accept_doubt: bool = False,
        progress: ProgressArg = None) -> Dict[str, Any]:
    """`emo run [PATHS] --device DEV --max-slowdown D -o OUT_DIR`: the whole method end to end, with the
    report folder (summary.json, results.csv, packs.csv, policy.json, report.html, overlays; docs/run.md).
    Without paths it runs on the built-in example (written to OUT_DIR/input/). Returns summary.json's
    "summary" object. A step whose replay is more than 50 % off its trace is refused (emo.Error) unless
    `accept_doubt` (`--accept-doubt`)."""
    traces = [] if paths is None else _paths(paths)
    with Progress(progress) as p:
        summary, _, _ = _emo.run(traces, device=device, max_slowdown=max_slowdown, reserve=reserve,
                                 out_dir=os.fspath(out_dir), profiled_dir=os.fspath(profiled_dir) if profiled_dir else "",
                                 eval_steps=steps, check=check, refine_profile=refine_profile,
                                 accept_doubt=accept_doubt, progress=p.callback)
    return summary["summary"]


def deprofile(paths: Paths, out_dir: PathLike, *, step: Optional[int] = None, host_scale: Optional[float] = None,
              untraced_step_ms: Optional[float] = None, cpu_ops_as_kernels: bool = False) -> Dict[str, Any]:
    """`emo deprofile TRACE... -o OUT_DIR`: the step as the job runs it without the profiler's cost on the host
    (docs/replay.md, "The profiler's cost"). From the job's untraced step times the trace carries
    (emo_untraced_step_us, which emo.torch.capture and EnergyOptimizer write), finds the factor on host time at
    which the replayed step takes the untraced time (`untraced_step_ms` where the trace has none: the job's
    step time from its own log), or uses `host_scale`, and writes the step at it as Kineto
    traces, one per rank, into OUT_DIR. Returns host_scale, replayed_ms, files and warnings, and where the factor
    was found traced_ms, untraced_ms and explained (False: even with no host time the step is longer)."""
    if host_scale is not None and untraced_step_ms is not None:
        raise OptionError("give either the factor or the job's step time, not both", where="host_scale",
                          option="host_scale")
    return dict(_emo.deprofile(_paths(paths), os.fspath(out_dir), step=step, host_scale=host_scale,
                               untraced_step_ms=untraced_step_ms, cpu_ops_as_kernels=cpu_ops_as_kernels))


def synth(workload: str, out_dir: PathLike, *, ranks: int = 2, layers: int = 4, steps: int = 3,
          decode_tokens: int = 16, microbatches: int = 8, seed: int = 1, min_events: int = 0) -> List[str]:
    """`emo synth WORKLOAD -o OUT_DIR`: realistic synthetic Kineto traces (train-dp, train-pp, train-tp,
    infer-decode, dataloader; docs/workloads.md), deterministic by seed. Returns the files, one per rank."""
    return list(_emo.synth(workload, os.fspath(out_dir), ranks=ranks, layers=layers, steps=steps,
                           decode_tokens=decode_tokens, microbatches=microbatches, seed=seed, min_events=min_events))
