"""emo.torch for real: a small torch model trained on the CPU, its steps captured with torch.profiler and
read by EMO, the GPU side emulated (a CPU-only run's operators stand in for the kernels): the energy
optimizer in the loop reports the saving its emulated run measured, within the bound. Skipped where
torch is not installed (scripts/check.sh installs it into the test venv)."""

import gzip
import json
import os

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")

import emo  # noqa: E402
import emo.torch as et  # noqa: E402


def _model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return float(loss)

    return step


def test_capture_writes_one_gzipped_trace_per_rank_that_emo_reads(tmp_path):
    step = _model()
    with et.capture(str(tmp_path), steps=2, wait=1, warmup=1) as p:
        for _ in range(5):
            step()
            p.step()
    path = tmp_path / "rank0.json.gz"
    assert path.exists(), os.listdir(tmp_path)
    doc = json.loads(gzip.open(path).read())
    steps = [e["name"] for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(steps) == 2, steps
    a = emo.analyze([str(path)], cpu_ops_as_kernels=True)
    assert len(a.kernels) > 5
    assert (a.kernels["dur_us"] > 0).all()
    # The capture folder itself is an input (its rank files).
    assert emo.analyze(tmp_path, cpu_ops_as_kernels=True).to_json() == a.to_json()
    with pytest.raises(emo.Error):
        emo.analyze([str(tmp_path / "rank1.json.gz")])


def _sleepy_step(traced_ms, untraced_ms):
    """A step of a few tiny operators that sleeps `traced_ms` while the profiler records, else
    `untraced_ms` (a host the profiler slows, or not): the sleep is nearly all of it, so a busy machine
    moves both alike."""
    import time

    from torch.autograd import _profiler_enabled

    x = torch.ones(16)

    def run():
        x.add_(1.0).mul_(0.5)
        time.sleep((traced_ms if _profiler_enabled() else untraced_ms) / 1e3)

    return run


def _untraced(path):
    doc = json.loads(gzip.open(path).read())
    return doc.get("emo_untraced_step_us")


def test_capture_times_the_untraced_steps_and_emo_says_when_the_profiler_slowed_the_step(tmp_path):
    # The wait steps run without the profiler: their periods go into the trace, and EMO compares them
    # with the recorded step (docs/replay.md, "When emo doubts a step").
    for name, traced, untraced, doubted in (("slowed", 80, 20, True), ("same", 40, 40, False)):
        run = _sleepy_step(traced, untraced)
        out = tmp_path / name
        with et.capture(str(out), steps=2, wait=3, warmup=1) as p:
            for _ in range(6):
                run()
                p.step()
        periods = _untraced(out / "rank0.json.gz")
        assert periods is not None and len(periods) == 3, periods
        assert all(x >= untraced * 1e3 for x in periods), periods
        said = [w for w in emo.analyze(out, cpu_ops_as_kernels=True).warnings if "profiler slowed" in w]
        assert bool(said) == doubted, said
        if doubted:
            assert "emo_untraced_step_us" in said[0] and "verify" in said[0]


def test_the_energy_optimizer_times_its_warm_up_steps_and_takes_the_profilers_cost_out(tmp_path):
    # Where the profiler slowed the captured step past EMO's doubt, the plan is made on the step without
    # its cost (emo.deprofile): here the step sleeps 80 ms under the profiler and 20 ms without it, all of
    # it host time, so the host's time is taken to about a quarter and the doubt is gone.
    for name, traced, untraced, slowed in (("same", 40, 40, False), ("slowed", 80, 20, True)):
        run = _sleepy_step(traced, untraced)
        said = []
        opt = et.EnergyOptimizer(max_slowdown=0.05, device="emulated:h100", work_dir=str(tmp_path / name),
                                 warmup_steps=4, progress=said.append)
        for _ in range(200):
            opt.on_step_begin()
            run()
            opt.on_step_end()
            if opt.phase in ("done", "failed"):
                break
        rep = opt.close()
        periods = _untraced(tmp_path / name / "capture" / "rank0.json.gz")
        assert periods is not None and len(periods) == 3, periods  # warm-up steps 1..3 (the first left out)
        assert all(x >= untraced * 1e3 for x in periods), periods
        assert not [w for w in rep["warnings"] if "profiler slowed" in w], rep["warnings"]
        if not slowed:
            assert rep["deprofiled"] is None, rep["deprofiled"]
            continue
        d = rep["deprofiled"]
        assert d is not None and d["explained"], d
        assert d["traced_ms"] > 3 * d["untraced_ms"] * 0.9, d
        assert 0.1 < d["host_scale"] < 0.5, d
        assert d["replayed_ms"] <= d["untraced_ms"] * 1.001, d
        assert any("its host cost taken out" in line for line in said), said
        # The plan was made, and applied, on the step the job runs: 20 ms, not 80.
        assert rep["measured"]["default"]["time_us"] < 1e3 * (d["untraced_ms"] * 1.25), rep["measured"]["default"]
        assert rep["slowdown_pct"] <= 5.0 + 1e-9, rep


def test_deprofile_writes_the_step_without_the_profilers_cost(tmp_path):
    run = _sleepy_step(60, 15)
    out = tmp_path / "cap"
    with et.capture(str(out), steps=2, wait=3, warmup=1) as p:
        for _ in range(6):
            run()
            p.step()
    d = emo.deprofile(out, tmp_path / "dp", cpu_ops_as_kernels=True)
    assert d["explained"] and 0.1 < d["host_scale"] < 0.5, d
    assert len(d["files"]) == 1 and os.path.exists(d["files"][0]), d
    a = emo.analyze(d["files"])  # the stand-in kernels are GPU ops of the written step
    assert abs(a.to_json()["measured_span_us"] / 1e3 - d["replayed_ms"]) < 0.01, (a.to_json()["measured_span_us"], d)
    assert not [w for w in a.warnings if "profiler slowed" in w], a.warnings
    # The job's step time given instead of the trace's: the same factor.
    d2 = emo.deprofile(out, tmp_path / "dp2", untraced_step_ms=d["untraced_ms"], cpu_ops_as_kernels=True)
    assert d2["host_scale"] == d["host_scale"], (d2, d)
    with pytest.raises(emo.OptionError):
        emo.deprofile(out, tmp_path / "dp3", host_scale=0.5, untraced_step_ms=10.0)
    # The same step through deprofile=True of the other calls: the step the job runs, said.
    b = emo.analyze(out, cpu_ops_as_kernels=True, deprofile=True)
    assert abs(b.to_json()["measured_span_us"] / 1e3 - d["replayed_ms"]) < 0.01
    assert [w for w in b.warnings if "the profiler's cost was taken out" in w], b.warnings
    with pytest.raises(emo.Error, match="does not say how long"):
        emo.deprofile(_no_untraced(tmp_path), tmp_path / "x")
    assert not (tmp_path / "x").exists()


def _no_untraced(tmp_path):
    path = tmp_path / "plain.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 5,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 20,
         "args": {"correlation": 1, "device": 0, "stream": 7}}]}))
    return str(path)


