"""An index folder on this machine (``anchored serve``, the embedded default), read
through a private, verified snapshot (``snapshot.py``), never in place."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

from anchored_query.store import snapshot
from anchored_query.store.source import NOT_PUBLISHED, IndexSource, IndexStoreError
from build_index.errors import IndexFormatError
from build_index.publish import MANIFEST


class LocalIndexSource(IndexSource):
    """An index directory on this machine (``anchored serve``, the embedded default).

    The directory is never read in place: each build is copied into a private
    snapshot (``<cache_dir>/.local-index/``) and verified file by file as it is
    copied (see :mod:`anchored_query.store.snapshot`), so a file truncated or
    overwritten under the server changes nothing it has open.
    """

    verified = True  # snapshots are hashed against the manifest as they are copied

    def __init__(
        self,
        directory: Path,
        *,
        refresh_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        cache_dir: Path = Path("/tmp/anchored"),
    ) -> None:
        super().__init__(str(directory))
        self.directory = directory
        self.refresh_s = refresh_s
        self.snapshot_root = cache_dir / ".local-index"
        self._clock = clock
        self._last_check = clock()
        self._signature: snapshot.Signature | None = None  # of the source, when copied
        self._rejected: snapshot.Signature | None = None  # a state that failed to verify
        self._previous: Path | None = None
        self._lock = threading.Lock()

    def _snapshot(self) -> Path:
        try:
            path, manifest, sig = snapshot.make_snapshot(self.directory, self.snapshot_root)
        except FileNotFoundError:
            raise IndexStoreError(
                f"no index at {self.directory}: {MANIFEST} is missing; build it with "
                "`anchored index SITE_DIR -o INDEX_DIR` or `mkdocs build`",
                NOT_PUBLISHED,
            ) from None
        except OSError as exc:
            raise IndexStoreError(
                f"cannot copy the index {self.directory} into {self.snapshot_root}: {exc}",
                "the index cannot be copied into this instance's storage",
            ) from exc
        # Keep the snapshot in use until now (requests in flight) and the new one.
        if self._previous is not None:
            snapshot.discard(self._previous)
        self._previous = self.path
        self.build_id, self.path, self._signature = manifest.build_id, path, sig
        return path

    def fetch(self) -> Path:
        """Copy the directory's index into a verified snapshot and return the snapshot."""
        with self._lock:
            self._last_check = self._clock()
            if self.path is not None and self._signature is not None:
                with contextlib.suppress(OSError, IndexFormatError):
                    if snapshot.signature(self.directory)[2] == self._signature:
                        return self.path
            return self._snapshot()

    def check_for_update(self) -> Path | None:
        """A new verified snapshot when the directory changed (rebuilt, or a file touched).

        Raises IndexFormatError when the changed directory does not verify (a file
        truncated or overwritten in place); the snapshot in use stays as it was and
        the same state is not copied again until the directory changes once more.
        """
        now = self._clock()
        if now - self._last_check < self.refresh_s:
            return None
        if not self._lock.acquire(blocking=False):
            return None
        try:
            self._last_check = now
            try:
                _, _, sig = snapshot.signature(self.directory)
            except (OSError, IndexFormatError):
                return None  # being replaced right now (or broken): keep what is loaded
            if sig == self._signature or sig == self._rejected:
                return None
            try:
                return self._snapshot()
            except (IndexStoreError, IndexFormatError):
                self._rejected = sig
                raise
        finally:
            self._lock.release()
