"""A cold start's head start: the Lambda handler calls :func:`prefetch` before
importing the app, so an S3 index downloads while the imports run, and the first
``fetch()`` of the same location waits for it and finds the build in the cache."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anchored_query.s3_source import S3IndexSource

log = logging.getLogger("anchored_query.index_store")


PREFETCH_LIMIT_S = 900.0  # Lambda's longest invocation

_prefetches: dict[tuple[str, Path], threading.Thread] = {}
_prefetches_lock = threading.Lock()


def prefetch(location: str, *, cache_dir: str | Path = "/tmp/anchored") -> bool:
    """Start copying an ``s3://`` index into ``cache_dir`` in a background thread.

    Returns False (and does nothing) for a local location. The S3 client is
    made here, in the calling thread, so the thread imports nothing while the
    caller goes on importing. A failure is only logged: the first ``fetch()``
    of the location waits for the prefetch, then fetches again and reports it.
    """
    if not location.startswith("s3://"):
        return False
    from anchored_query.index_store import NOT_PUBLISHED, IndexStoreError
    from anchored_query.s3_source import S3IndexSource
    from build_index.publish import S3Location

    # No request waits on the prefetch itself, only on the download it started: give it
    # a whole invocation's time, so that it does not give up at a request's limit while
    # its download goes on, and a request's fetch start a second download beside it.
    source = S3IndexSource(
        S3Location.parse(location), cache_dir=Path(cache_dir), time_limit_s=PREFETCH_LIMIT_S
    )
    _ = source.client

    def run() -> None:
        try:
            try:
                source.fetch()
            except IndexStoreError as exc:
                if exc.public != NOT_PUBLISHED:
                    raise
                _prefetch_default_version(source)  # a versioned store (versions.json)?
        except Exception as exc:  # reported by the request's own fetch
            log.info("index prefetch failed: %s", exc)

    thread = threading.Thread(target=run, name="anchored-index-prefetch", daemon=True)
    with _prefetches_lock:
        _prefetches[source.location, Path(cache_dir)] = thread
    thread.start()
    return True


def _prefetch_default_version(root: S3IndexSource) -> None:
    """Fetch the default version of a versioned store into ``<cache>/versions/<version>``,
    where that version's engine looks (anchored_query.versions); nothing without a catalog."""
    from anchored_query.s3_source import S3IndexSource
    from build_index.publish import S3Location
    from build_index.versions import VERSIONS, read_catalog_s3, version_location

    catalog, _, _ = read_catalog_s3(root.client, root.loc)
    version = catalog.resolve(None) if catalog is not None else None
    if version is None:
        return
    location = version_location(root.location, version)
    S3IndexSource(
        S3Location.parse(location),
        cache_dir=root.cache_dir / VERSIONS / version,
        client=root.client,
        time_limit_s=PREFETCH_LIMIT_S,
    ).fetch()


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
