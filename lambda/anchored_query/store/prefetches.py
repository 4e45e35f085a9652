"""The prefetches under way (``prefetch.py`` starts them): a source's first ``fetch()``
of a location waits here for the download a prefetch started."""

from __future__ import annotations

import threading
import time
from pathlib import Path

PREFETCH_LIMIT_S = 900.0  # Lambda's longest invocation

_prefetches: dict[tuple[str, Path], threading.Thread] = {}
_prefetches_lock = threading.Lock()


def started(location: str, cache_dir: Path, thread: threading.Thread) -> None:
    """Register a prefetch's ``thread`` for ``location`` in ``cache_dir`` and start it."""
    with _prefetches_lock:
        _prefetches[location, cache_dir] = thread
    thread.start()


def wait_for_prefetch(
    location: str,
    cache_dir: Path,
    timeout_s: float | None = None,
    waiter: threading.Thread | None = None,
) -> None:
    """Let a prefetch of this location finish first (it fills the cache ``fetch`` reads);
    a version of a versioned store waits for the prefetch of its store. Waits at most
    ``timeout_s`` (a prefetch S3 holds up must not hold the request's fetch past its
    limit); the fetch then goes on by itself (both write the cache safely). ``waiter``
    is the thread the fetch is for (default: this one): a prefetch's own fetch does not
    wait for the prefetch."""
    waiter = waiter if waiter is not None else threading.current_thread()
    with _prefetches_lock:
        found = [
            (key, thread)
            for key, thread in _prefetches.items()
            if (key[0], key[1]) == (location, cache_dir)
            or (location.startswith(key[0] + "/") and key[1] in cache_dir.parents)
        ]
    end = None if timeout_s is None else time.monotonic() + timeout_s
    for key, thread in found:
        if thread is not waiter:
            thread.join(None if end is None else max(0.0, end - time.monotonic()))
            if thread.is_alive():
                continue
            with _prefetches_lock:
                _prefetches.pop(key, None)