def test_trace_handler_works_beside_a_users_own_schedule(tmp_path):
    from torch.profiler import profile, schedule

    step = _model()
    handler = et.trace_handler(str(tmp_path / "mine"), gzip=False)
    with profile(schedule=schedule(wait=0, warmup=1, active=1, repeat=1), on_trace_ready=handler,
                 **et.profiler_kwargs()) as p:
        for _ in range(3):
            step()
            p.step()
    assert handler.paths == [str(tmp_path / "mine" / "rank0.json")]
    assert len(emo.analyze(handler.paths, cpu_ops_as_kernels=True).to_json()["ranks"]) == 1


def test_energy_optimizer_in_a_cpu_training_loop_reports_the_emulated_saving_within_the_bound(tmp_path):
    step = _model()
    lines = []
    opt = et.EnergyOptimizer(max_slowdown=0.05, device="emulated:h100", warmup_steps=2, capture_steps=2,
                             work_dir=str(tmp_path), progress=lines.append)
    assert opt.report()["saving_pct"] is None
    for _ in range(12):
        opt.on_step_begin()
        step()
        opt.on_step_end()
    rep = opt.close()
    assert rep["phase"] == "done", rep
    assert rep["saving_pct"] is not None and rep["saving_pct"] > 3, rep
    assert rep["slowdown_pct"] <= 5.5, rep
    assert os.path.exists(rep["policy"])
    assert emo.Policy.load(rep["policy"]).document["schema"] == "emo-policy/1"
    assert any("capturing" in l for l in lines) and any("solving" in l for l in lines)
    # The same answer as the library's own calls on the captured trace, or, where the profiler slowed it
    # past the doubt (a CPU step under the profiler often is), on the step it wrote without that cost.
    trace = str(tmp_path / "capture" / "rank0.json.gz")
    stand_in = True
    if rep["deprofiled"] is not None:
        d = emo.deprofile([trace], tmp_path / "again", cpu_ops_as_kernels=True)
        assert d["host_scale"] == rep["deprofiled"]["host_scale"], (d, rep["deprofiled"])
        trace, stand_in = d["files"][0], False
    pol = emo.optimize([trace], device="emulated:h100", max_slowdown=0.05, cpu_ops_as_kernels=stand_in)
    again = emo.apply(pol, [trace], device="emulated:h100", cpu_ops_as_kernels=stand_in)
    assert again["measured"]["policy"]["saving_pct"] == pytest.approx(rep["saving_pct"], abs=1e-9)


def test_a_failure_in_the_background_is_raised_on_the_jobs_thread(tmp_path):
    opt = et.EnergyOptimizer(device="emulated:nosuchgpu", warmup_steps=0, capture_steps=1, work_dir=str(tmp_path))
    step = _model()
    with pytest.raises(emo.Error):
        for _ in range(6):
            opt.on_step_begin()
            step()
            opt.on_step_end()
            if opt._thread is not None:
                opt._thread.join()
    assert opt.phase == "failed"


