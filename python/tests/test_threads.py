"""Long calls release the GIL; progress= gets one line per stage (a callable, tqdm, or stderr)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

import emo


def test_gil_is_released_during_a_long_call(pp_traces):
    stamps: list[float] = []
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.001)

    windows: list[tuple[float, float]] = []
    t = threading.Thread(target=count)
    t.start()
    try:
        # Calls until 0.5 s were spent inside them (one is enough on a slow machine).
        while sum(b - a for a, b in windows) < 0.5 and len(windows) < 50:
            t0 = time.perf_counter()
            emo.optimize(pp_traces, device="h100")
            windows.append((t0, time.perf_counter()))
    finally:
        stop.set()
        t.join()
    # The middle of each call, away from its returns to Python (argument conversion, results).
    margin = 0.02
    inside = sum(1 for s in stamps for a, b in windows if a + margin < s < b - margin)
    span = sum(max(0.0, b - a - 2 * margin) for a, b in windows)
    # A thread waking every ms gets in ~1000 times a second when the calls do not hold the GIL; calls
    # holding it would let it in only at their few returns to Python.
    assert span > 0.2, windows
    assert inside > 150 * span, (inside, span)


def test_two_threads_share_one_result(dp_traces):
    a = emo.analyze(dp_traces)
    out: list = [None, None]

    def work(i: int) -> None:
        out[i] = a.whatif({"gemm": 1.1 + i})

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert out[0]["predicted_span_us"] < out[1]["predicted_span_us"]


def test_progress_callback_gets_each_stage(pp_traces):
    lines: list[str] = []
    threads: set[int] = set()

    def on_line(line: str) -> None:
        lines.append(line)
        threads.add(threading.get_ident())

    emo.optimize(pp_traces, device="h100", progress=on_line)
    assert len(lines) >= 4, lines
    assert any("loading" in l for l in lines) and any("pack" in l for l in lines)
    assert threads == {threading.get_ident()}  # called on the caller's thread, with the GIL
    lines.clear()
    emo.run(pp_traces, out_dir=str(pp_traces[0]) + ".report", steps=4, progress=on_line)
    assert len(lines) >= 4


def test_progress_callback_exception_propagates(pp_traces):
    def boom(line: str) -> None:
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        emo.optimize(pp_traces, device="h100", check=False, progress=boom)


def test_progress_true_without_tqdm_writes_stderr(pp_traces, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm fails
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    emo.analyze(pp_traces, progress=True)
    err = capsys.readouterr().err
    assert err.startswith("emo: loading"), err


def test_progress_true_with_tqdm(pp_traces, capsys):
    pytest.importorskip("tqdm")
    emo.pack(pp_traces, progress=True)
    err = capsys.readouterr().err
    assert "emo" in err


def test_bad_progress_argument(pp_traces):
    with pytest.raises(TypeError):
        emo.analyze(pp_traces, progress="yes")  # type: ignore[arg-type]
