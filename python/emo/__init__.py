"""EMO from Python: energy modeling and optimization of GPU workloads from their own PyTorch profiler
(Kineto) traces, over the same C++ library as the `emo` command.

    import emo
    a = emo.analyze(["rank0.json", "rank1.json"])
    a.kernels                                 # DataFrame: every GPU op with its slack
    policy = emo.optimize(a_paths, device="h100", max_slowdown=0.05)
    policy.save("policy.json")                # what `emo optimize -o` writes
    emo.apply(policy, a_paths, device="emulated:h100")["measured"]

docs/python.md has the reference; emo.monitor measures GPU energy over windows of a job.
"""

from . import _emo
from ._api import (
    POLICY_SCHEMA,
    Analysis,
    Packing,
    Policy,
    analyze,
    apply,
    deprofile,
    evaluate,
    optimize,
    pack,
    run,
    synth,
    whatif,
)
from ._errors import DeviceError, Error, InputError, OptionError
from . import monitor
from .monitor import Measurement, Monitor

__version__: str = _emo.version

__all__ = [
    "__version__",
    "Analysis", "Packing", "Policy", "POLICY_SCHEMA",
    "analyze", "whatif", "pack", "optimize", "evaluate", "apply", "run", "synth", "deprofile",
    "Error", "InputError", "OptionError", "DeviceError",
    "monitor", "Monitor", "Measurement",
]