def test_bad_arguments_are_errors():
    with pytest.raises(ValueError):
        et.EnergyOptimizer(max_slowdown=0)
    with pytest.raises(ValueError):
        et.EnergyOptimizer(device="cuda:0")
    with pytest.raises(ValueError):
        et.capture(steps=0)


def test_the_adapters_drive_the_optimizers_hooks():
    calls = []

    class Recorder:
        def on_step_begin(self):
            calls.append("begin")

        def on_step_end(self):
            calls.append("end")

        def close(self):
            calls.append("close")
            return {}

    hf = et.HuggingFaceCallback(Recorder())
    control = object()
    assert hf.on_step_begin(None, None, control) is control
    assert hf.on_step_end(None, None, control) is control
    assert hf.on_log(None, None, control) is control  # any other Trainer event: a no-op
    hf.on_train_end(None, None, control)
    pl = et.LightningCallback(Recorder())
    pl.on_train_batch_start(None, None, None, 0)
    pl.on_train_batch_end(None, None, None, None, 0)
    assert calls == ["begin", "end", "close", "begin", "end"]


RUNTIME_CHILD = """
    import json, os, sys, torch
    import emo.torch as et
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    o = torch.optim.SGD(m.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    opt = et.EnergyOptimizer(max_slowdown=0.5, device="nvml:0", warmup_steps=1, capture_steps=2,
                             work_dir=sys.argv[1], cpu_ops_as_kernels=True, solve_wait_steps=2, block_steps=4)
    phases = []
    for i in range(40):
        opt.on_step_begin()
        o.zero_grad(); torch.nn.functional.cross_entropy(m(x), y).backward(); o.step()
        opt.on_step_end()
        phases.append(opt.phase)
    rep = opt.close()
    print(json.dumps({"phases": phases, "report": {k: rep[k] for k in ("phase", "saving_pct", "slowdown_pct")},
                      "calls": rep["measured"]["policy"]["steps"] if rep.get("measured") else 0}))
"""


def test_energy_optimizer_on_a_gpu_applies_through_the_runtime_and_resets(tmp_path, nvml_standin):
    # nvml:0 is the stand-in NVML library (its state in a file): the policy made from the captured CPU
    # run is applied by the runtime inside the process, locking through NVML; closing resets the clock.
    import subprocess
    import sys
    import textwrap

    state = tmp_path / "state"
    log = tmp_path / "log"
    env = dict(os.environ, LD_LIBRARY_PATH=nvml_standin, EMO_NVML_STANDIN_STATE=str(state), EMO_NVML_STANDIN_LOG=str(log))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(RUNTIME_CHILD), str(tmp_path / "work")], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "running" in out["phases"], out["phases"]
    assert out["report"]["phase"] == "done"
    calls = log.read_text()
    assert "nvmlDeviceSetGpuLockedClocks 0 " in calls, calls[-2000:]  # the policy's clock, from the controller
    assert calls.rstrip().splitlines()[-1].split()[1] == "nvmlShutdown"
    assert out["report"]["saving_pct"] is not None
    locked = [l for l in state.read_text().splitlines() if l.startswith("gpu 0 ")]
    assert locked and " locked_mhz 0 " in locked[0] + " ", locked


DIST_CHILD = """
    import json, os, sys, torch, torch.distributed as dist
    import emo.torch as et
    rank, port, work = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.manual_seed(rank)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    o = torch.optim.SGD(m.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    opt = et.EnergyOptimizer(device="emulated:h100", warmup_steps=1, capture_steps=2, work_dir=work, solve_wait_steps=3)
    for i in range(12):
        opt.on_step_begin()
        o.zero_grad(); torch.nn.functional.cross_entropy(m(x), y).backward(); o.step()
        opt.on_step_end()
    rep = opt.close()
    dist.destroy_process_group()
    print(json.dumps({"rank": rank, "phase": rep["phase"], "saving_pct": rep["saving_pct"], "policy": rep.get("policy")}))
"""


def test_ranks_coordinate_through_torch_distributed(tmp_path):
    # Two processes in a gloo process group: each captures its own rank file into the shared work_dir,
    # rank 0 solves over both and runs the emulated job, and broadcasts the result to rank 1.
    import socket
    import subprocess
    import sys
    import textwrap

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    work = tmp_path / "work"
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(DIST_CHILD), str(r), port, str(work)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(os.listdir(work / "capture")) == ["rank0.json.gz", "rank1.json.gz"]
    assert [o["phase"] for o in outs] == ["done", "done"]
    assert outs[0]["saving_pct"] is not None and outs[0]["saving_pct"] == outs[1]["saving_pct"]
    doc = emo.Policy.load(outs[1]["policy"]).document
    assert len(doc["ranks"]) == 2  # one policy over both ranks' traces
