"""A cold start's head start: the Lambda handler calls :func:`prefetch` before
importing the app, so an S3 index downloads while the imports run, and the first
``fetch()`` of the same location waits for it and finds the build in the cache."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from anchored_query.store.prefetches import PREFETCH_LIMIT_S, started
from anchored_query.store.s3_source import S3IndexSource
from anchored_query.store.source import NOT_PUBLISHED, IndexStoreError
from build_index.publish import S3Location
from build_index.versions import VERSIONS, read_catalog_s3, version_location

log = logging.getLogger("anchored_query.store.source")


def prefetch(location: str, *, cache_dir: str | Path = "/tmp/anchored") -> bool:
    """Start copying an ``s3://`` index into ``cache_dir`` in a background thread.

    Returns False (and does nothing) for a local location. The S3 client is
    made here, in the calling thread, so the thread imports nothing while the
    caller goes on importing. A failure is only logged: the first ``fetch()``
    of the location waits for the prefetch, then fetches again and reports it.
    """
    if not location.startswith("s3://"):
        return False
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
    started(source.location, Path(cache_dir), thread)
    return True


def _prefetch_default_version(root: S3IndexSource) -> None:
    """Fetch the default version of a versioned store into ``<cache>/versions/<version>``,
    where that version's engine looks (anchored_query.store.versions); nothing without a catalog."""
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
