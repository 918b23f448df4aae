"""Fixtures of the Python package's tests: synthetic traces (emo.synth), the `emo` command to compare
with (EMO_CLI, else build/tools/emo/emo), the real traces of ../shared (skipped when absent) and the
stand-in libnvidia-ml.so.1 (EMO_NVML_STANDIN_DIR, else the build's, else compiled here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import emo

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("EMO_SHARED_DIR", REPO.parent / "shared"))


def _cli_path() -> str | None:
    env = os.environ.get("EMO_CLI")
    if env:
        return str(Path(env).resolve())
    for p in (REPO / "build" / "tools" / "emo" / "emo",):
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return shutil.which("emo")


class Cli:
    """The `emo` command: run(args) -> CompletedProcess; json(args) -> its --json document."""

    def __init__(self, path: str) -> None:
        self.path = path

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run([self.path, *map(str, args)], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError(f"emo {' '.join(map(str, args))} exited {r.returncode}:\n{r.stderr}")
        return r

    def json(self, *args: str) -> dict:
        return json.loads(self.run(*args, "--json", "-").stdout)


@pytest.fixture(scope="session")
def cli() -> Cli:
    p = _cli_path()
    if not p:
        pytest.skip("the emo command is not built (set EMO_CLI, or build build/tools/emo/emo): "
                    "the comparisons with the CLI need it")
    return Cli(p)


@pytest.fixture(scope="session")
def dp_traces(tmp_path_factory) -> list[str]:
    """A small data-parallel training step, 2 ranks (emo synth train-dp --ranks 2 --layers 2)."""
    return emo.synth("train-dp", tmp_path_factory.mktemp("train-dp"), ranks=2, layers=2)


@pytest.fixture(scope="session")
def pp_traces(tmp_path_factory) -> list[str]:
    """A small pipeline step with bubbles, 2 ranks (emo synth train-pp --ranks 2 --layers 2 --microbatches 4)."""
    return emo.synth("train-pp", tmp_path_factory.mktemp("train-pp"), ranks=2, layers=2, microbatches=4)


def shared_file(rel: str) -> str:
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"{p} is absent: the real traces live in ../shared beside the checkout")
    return str(p)


@pytest.fixture(scope="session")
def hta_simple_add() -> str:
    """HTA's simple_add trace (the one tests/unit/real_traces_test.cpp checks the critical path on)."""
    return shared_file("traces/hta/tests/data/critical_path/end_to_end/simple_add/input/trace.json.gz")


@pytest.fixture(scope="session")
def resnet50() -> str:
    return shared_file("traces/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz")


@pytest.fixture(scope="session")
def nvml_standin(tmp_path_factory) -> str:
    """The folder holding the stand-in libnvidia-ml.so.1 (tests/nvml_standin/nvml_standin.cpp)."""
    env = os.environ.get("EMO_NVML_STANDIN_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(REPO / "build" / "tests" / "nvml_standin")
    for d in candidates:
        if (d / "libnvidia-ml.so.1").is_file():
            return str(d.resolve())
    src = REPO / "tests" / "nvml_standin" / "nvml_standin.cpp"
    cxx = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if not src.is_file() or not cxx:
        pytest.skip("no stand-in libnvidia-ml.so.1: build the C++ tests, or install a C++ compiler")
    out = tmp_path_factory.mktemp("nvml_standin")
    subprocess.run([cxx, "-std=c++20", "-O1", "-shared", "-fPIC", "-o", str(out / "libnvidia-ml.so.1"),
                    "-Wl,-soname,libnvidia-ml.so.1", str(src), "-pthread"], check=True)
    return str(out)
