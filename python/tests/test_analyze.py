"""emo.analyze / emo.whatif against `emo analyze --json` and its CSVs on the same traces."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import emo

KERNEL_COLUMNS = ["rank", "index", "name", "stream", "start_us", "dur_us", "slack_us", "on_critical_path"]


def check_against_cli(cli, paths: list[str], tmp_path, step: int | None = None) -> emo.Analysis:
    a = emo.analyze(paths, step=step)
    step_args = [] if step is None else ["--step", str(step)]
    doc = cli.json("analyze", *paths, *step_args)
    assert a.to_json() == doc
    per_kernel = cli.json("analyze", *paths, *step_args, "--per-kernel")
    assert a.to_json(per_kernel=True) == per_kernel

    k = a.kernels
    assert list(k.columns[: len(KERNEL_COLUMNS)]) == KERNEL_COLUMNS
    # Row for row the --per-kernel list.
    ref = pd.DataFrame(per_kernel["kernels"])
    assert len(k) == len(ref) == doc["slack"]["gpu_ops"]
    assert (k["name"].astype(str).to_numpy() == ref["name"].to_numpy()).all()
    for col in ("rank", "stream"):
        assert (k[col].to_numpy() == ref[col].to_numpy()).all(), col
    for col in ("start_us", "dur_us", "slack_us"):
        np.testing.assert_allclose(k[col].to_numpy(), ref[col].to_numpy(), rtol=0, atol=1e-9, err_msg=col)
    # The two counts the JSON gives: ops on the extracted path, ops with no slack.
    assert int(k["on_critical_path"].sum()) == doc["critical_path"]["gpu_ops_on_path"]
    assert int((k["slack_us"] == 0).sum()) == doc["slack"]["gpu_ops_with_no_slack"]
    # index: each rank's ops numbered 0..n-1 by start time, ties by stream (the policy file's numbering).
    for _, g in k.groupby("rank"):
        assert sorted(g["index"]) == list(range(len(g)))
        ordered = g.sort_values("index")
        assert (np.diff(ordered["start_us"].to_numpy()) >= 0).all()

    # The CSVs the CLI writes.
    csv_path = tmp_path / "kernels.csv"
    cli.run("analyze", *paths, *step_args, "--kernels-csv", csv_path)
    csv = pd.read_csv(csv_path)
    assert len(csv) == len(k)
    np.testing.assert_allclose(k["slack_us"], csv["slack_us"], atol=1e-3)
    assert ((k["slack_us"] == 0).astype(int).to_numpy() == csv["critical"].to_numpy()).all()
    path_csv = tmp_path / "path.csv"
    cli.run("analyze", *paths, *step_args, "--critical-path-csv", path_csv)
    pcsv = pd.read_csv(path_csv, keep_default_na=False)
    cp = a.critical_path
    assert len(cp) == len(pcsv)
    assert (cp["segment"].astype(str).to_numpy() == pcsv["segment"].to_numpy()).all()
    assert (cp["kind"].astype(str).to_numpy() == pcsv["kind"].to_numpy()).all()
    assert (cp["name"].astype(str).to_numpy() == pcsv["name"].to_numpy()).all()
    np.testing.assert_allclose(cp["dur_us"], pcsv["dur_us"], atol=1e-3)

    # Breakdown and spans as in the document; the breakdown adds up to the path.
    assert a.breakdown == doc["critical_path"]["breakdown"]
    assert sum(a.breakdown.values()) == pytest.approx(a.critical_path_us, abs=0.01)
    assert a.measured_span_us == doc["measured_span_us"]
    assert a.replay_error_pct == doc["replay_error_pct"]
    assert a.gpus.to_dict("records") == doc["gpus"]
    return a


def test_synthetic_step_agrees_with_cli(cli, dp_traces, tmp_path):
    a = check_against_cli(cli, dp_traces, tmp_path)
    assert a.kernels["rank"].nunique() == 2
    assert a.kernels["on_critical_path"].any()
    assert a.warnings == []
    assert "rank(s)" in repr(a)


def test_step_option_agrees_with_cli(cli, dp_traces, tmp_path):
    last = emo.analyze(dp_traces).to_json()["ranks"][0]["step"]
    a = check_against_cli(cli, dp_traces, tmp_path, step=last - 1)
    assert a.to_json()["ranks"][0]["step"] == last - 1


def test_synth_writes_what_the_cli_writes(cli, tmp_path):
    files = emo.synth("train-tp", tmp_path / "py", ranks=2, layers=1)
    cli.run("synth", "train-tp", "--ranks", "2", "--layers", "1", "-o", tmp_path / "cli")
    assert len(files) == 2
    for f in files:
        name = f.rsplit("/", 1)[-1]
        assert Path(f).read_bytes() == (tmp_path / "cli" / name).read_bytes()


def test_hta_simple_add_agrees_with_cli(cli, hta_simple_add, tmp_path):
    a = check_against_cli(cli, [hta_simple_add], tmp_path)
    # tests/unit/real_traces_test.cpp: 15 GPU ops on the path, the last sgemm has slack.
    assert int(a.kernels["on_critical_path"].sum()) == 15
    sgemm = a.kernels[a.kernels["name"] == "ampere_sgemm_32x32_sliced1x4_tn"]
    assert sgemm["slack_us"].iloc[-1] > 200


def test_resnet50_agrees_with_cli(cli, resnet50, tmp_path):
    a = check_against_cli(cli, [resnet50], tmp_path)
    assert len(a.kernels) > 1000


def test_whatif_agrees_with_cli(cli, dp_traces):
    doc = cli.json("whatif", *dp_traces, "--scale", "gemm=1.5", "--scale", "cat:nccl=2")
    assert emo.whatif(dp_traces, {"gemm": 1.5, "cat:nccl": 2}) == doc
    assert emo.whatif(dp_traces, ["gemm=1.5", "cat:nccl=2"]) == doc
    assert emo.analyze(dp_traces).whatif(["gemm=1.5", "cat:nccl=2"]) == doc
    assert doc["predicted_span_us"] > doc["baseline_span_us"]


def test_kernels_frame_is_usable(dp_traces):
    k = emo.analyze(dp_traces).kernels
    # Names are categorical (one copy per distinct name) and compare as strings.
    assert isinstance(k["name"].dtype, pd.CategoricalDtype)
    slack_by_kind = k.groupby("kind", observed=True)["slack_us"].sum()
    assert set(slack_by_kind.index) <= {"kernel", "comm_kernel", "memcpy", "memset"}
    assert k["on_critical_path"].dtype == bool
    assert k["rank"].dtype == np.int64 and k["start_us"].dtype == np.float64
    buf = io.StringIO()
    k.to_csv(buf)  # plain pandas from here on
    assert buf.getvalue().count("\n") == len(k) + 1


def test_a_folder_reads_as_its_rank_files(cli, dp_traces, tmp_path):
    # HTA's TraceAnalysis(trace_dir=...): the folder's .json/.json.gz files, other names left out.
    folder = Path(dp_traces[0]).parent
    assert emo.analyze(folder).to_json() == emo.analyze(dp_traces).to_json()
    assert emo.analyze(str(folder)).to_json() == cli.json("analyze", folder)
    (tmp_path / "README.txt").write_text("not a trace")
    with pytest.raises(emo.InputError, match="no trace files in this folder") as e:
        emo.analyze(tmp_path)
    assert e.value.file == str(tmp_path)
