"""The errors EMO raises: each carries the library's Error (where, what, note) as attributes."""

from __future__ import annotations

import os

__all__ = ["Error", "InputError", "OptionError", "DeviceError"]


class Error(Exception):
    """Something EMO could not do, as the CLI says it: ``where: what`` and, maybe, a note naming the fix.

    Attributes:
        where: where it happened, as the library names it: a file (``trace.json``), a place in one
            (``trace.json:event 12``), a CLI flag (``--max-slowdown``) or a device (``--device nvml:0``);
            may be empty.
        what: what went wrong, one line.
        note: the fix, when the library knows one (may be empty).
        file: the file ``where`` names, or None.
        option: the keyword argument ``where`` names (``max_slowdown``), or None.
    """

    def __init__(self, what: str, *, where: str = "", note: str = "", file: str | None = None,
                 option: str | None = None) -> None:
        self.where = where
        self.what = what
        self.note = note
        self.file = file
        self.option = option
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """``where: what``, or ``what`` alone: the CLI's ``error:`` line."""
        return f"{self.where}: {self.what}" if self.where else self.what

    def __str__(self) -> str:
        return self.message + (f"\nnote: {self.note}" if self.note else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(what={self.what!r}, where={self.where!r}, note={self.note!r})"

    def __reduce__(self):  # picklable (multiprocessing), attributes included
        return (_rebuild, (type(self), self.what, self.where, self.note, self.file, self.option))


class InputError(Error):
    """Bad input: a trace, policy, profile or folder that is missing, unreadable or malformed, or that
    does not fit the others (a policy made for another step or device)."""


class OptionError(InputError):
    """An argument out of range or in conflict with another (``option`` names it)."""


class DeviceError(Error):
    """A device that cannot be named, opened or used for what was asked (``--device`` in the CLI)."""


def _rebuild(cls, what, where, note, file, option):
    return cls(what, where=where, note=note, file=file, option=option)


# CLI flags (the library's `where` for options) and the keyword arguments that carry them.
_OPTION_NAMES = {
    "-o": "out_dir",
    "--output": "out_dir",
    "--profiled": "profiled_dir",
    "--scale": "scales",
    "--steps": "steps",
}
_DEVICE_FLAGS = {"--device": "device", "--profile-on": "profile_on"}


def _file_of(where: str) -> str | None:
    """The file that `where` names: itself or the longest part before a ':' that exists, else the part
    before the first ':' when it looks like a path (a missing file); None for a stage name ("pack")."""
    if not where:
        return None
    if os.path.exists(where):
        return where
    cut = where.rfind(":")
    while cut > 0:
        if os.path.exists(where[:cut]):
            return where[:cut]
        cut = where.rfind(":", 0, cut)
    head = where.split(":", 1)[0]
    looks_like_path = os.sep in head or os.path.splitext(head)[1] != "" or head.endswith(".gz")
    return head if head and " " not in head and looks_like_path else None


def _from_core(where: str, what: str, note: str, opening: bool = False) -> Error:
    """The exception for an emo::Error (called by the bindings); `opening`: it came from opening the
    devices (a profile name or file, an emulated GPU, NVML)."""
    if opening and not where.startswith("-"):
        return DeviceError(what, where=where, note=note, option="device", file=_file_of(where) if os.path.exists(where) else None)
    if where.startswith("-"):
        flag = where.split(" ", 1)[0]
        if flag in _DEVICE_FLAGS:
            return DeviceError(what, where=where, note=note, option=_DEVICE_FLAGS[flag])
        option = _OPTION_NAMES.get(flag, flag.lstrip("-").replace("-", "_"))
        return OptionError(what, where=where, note=note, option=option)
    if where.startswith(("nvml:", "emulated:")):
        return DeviceError(what, where=where, note=note)
    return InputError(what, where=where, note=note, file=_file_of(where))
