"""Errors: emo.Error subclasses carrying file / where / what / note, as the CLI's error: and note: lines."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import pytest

import emo


def cli_error(cli, *args) -> tuple[str, str]:
    """The CLI's `error:` and `note:` lines for a command that fails with exit status 1."""
    r = cli.run(*args, check=False)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    error = next(l[len("error: "):] for l in lines if l.startswith("error: "))
    note = next((l[len("note: "):] for l in lines if l.startswith("note: ")), "")
    return error, note


def test_missing_file(cli, tmp_path):
    path = str(tmp_path / "missing.json")
    with pytest.raises(emo.InputError) as e:
        emo.analyze([path])
    err = e.value
    assert isinstance(err, emo.Error)
    assert err.file == path and err.where == path
    assert err.what
    assert (err.message, err.note) == cli_error(cli, "analyze", path)
    assert str(err).startswith(f"{path}: ")


def test_corrupt_trace(cli, dp_traces, tmp_path):
    text = Path(dp_traces[0]).read_bytes()
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(text[: len(text) // 2])
    with pytest.raises(emo.InputError) as e:
        emo.analyze([str(truncated)])
    assert e.value.file == str(truncated)
    assert e.value.what
    assert (e.value.message, e.value.note) == cli_error(cli, "analyze", truncated)

    # Not a trace at all, and a gzip file whose inside is not JSON.
    for name, data in (("not_a_trace.json", b'{"hello": 1}'), ("bad.json.gz", gzip.compress(b"\x00not json"))):
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(emo.InputError) as e:
            emo.analyze(str(p))
        assert e.value.file == str(p)
        assert (e.value.message, e.value.note) == cli_error(cli, "analyze", p)


def test_bad_options(dp_traces):
    with pytest.raises(emo.OptionError) as e:
        emo.optimize(dp_traces, max_slowdown=2)
    assert e.value.option == "max_slowdown" and e.value.where == "--max-slowdown" and e.value.note
    assert isinstance(e.value, emo.InputError)
    with pytest.raises(emo.OptionError) as e:
        emo.analyze(dp_traces, step=-1)
    assert e.value.option == "step"
    with pytest.raises(emo.InputError):
        emo.analyze(dp_traces, step=999)  # no such ProfilerStep
    with pytest.raises(emo.OptionError) as e:
        emo.pack(dp_traces, critical_slack_us=-1)
    assert e.value.option == "critical_slack_us"
    with pytest.raises(emo.Error) as e:
        emo.whatif(dp_traces, {"no_such_kernel_anywhere": 2})
    assert e.value.what


def test_bad_devices(dp_traces):
    with pytest.raises(emo.DeviceError) as e:
        emo.pack(dp_traces, device="no-such-gpu")
    assert e.value.option == "device" and e.value.what
    with pytest.raises(emo.DeviceError):
        emo.pack(dp_traces, device="emulated:")
    policy = emo.optimize(dp_traces, check=False)
    with pytest.raises(emo.DeviceError) as e:
        emo.evaluate(policy, dp_traces, device="h100")
    assert "emulated" in e.value.note
    with pytest.raises(emo.DeviceError):
        emo.apply(policy, dp_traces, device="h100", steps=8)


def test_policy_files(tmp_path, dp_traces, pp_traces):
    missing = tmp_path / "nope.json"
    with pytest.raises(emo.InputError) as e:
        emo.Policy.load(missing)
    assert e.value.file == str(missing)
    p = tmp_path / "other.json"
    p.write_text('{"schema": "something/2"}')
    with pytest.raises(emo.InputError) as e:
        emo.Policy.load(p)
    assert e.value.file == str(p) and "emo-policy/1" in e.value.what
    p.write_text("{not json")
    with pytest.raises(emo.InputError):
        emo.Policy.load(p)
    # A policy for another step is refused by the library's own check, naming the policy file.
    policy = emo.optimize(dp_traces, check=False)
    policy.save(tmp_path / "dp.json")
    with pytest.raises(emo.InputError) as e:
        emo.evaluate(tmp_path / "dp.json", pp_traces)
    assert e.value.file == str(tmp_path / "dp.json")


def test_errors_pickle_and_print():
    e = emo.InputError("cannot open", where="x.json:event 3", note="check it", file="x.json")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is emo.InputError
    assert (back.what, back.where, back.note, back.file) == ("cannot open", "x.json:event 3", "check it", "x.json")
    assert str(e) == "x.json:event 3: cannot open\nnote: check it"


def test_cpu_ops_as_kernels_reaches_the_library(cli, dp_traces):
    # A GPU trace cannot stand in for itself: the library's own error, as the CLI gives it.
    with pytest.raises(emo.InputError) as e:
        emo.analyze(dp_traces, cpu_ops_as_kernels=True)
    assert (e.value.message, e.value.note) == cli_error(cli, "analyze", *dp_traces, "--cpu-ops-as-kernels")


def test_a_stage_is_not_a_file(tmp_path):
    from emo._errors import _from_core

    e = _from_core("pack", "the step has no GPU operations to pack", "")
    assert type(e) is emo.InputError and e.file is None
    e = _from_core(str(tmp_path / "gone.json") + ":event 3", "bad event", "")
    assert e.file == str(tmp_path / "gone.json")
    assert _from_core("relative.json.gz", "cannot read", "").file == "relative.json.gz"
    assert type(_from_core("nvml:1", "no such GPU", "")) is emo.DeviceError
