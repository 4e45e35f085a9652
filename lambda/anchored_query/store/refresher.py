"""A check for something newer, run in the background at most every so often.

The engine's index refresh and the version router's catalog refresh both run
this way: no request waits for the check (an outage of the store can hold one
for a long time), at most one check runs at a time, and requests keep what
they have until the check has replaced it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Refresher:
    """Starts ``check`` in a daemon thread named ``name`` at most every ``every_s``.

    ``lock`` is held (never waited for) while a check is started; pass the owner's
    lock so that no check starts while the owner holds it.
    """

    def __init__(
        self,
        check: Callable[[], None],
        every_s: float,
        name: str,
        lock: threading.Lock | None = None,
    ) -> None:
        self._check = check
        self.every_s = every_s
        self.name = name
        self._lock = lock if lock is not None else threading.Lock()
        self._next = time.monotonic() + every_s
        self._thread: threading.Thread | None = None

    def postpone(self) -> None:
        """The next check is due ``every_s`` from now (what is held was just loaded)."""
        self._next = time.monotonic() + self.every_s

    def maybe_start(self) -> None:
        """Start a check when one is due and none is running; returns at once."""
        now = time.monotonic()
        if now < self._next or not self._lock.acquire(blocking=False):
            return
        try:
            if self._thread is not None and self._thread.is_alive():
                return
            self._next = now + self.every_s
            self._thread = threading.Thread(target=self._check, name=self.name, daemon=True)
            self._thread.start()
        finally:
            self._lock.release()

    def wait(self, timeout_s: float) -> bool:
        """Wait for a check in progress (tests, tools); True when none is running."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            return not thread.is_alive()
        return True
