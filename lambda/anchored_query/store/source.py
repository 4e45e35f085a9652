"""Where the query function reads its index from: a local directory or ``s3://bucket/prefix``.

``location.source_for(loc)`` picks the source: ``local_source.py`` (a
folder on this machine, read through a verified snapshot) or ``s3_source.py``
(``current.json`` -> manifest -> verified files in a local cache, kept up to
date by ETag); ``prefetch.py`` starts a cold start's download early. Both
sources fail with :class:`IndexStoreError`, whose ``public`` part is all a
client is told (:func:`public_message`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from build_index.errors import AnchoredError, IndexFormatError

NOT_PUBLISHED = "no index is published yet"
NO_SPACE = "the index does not fit in this instance's storage"
SLOW = "the index store did not answer in time"
# The longest a cold start's fetch waits for S3 unless told (the default
# ANCHORED_DEADLINE_S, 20 s, less the 2 s kept for the extractive answer).
DEFAULT_TIME_LIMIT_S = 18.0


class IndexStoreError(AnchoredError):
    """The index store cannot be read: unreachable, access denied, nothing published, disk full.

    The message names everything (bucket, key, endpoint, paths) for the log;
    ``public`` is what an anonymous client may be told (see :func:`public_message`).
    """

    def __init__(self, message: str, public: str = "the index store cannot be reached") -> None:
        super().__init__(message)
        self.public = public


def public_message(exc: BaseException) -> str:
    """What a 503 tells the public about ``exc``: the kind of trouble, no location."""
    if isinstance(exc, IndexStoreError):
        reason = exc.public
    elif isinstance(exc, IndexFormatError):
        reason = "the index is damaged or incomplete"
    else:
        reason = "the index could not be loaded"
    return f"the index is unavailable: {reason}; the details are in the server's log"


class IndexSource(ABC):
    """Resolves an index location to a local directory the index reader can open."""

    # True when every file of a fetched build was checked against the manifest's
    # SHA-256 as it was written, so the reader need not hash it all again.
    verified = False

    def __init__(self, location: str) -> None:
        self.location = location
        self.build_id: str | None = None  # the build in use, once fetched
        self.path: Path | None = None  # its local directory

    @abstractmethod
    def fetch(self) -> Path:
        """Make the live build available locally and return its directory."""

    def fetch_within(self, timeout_s: float) -> Path:
        """:meth:`fetch`, failing with IndexStoreError (``SLOW``) when it takes longer than
        ``timeout_s``; a source that cannot be slow (a local folder) ignores the limit."""
        return self.fetch()

    @abstractmethod
    def check_for_update(self) -> Path | None:
        """The directory of a newer build once it is verified and ready, else None."""
