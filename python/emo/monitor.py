"""Measurement windows for people who only want to measure (as Zeus's ZeusMonitor): time and GPU
energy between begin_window(name) and end_window(name), read from each GPU's NVML energy counter
through the library's NVML backend (libnvidia-ml.so.1, loaded when the Monitor opens its GPUs).

    from emo.monitor import Monitor
    mon = Monitor(gpus=[0])
    mon.begin_window("epoch")
    train_one_epoch()
    m = mon.end_window("epoch")
    print(m.time, m.gpu_energy[0], m.total_energy)

Reading the counter needs no privileges. On hardware it updates every 10–100 ms, so windows much
shorter than that measure little; measure whole steps or epochs.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from . import _emo
from ._errors import DeviceError, Error

__all__ = ["Measurement", "Monitor"]


@dataclass(frozen=True)
class Measurement:
    """One window: `time` in seconds, `gpu_energy` in joules per GPU index."""

    time: float
    gpu_energy: Dict[int, float] = field(default_factory=dict)

    @property
    def total_energy(self) -> float:
        """Joules over all the monitor's GPUs."""
        return float(sum(self.gpu_energy.values()))

    @property
    def power(self) -> Dict[int, float]:
        """Mean watts per GPU over the window."""
        return {g: (e / self.time if self.time > 0 else 0.0) for g, e in self.gpu_energy.items()}


class Monitor:
    """Opens `gpus` (NVML indices, as nvidia-smi numbers them; default [0]) once; windows are named,
    may overlap and nest, and each name may be open once at a time.

    `device` is "nvml" (the only backend that measures real time; an emulated GPU runs in virtual
    time and is measured by emo.evaluate / emo.apply instead). Raises emo.DeviceError when NVML or a
    GPU cannot be opened."""

    def __init__(self, gpus: Optional[Sequence[int]] = None, device: str = "nvml") -> None:
        if device not in ("nvml", "nvml:auto"):
            raise DeviceError(f"the monitor reads NVML's energy counters; got {device!r}", where="device",
                              option="device", note='use device="nvml" (emulated GPUs are measured by emo.evaluate and emo.apply)')
        indices = [0] if gpus is None else [int(g) for g in gpus]
        if not indices:
            raise DeviceError("no GPUs to monitor", where="gpus", option="gpus", note="e.g. Monitor(gpus=[0])")
        if len(set(indices)) != len(indices):
            raise DeviceError(f"GPU indices repeat: {indices}", where="gpus", option="gpus")
        self._meter = _emo.EnergyMeter(indices)
        self._open: Dict[str, Tuple[float, List[float]]] = {}

    @property
    def gpus(self) -> List[int]:
        return list(self._meter.indices)

    @property
    def names(self) -> List[str]:
        """Each GPU's product name, as NVML reports it."""
        return list(self._meter.names)

    def read(self) -> Tuple[float, Dict[int, float]]:
        """(monotonic seconds, cumulative joules per GPU) now: the counters themselves."""
        t, joules = self._meter.read()
        return t, dict(zip(self._meter.indices, joules))

    def begin_window(self, name: str) -> None:
        if name in self._open:
            raise Error(f"window {name!r} is already open", where="begin_window",
                        note="end it with end_window first, or use another name")
        self._open[name] = self._meter.read()

    def end_window(self, name: str, cancel: bool = False) -> Measurement:
        """Closes the window: the time and the energy per GPU since its begin_window. With
        cancel=True the window is dropped and an empty measurement is returned."""
        if name not in self._open:
            raise Error(f"window {name!r} is not open", where="end_window", note="call begin_window(name) first")
        t0, e0 = self._open.pop(name)
        if cancel:
            return Measurement(0.0, {})
        t1, e1 = self._meter.read()
        return Measurement(t1 - t0, {g: b - a for g, a, b in zip(self._meter.indices, e0, e1)})

    @contextlib.contextmanager
    def window(self, name: str) -> Iterator[List[Measurement]]:
        """``with mon.window("step") as m: ...``; afterwards ``m[0]`` is the Measurement."""
        out: List[Measurement] = []
        self.begin_window(name)
        try:
            yield out
        except BaseException:
            self.end_window(name, cancel=True)
            raise
        out.append(self.end_window(name))

    @property
    def open_windows(self) -> List[str]:
        return list(self._open)
