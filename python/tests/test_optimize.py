"""emo.pack / optimize / Policy / evaluate / apply / run against the CLI on the same traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import emo


def without_timings(doc):
    """A document less its wall-clock times (keys ending in _ms), which differ between runs."""
    if isinstance(doc, dict):
        return {k: without_timings(v) for k, v in doc.items() if not k.endswith("_ms")}
    if isinstance(doc, list):
        return [without_timings(v) for v in doc]
    return doc


@pytest.fixture(scope="module")
def optimized(cli, pp_traces, tmp_path_factory):
    """(policy from Python, the CLI's policy file, the CLI's --json document)."""
    d = tmp_path_factory.mktemp("optimize")
    cli_policy = d / "cli_policy.json"
    doc = cli.json("optimize", *pp_traces, "--device", "h100", "--max-slowdown", "0.05", "-o", cli_policy)
    policy = emo.optimize(pp_traces, device="h100", max_slowdown=0.05)
    return policy, cli_policy, doc


def test_pack_agrees_with_cli(cli, pp_traces, tmp_path):
    k = emo.pack(pp_traces, device="h100")
    assert k.to_json() == cli.json("pack", *pp_traces, "--device", "h100")
    assert k.to_json(all=True) == cli.json("pack", *pp_traces, "--device", "h100", "--all")
    cli.run("pack", *pp_traces, "--device", "h100", "--csv", tmp_path / "packs.csv")
    csv = pd.read_csv(tmp_path / "packs.csv", dtype={"signature": str})
    packs = k.packs
    assert len(packs) == len(csv) == k.to_json()["packs_total"]
    for col in ("rank", "first_op"):
        assert (packs[col].to_numpy() == csv[col].to_numpy()).all(), col
    idle = packs["kernels"] == 0
    assert (packs.loc[~idle, "last_op"].to_numpy() == csv.loc[~idle, "last_op"].to_numpy()).all()
    for col in ("begin_us", "end_us", "busy_us"):
        np.testing.assert_allclose(packs[col], csv[col], atol=1e-3, err_msg=col)
    for col in ("slack_class", "boundness", "signature"):
        assert (packs[col].astype(str).to_numpy() == csv[col].to_numpy()).all(), col
    assert k.plan["plan_clocks_mhz"] == k.to_json()["plan_clocks_mhz"]
    assert len(k.signatures) == len(k.to_json()["signatures"])
    fid = k.fidelity(1305)
    assert fid["clock_mhz"] == 1305 and "step_energy_error_pct" in fid


def test_policy_is_the_cli_file(optimized, tmp_path):
    policy, cli_policy, doc = optimized
    # The same bytes as `emo optimize -o`, and the same --json document (less wall-clock times).
    policy.save(tmp_path / "py_policy.json")
    assert (tmp_path / "py_policy.json").read_bytes() == cli_policy.read_bytes()
    assert policy.path == str(tmp_path / "py_policy.json")
    assert without_timings(policy.result) == without_timings(doc)
    assert policy.warnings == doc["warnings"]
    # Loaded back, from either file: equal, with the same packs.
    for f in (cli_policy, tmp_path / "py_policy.json"):
        loaded = emo.Policy.load(f)
        assert loaded == policy and loaded.text == policy.text and loaded.result is None
        pd.testing.assert_frame_equal(loaded.packs, policy.packs)
    assert policy.document["schema"] == emo.POLICY_SCHEMA
    assert policy.device == "h100" and policy.max_slowdown == 0.05
    packs = policy.packs
    assert len(packs) == len(policy.document["packs"])
    assert (packs["clock_mhz"].to_numpy() == [p["clock_mhz"] for p in policy.document["packs"]]).all()
    assert set(policy.baselines) == set(policy.document["baselines"])
    # Every pack of the step with its clock: the file's packs are those with ops, in the same order.
    allp = policy.all_packs
    with_ops = allp[allp["kernels"] > 0]
    assert (with_ops["clock_mhz"].to_numpy() == packs["clock_mhz"].to_numpy()).all()
    assert (with_ops["first_op"].to_numpy() == packs["first_index"].to_numpy()).all()
    with pytest.raises(emo.InputError):
        emo.Policy.load(cli_policy).all_packs


def test_evaluate_agrees_with_cli(cli, optimized, pp_traces):
    policy, cli_policy, _ = optimized
    doc = cli.json("evaluate", cli_policy, *pp_traces, "--device", "emulated:h100")
    for p in (policy, str(cli_policy), emo.Policy.load(cli_policy)):
        df = emo.evaluate(p, pp_traces, device="emulated:h100")
        assert df.attrs["document"] == doc
        assert list(df.index[:2]) == ["default", "policy"]
        assert df.loc["policy", "saving_pct"] == doc["policy"]["saving_pct"]
        assert df.loc["policy", "slowdown_pct"] == pytest.approx(doc["policy"]["slowdown_pct"], abs=1e-9)
        for name, b in doc["baselines"].items():
            assert df.loc[name, "energy_j"] == b["energy_j"]
    assert df.loc["policy", "saving_pct"] > 0
    assert df.loc["policy", "slowdown_pct"] <= 100 * policy.max_slowdown
    # A policy read from a file carries no prediction of the session's own: NaN, as results.csv leaves 0.
    assert not df["predicted"].any() and df["predicted_energy_j"].isna().all()


def test_apply_agrees_with_cli_and_evaluate(cli, optimized, pp_traces):
    policy, cli_policy, _ = optimized
    doc = cli.json("apply", cli_policy, *pp_traces, "--device", "emulated:h100", "--steps", "200")
    r = emo.apply(emo.Policy.load(cli_policy), pp_traces, device="emulated:h100", steps=200)
    assert r == doc
    assert r["policy"] == str(cli_policy)
    assert {"default", "policy"} <= set(r["measured"])
    assert r["measured"]["default"]["steps"] > 0 and r["measured"]["policy"]["steps"] > 0
    # In memory: the same run, with no file to name.
    mem = emo.apply(emo.Policy(policy.text), pp_traces, device="emulated:h100", steps=200)
    assert mem["policy"] is None and mem["measured"] == r["measured"]
    # The runtime's measured saving is near emo evaluate's (docs/runtime.md: within 1.5 points).
    ev = emo.evaluate(policy, pp_traces, device="emulated:h100")
    measured = r["measured"]["policy"]
    assert abs(measured["saving_pct"] - ev.loc["policy", "saving_pct"]) < 1.5
    assert measured["slowdown_pct"] <= 100 * policy.max_slowdown + 0.5
    assert measured["saving_ci_pct"][0] < measured["saving_pct"] < measured["saving_ci_pct"][1]
    both = emo.apply(policy, pp_traces, steps=60, verify=True, evaluate=True)
    assert both["verify"] is True and "evaluate" in both


def test_run_writes_the_report_folder(cli, pp_traces, tmp_path):
    summary = emo.run(pp_traces, out_dir=tmp_path / "report", device="h100", steps=6)
    on_disk = json.loads((tmp_path / "report" / "summary.json").read_text())["summary"]
    assert summary == on_disk
    for name in ("summary.json", "results.csv", "packs.csv", "policy.json", "report.html"):
        assert (tmp_path / "report" / name).is_file(), name
    cli_doc = cli.json("run", *pp_traces, "--device", "h100", "--steps", "6", "-o", tmp_path / "cli_report")["summary"]
    assert without_timings(summary) == without_timings(cli_doc) | {"inputs": summary["inputs"]}
    assert emo.Policy.load(tmp_path / "report" / "policy.json") == emo.Policy.load(tmp_path / "cli_report" / "policy.json")
    assert summary["policy"]["saving_pct"] > 0


def test_refine_profile_is_the_cli_flag(cli, optimized, pp_traces):
    # The pipeline step's first policy and one of its baselines run between the plan's clocks: by default
    # both clocks are profiled too (a fifth and a sixth); refine_profile=False is --no-refine-profile, and
    # its policy says where it rests.
    _, _, refined = optimized
    assert len(refined["profiled_clocks_mhz"]) == 6
    assert not any("runs mostly at" in w for w in refined["warnings"])
    doc = cli.json("optimize", *pp_traces, "--device", "h100", "--max-slowdown", "0.05", "--no-refine-profile")
    policy = emo.optimize(pp_traces, device="h100", max_slowdown=0.05, refine_profile=False)
    assert without_timings(policy.result) == without_timings(doc)
    assert len(doc["profiled_clocks_mhz"]) == 4
    assert set(refined["profiled_clocks_mhz"]) - set(doc["profiled_clocks_mhz"])
    assert any("runs mostly at" in w and "without --no-refine-profile" in w for w in policy.warnings)


def test_a_step_missing_its_gpu_work_is_refused_as_the_cli_refuses_it(cli):
    # A HIP graph replay whose kernels the profiler mostly left out (tests/data/traces/README.md): its
    # hipStreamSynchronize blocks 29 ms after the last recorded kernel ended, 93 % of the step.
    trace = str(Path(__file__).resolve().parents[2] / "tests/data/traces/mi300x_pi0_graph_replay_partial.json.gz")
    said = [w for w in emo.analyze(trace).warnings if w.startswith("synchronize calls blocked 29.006 ms")]
    assert said and "hipStreamSynchronize" in said[0]
    with pytest.raises(emo.InputError) as e:
        emo.optimize(trace, device="h100")
    assert "93 % of its step (more than 50 %) is synchronize calls blocked" in str(e.value)
    assert "--accept-doubt" in e.value.note
    cli_run = cli.run("optimize", trace, "--device", "h100", check=False)
    assert cli_run.returncode == 1 and "93 % of its step" in cli_run.stderr
    policy = emo.optimize(trace, device="h100", check=False, accept_doubt=True)
    assert any(w.startswith("synchronize calls blocked") for w in policy.warnings)


def test_a_step_whose_first_kernel_waits_on_unrecorded_gpu_work_is_refused(cli):
    # SGLang's decode step on an MI300X (tests/data/traces/README.md): its first kernel starts 463 ms after
    # its launch while the trace shows the GPU doing nothing, 98 % of the step; no synchronize call says so.
    trace = str(Path(__file__).resolve().parents[2] / "tests/data/traces/mi300x_sglang_qwen3_decode.json.gz")
    said = [w for w in emo.analyze(trace).warnings if w.startswith("1 GPU op(s) on the critical path started 463.252 ms")]
    assert said and "hipLaunchKernel" in said[0]
    with pytest.raises(emo.InputError) as e:
        emo.optimize(trace, device="h100")
    assert "98 % of its step (more than 50 %) is GPU ops on the critical path waiting" in str(e.value)
    assert "--accept-doubt" in e.value.note
    cli_run = cli.run("optimize", trace, "--device", "h100", check=False)
    assert cli_run.returncode == 1 and "98 % of its step" in cli_run.stderr


def test_a_step_that_is_the_runs_start_up_is_refused(cli):
    # A particle-transformer forward on an A100 recorded on its first iteration (tests/data/traces/README.md):
    # its first cuDNN launch holds the host 626 ms of the 1,020 ms step while the GPU runs nothing.
    trace = str(Path(__file__).resolve().parents[2] / "tests/data/traces/a100_particle_transformer_first_forward.json.gz")
    said = [w for w in emo.analyze(trace).warnings if w.startswith("1 runtime call(s) that do not wait on the GPU")]
    assert said and "cudaLaunchKernel inside aten::cudnn_convolution" in said[0]
    with pytest.raises(emo.InputError) as e:
        emo.optimize(trace, device="h100")
    assert "61 % of its step (more than 50 %) is runtime calls that kept the host" in str(e.value)
    assert "--accept-doubt" in e.value.note
    cli_run = cli.run("optimize", trace, "--device", "h100", check=False)
    assert cli_run.returncode == 1 and "61 % of its step" in cli_run.stderr
