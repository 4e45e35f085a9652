"""Durable feedback: written (and synced) before the 200 goes out, one object each."""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from anchored_query.validation import FeedbackRequest


class FeedbackStore(Protocol):
    def save(self, item: FeedbackRequest, *, build_id: str) -> str: ...


def _record(item: FeedbackRequest, build_id: str) -> tuple[str, bytes]:
    key = f"{time.strftime('%Y-%m-%d', time.gmtime())}/{int(time.time())}-{uuid.uuid4().hex}.json"
    body: dict[str, Any] = asdict(item)
    body.update(received=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), build_id=build_id)
    return key, json.dumps(body, ensure_ascii=False).encode("utf-8")


class LocalFeedbackStore:
    """One JSON file per feedback under a folder; fsynced before returning."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def save(self, item: FeedbackRequest, *, build_id: str) -> str:
        key, data = _record(item, build_id)
        path = self.directory / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return key


class S3FeedbackStore:
    """One object per feedback under ``s3://bucket/prefix/``; never overwrites."""

    def __init__(self, location: str, client: Any = None) -> None:
        bucket, _, prefix = location[5:].partition("/")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        if client is None:
            import boto3

            client = boto3.client("s3")
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
