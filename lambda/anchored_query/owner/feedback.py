"""Durable feedback: written (and synced) before the 200 goes out, one object each.

A record is bounded (:data:`MAX_RECORD_BYTES`), filed only against answer ids
the function issued (checked by the app, see :mod:`anchored_query.guard.ids`), and a
local folder is capped in records and bytes, so an anonymous client cannot
fill a disk with it. A write that fails (a full disk) leaves no partial file.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from anchored_query.errors import QueryError
from anchored_query.owner.private_files import write_private
from anchored_query.question.validation import FeedbackRequest

log = logging.getLogger("anchored.query")

# One record as stored: the reader's fields, the time and the build id.
MAX_RECORD_BYTES = 4096
# A local folder takes at most this many records / bytes (about 200 MB at most).
MAX_LOCAL_RECORDS = 50_000
MAX_LOCAL_BYTES = 200 * 1024 * 1024
_STALE_TMP_S = 300.0  # a .tmp older than this was left by a crashed writer


class FeedbackStore(Protocol):
    def save(self, item: FeedbackRequest, *, build_id: str) -> str: ...


class FeedbackFull(Exception):
    """The local feedback folder has reached its cap."""


def _record(item: FeedbackRequest, build_id: str) -> tuple[str, bytes]:
    key = f"{time.strftime('%Y-%m-%d', time.gmtime())}/{int(time.time())}-{uuid.uuid4().hex}.json"
    body: dict[str, Any] = asdict(item)
    body.update(received=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), build_id=build_id)
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    if len(data) > MAX_RECORD_BYTES:
        raise QueryError(
            413, "too_large", f"the feedback is over {MAX_RECORD_BYTES} bytes; shorten the comment"
        )
    return key, data


def check_record(item: FeedbackRequest) -> None:
    """Raise a 413 QueryError when ``item`` would make a record over the bound."""
    _record(item, "0" * 16)


class LocalFeedbackStore:
    """One JSON file per feedback under a folder (0600 in 0700 folders:
    :mod:`.private_files`); fsynced before returning; capped."""

    def __init__(
        self,
        directory: Path,
        *,
        max_records: int = MAX_LOCAL_RECORDS,
        max_bytes: int = MAX_LOCAL_BYTES,
    ) -> None:
        self.directory = directory
        self.max_records = max_records
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._counted = False
        self._records = 0
        self._bytes = 0

    def _count(self) -> None:
        """Count what the folder holds (once per process), removing stale .tmp files."""
        records = size = 0
        if self.directory.is_dir():
            now = time.time()
            for path in self.directory.rglob("*"):
                try:
                    st = path.stat()
                except OSError:
                    continue
                if path.suffix == ".tmp" and now - st.st_mtime > _STALE_TMP_S:
                    path.unlink(missing_ok=True)
                elif path.suffix == ".json":
                    records += 1
                    size += st.st_size
        self._records, self._bytes, self._counted = records, size, True

    def save(self, item: FeedbackRequest, *, build_id: str) -> str:
        key, data = _record(item, build_id)
        with self._lock:
            if not self._counted:
                self._count()
            if self._records >= self.max_records or self._bytes + len(data) > self.max_bytes:
                raise FeedbackFull(
                    f"the feedback folder {self.directory} holds {self._records} records "
                    f"({self._bytes} bytes), its cap; move them away or use s3://"
                )
            self._records += 1
            self._bytes += len(data)
        try:
            write_private(self.directory / key, data, self.directory)
        except BaseException:
            with self._lock:
                self._records -= 1
                self._bytes -= len(data)
            raise
        return key


class S3FeedbackStore:
    """One object per feedback under ``s3://bucket/prefix/``; never overwrites."""

    def __init__(self, location: str, client: Any = None) -> None:
        bucket, _, prefix = location[5:].partition("/")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        if client is None:
            from build_index.s3_store import make_client

            # Inside a reader's request: 2 attempts with 3 s read timeouts, well inside the
            # function's timeout, so a stalled S3 gives the 503 rather than a timeout.
            client = make_client(connect_timeout=2, read_timeout=3, attempts=2)
        self.client = client

    def save(self, item: FeedbackRequest, *, build_id: str) -> str:
        key, data = _record(item, build_id)
        full = f"{self.prefix}/{key}" if self.prefix else key
        self.client.put_object(
            Bucket=self.bucket,
            Key=full,
            Body=data,
            ContentType="application/json",
            IfNoneMatch="*",
        )
        return key


def default_feedback_dir(cache_dir: str | Path) -> Path:
    """Where feedback goes when ``ANCHORED_FEEDBACK`` is unset: beside the index cache,
    never inside it (``/tmp/anchored`` -> ``/tmp/anchored-feedback``)."""
    cache = Path(cache_dir)
    return cache.with_name(cache.name + "-feedback")


def feedback_store(location: str, default_dir: Path) -> FeedbackStore:
    """The store for a setting: ``s3://bucket/prefix``, a folder, or ``default_dir``."""
    if location.startswith("s3://"):
        return S3FeedbackStore(location)
    return LocalFeedbackStore(Path(location) if location else default_dir)
