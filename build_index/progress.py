"""Progress of a long embedding run: done / total, rate and ETA, never one line per batch.

Standard library only, so the MkDocs plugin and the command line can use it
without importing anything heavy.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["LineProgress", "TerminalBar", "format_duration", "progress_line"]

Clock = Callable[[], float]


def format_duration(seconds: float) -> str:
    """``"42s"``, ``"3m 05s"``, ``"1h 02m"``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def progress_line(done: int, total: int, elapsed_s: float) -> str:
    """``embedded 1200/5000 chunks (24%), 31.5 chunks/s, ETA 2m 01s``."""
    pct = 100 * done // total if total else 100
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    line = f"embedded {done}/{total} chunks ({pct}%)"
    if done >= total:
        return f"{line} in {format_duration(elapsed_s)}, {rate:.1f} chunks/s"
    if done and rate > 0:
        return f"{line}, {rate:.1f} chunks/s, ETA {format_duration((total - done) / rate)}"
    return line


class LineProgress:
    """``progress(done, total)`` that emits one line every ``every_s`` seconds and at the end
    (and ``embedding N chunks`` first, when called with ``done == 0``).

    ``emit`` gets the finished line (for example a logger's ``info``).
    """

    def __init__(
        self,
        emit: Callable[[str], object],
        *,
        every_s: float = 5.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self.emit = emit
        self.every_s = every_s
        self.clock = clock
        self._start: float | None = None
        self._last = 0.0
        self.lines = 0

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self._start is None:
            self._start = self._last = now
            if done == 0 and total:
                self.lines += 1
                self.emit(f"embedding {total} chunks")
                return
        if done < total and now - self._last < self.every_s:
            return
        if done >= total and total == 0:
            return
        self._last = now
        self.lines += 1
        self.emit(progress_line(done, total, now - self._start))


class TerminalBar:
    """A one-line bar redrawn in place on a terminal (at most ``fps`` times a second)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        width: int = 30,
        fps: float = 4.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.min_gap = 1.0 / fps
        self.clock = clock
        self._start: float | None = None
        self._last = -1e9

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self._start is None:
            self._start = now
        if total == 0 or (done < total and now - self._last < self.min_gap):
            return
        self._last = now
        filled = self.width * done // total
        bar = "#" * filled + "-" * (self.width - filled)
        line = progress_line(done, total, now - self._start)
        end = "\n" if done >= total else ""
        self.stream.write(f"\r[{bar}] {line}\x1b[K{end}")
        self.stream.flush()
