"""Which source reads an index location: a local folder (``local_source.py``) or
``s3://bucket/prefix`` (``s3_source.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from anchored_query.store.local_source import LocalIndexSource
from anchored_query.store.s3_source import S3IndexSource
from anchored_query.store.source import DEFAULT_TIME_LIMIT_S, IndexSource, IndexStoreError
from build_index.publish import S3Location

if TYPE_CHECKING:
    from build_index.publish import S3Client


def source_for(
    location: str | Path,
    *,
    cache_dir: str | Path = "/tmp/anchored",
    refresh_s: float = 60.0,
    client: S3Client | None = None,
    endpoint_url: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> IndexSource:
    """A source for a local path, a ``file://`` URL or ``s3://bucket/prefix``.

    ``time_limit_s``: the longest a fetch from S3 waits (and what its client's
    timeouts are sized to); a local folder is read without one."""
    text = str(location)
    if text.startswith("s3://"):
        return S3IndexSource(
            S3Location.parse(text),
            cache_dir=Path(cache_dir),
            refresh_s=refresh_s,
            client=client,
            endpoint_url=endpoint_url,
            clock=clock,
            time_limit_s=time_limit_s,
        )
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif "://" in text:
        raise IndexStoreError(
            f"unsupported index location {text!r}: use a directory, file:// or s3://"
        )
    return LocalIndexSource(Path(text), refresh_s=refresh_s, clock=clock, cache_dir=Path(cache_dir))
