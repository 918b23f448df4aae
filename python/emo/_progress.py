"""progress= for the long calls: None (quiet), a callable (one line per stage), or True (a tqdm bar
when tqdm is installed, else lines on stderr)."""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Union

ProgressArg = Union[None, bool, Callable[[str], object]]


class Progress:
    """What the bindings call with each stage's line; close() ends a tqdm bar, after which a stage that
    a later call on the same result runs is not shown (a callable of the user's keeps being called)."""

    def __init__(self, progress: ProgressArg) -> None:
        self._bar: Any = None
        self._closed = False
        self._fn: Optional[Callable[[str], object]] = None
        if progress is None or progress is False:
            return
        if progress is True:
            try:
                from tqdm.auto import tqdm  # type: ignore[import-untyped]
            except ImportError:
                self._fn = lambda line: print(f"emo: {line}", file=sys.stderr, flush=True)
            else:
                self._bar = tqdm(total=None, desc="emo", unit="stage", leave=False)
                self._fn = self._tqdm_line
            return
        if not callable(progress):
            raise TypeError(f"progress must be None, a bool or a callable taking one str, not {type(progress).__name__}")
        self._fn = progress

    def _tqdm_line(self, line: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(line, refresh=False)
            self._bar.update(1)

    @property
    def callback(self) -> Optional[Callable[[str], None]]:
        """The callable to hand to the bindings (None when quiet)."""
        if self._fn is None:
            return None
        return self._call

    def _call(self, line: str) -> None:
        if not self._closed and self._fn is not None:
            self._fn(line)

    def close(self) -> None:
        if self._bar is not None:
            self._closed = True
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
