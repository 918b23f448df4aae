"""emo.monitor over the library's NVML backend, against the stand-in libnvidia-ml.so.1: the energy
counter grows at 90 W + 310 W·(f/1980)² (tests/nvml_standin/nvml_standin.cpp), so a window's energy
grows with its length, and faster at a higher locked clock. Each test runs in a child process with the
stand-in first on LD_LIBRARY_PATH, as a job would find the driver's library."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
import textwrap

import pytest


def watts(mhz: float) -> float:
    return 90 + 310 * (mhz / 1980) ** 2


def run_child(code: str, env_extra: dict[str, str]) -> dict:
    env = dict(os.environ)
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


CHILD = """
    import ctypes, json, time
    import emo
    from emo.monitor import Monitor

    mon = Monitor(gpus=[0, 1])
    out = {"names": mon.names, "gpus": mon.gpus}
    # The stand-in the backend loaded (dlopen by soname finds the same one), to lock a clock as a
    # clock daemon would.
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    assert nvml.nvmlInit_v2() == 0
    def lock(index, mhz):
        h = ctypes.c_void_p()
        assert nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(h)) == 0
        assert nvml.nvmlDeviceSetGpuLockedClocks(h, mhz, mhz) == 0

    mon.begin_window("short")
    mon.begin_window("long")
    time.sleep(0.2)
    short = mon.end_window("short")
    time.sleep(0.2)
    long = mon.end_window("long")
    lock(1, 990)
    with mon.window("locked") as m:
        time.sleep(0.3)
    locked = m[0]
    errors = []
    for f in (lambda: mon.end_window("nope"), lambda: (mon.begin_window("x"), mon.begin_window("x"))):
        try:
            f()
        except emo.Error as e:
            errors.append(type(e).__name__)
    t, counters = mon.read()
    out.update(short=[short.time, short.gpu_energy], long=[long.time, long.gpu_energy],
               locked=[locked.time, locked.gpu_energy], total=locked.total_energy, errors=errors,
               counters=counters, open=mon.open_windows)
    print(json.dumps(out))
"""


def test_windows_measure_time_and_energy_per_gpu(nvml_standin):
    r = run_child(CHILD, {"LD_LIBRARY_PATH": nvml_standin, "EMO_NVML_STANDIN_GPUS": "2"})
    assert r["gpus"] == [0, 1] and r["names"] == ["NVIDIA H100 80GB HBM3"] * 2
    (ts, es), (tl, el), (tk, ek) = r["short"], r["long"], r["locked"]
    assert 0.19 < ts < tl and tl > 0.39
    for g in ("0", "1"):
        # Energy grows over a window: a longer one holds more, at the default clock's 400 W.
        assert 0 < es[g] < el[g]
        assert es[g] / ts == pytest.approx(watts(1980), rel=0.05)
        assert el[g] / tl == pytest.approx(watts(1980), rel=0.05)
    # GPU 1 locked at 990 MHz draws less than GPU 0 at the default 1980 MHz, as the stand-in says.
    assert ek["1"] / tk == pytest.approx(watts(990), rel=0.05)
    assert ek["0"] / tk == pytest.approx(watts(1980), rel=0.05)
    assert ek["0"] > 2 * ek["1"]
    assert r["total"] == pytest.approx(ek["0"] + ek["1"])
    assert r["errors"] == ["Error", "Error"]
    assert r["open"] == ["x"]
    assert r["counters"]["0"] > r["counters"]["1"] > 0


def test_no_nvml_is_a_device_error(tmp_path):
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("this machine has a libnvidia-ml: the error path needs one without")
    r = run_child("""
        import json, emo
        from emo.monitor import Monitor
        try:
            Monitor(gpus=[0])
        except emo.DeviceError as e:
            print(json.dumps({"where": e.where, "what": e.what, "note": e.note}))
    """, {"LD_LIBRARY_PATH": str(tmp_path)})
    assert r["where"] == "nvml:0"
    assert "libnvidia-ml.so.1" in r["what"] and "emulated" in r["note"]


def test_bad_arguments():
    import emo
    from emo.monitor import Measurement, Monitor

    with pytest.raises(emo.DeviceError):
        Monitor(device="emulated:h100")
    with pytest.raises(emo.DeviceError):
        Monitor(gpus=[])
    m = Measurement(2.0, {0: 100.0, 1: 50.0})
    assert m.total_energy == 150.0 and m.power == {0: 50.0, 1: 25.0}
