"""The question log: what readers asked and how the docs did, off by default.

Turned on by ``ANCHORED_QUESTION_LOG`` (a folder, or ``s3://bucket/prefix``).
Each ask becomes one record: the time, the question, the build it was answered
from, the mode, abstained or not, the LLM fallback, the sections cited and the
closest ones, the sentences verification removed and the latency. Feedback
becomes a record joined later by answer id. Nothing about the reader is kept:
no IP address, no cookie, no user id, no headers, no history of the
conversation.

The request only puts a small dict on a bounded queue (``put_nowait``); a
background thread batches records into gzipped JSON Lines objects
(``<prefix>/asks/YYYY-MM-DD/…`` and ``<prefix>/feedback/YYYY-MM-DD/…``). A full
queue drops the record and counts it: logging never delays or fails an answer.
Retention: on S3 a lifecycle rule (template.yaml); in a folder, day folders
older than the retention are deleted as batches are written.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import queue
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from anchored_query.guard.logsafe import mask_personal
from anchored_query.owner.private_files import write_private

log = logging.getLogger("anchored.query")

FORMAT = "anchored-question-log"
VERSION = 1
QUEUE_MAX = 10_000  # records waiting at most; beyond it they are dropped and counted
BATCH_MAX = 500  # records per object at most
FLUSH_S = 10.0  # a batch waits at most this long before it is written
MAX_QUESTION_CHARS = 2000
MAX_REFS = 10
KINDS = ("asks", "feedback")


class LogSink(Protocol):
    def write(self, kind: str, day: str, data: bytes) -> None: ...
    def expire(self, before: date) -> None: ...


def _now() -> datetime:
    return datetime.now(UTC)


def ask_record(
    result: Mapping[str, Any], question: str, latency_ms: float, *, when: datetime | None = None
) -> dict[str, Any]:
    """The log record of one answer (``result`` as ``/v1/ask`` returns it)."""
    abstained = bool(result.get("abstained"))
    refs = [str(c.get("url", "")) for c in result.get("citations", [])][:MAX_REFS]
    return {
        "v": VERSION,
        "kind": "ask",
        "t": (when or _now()).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "answer_id": str(result.get("id", "")),
        "question": question[:MAX_QUESTION_CHARS],
        "build_id": str(result.get("build_id", "")),
        "mode": str(result.get("mode", "")),
        "abstained": abstained,
        "fallback": str(result.get("fallback", "")),
        "cited": [] if abstained else refs,
        "closest": refs,
        "removed_sentences": int(result.get("removed_sentences", 0) or 0),
        "unverified_sentences": int(result.get("unverified_sentences", 0) or 0),
        "coverage": str(result.get("coverage", "")),
        # Sentences checked, and per check how many it removed / left unverified.
        "verification": _verification_counts(result.get("verification")),
        "latency_ms": round(float(latency_ms), 1),
    }


def _verification_counts(value: Any) -> dict[str, Any]:
    """The counts of a response's ``verification`` (no sentence text)."""
    if not isinstance(value, Mapping):
        return {}
    checks = value.get("checks")
    return {
        "sentences": int(value.get("sentences", 0) or 0),
        # A reply that only pasted its passages (judged as the quote: citations/pasted.py).
        "pasted": bool(value.get("pasted")),
        "checks": {
            str(name): {k: int(v) for k, v in counts.items() if k in ("removed", "unverified")}
            for name, counts in (checks.items() if isinstance(checks, Mapping) else ())
            if isinstance(counts, Mapping)
        },
    }


def feedback_record(answer_id: str, rating: str, *, when: datetime | None = None) -> dict[str, Any]:
    """The log record of one feedback: the rating only (a reason or comment is free text
    that may name the reader; they stay in the feedback store, ANCHORED_FEEDBACK)."""
    return {
        "v": VERSION,
        "kind": "feedback",
        "t": (when or _now()).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "answer_id": answer_id,
        "rating": rating,
    }


def _object_name() -> str:
    return f"{time.strftime('%H%M%S', time.gmtime())}-{uuid.uuid4().hex}.jsonl.gz"


class LocalSink:
    """Batches as files under a folder, written atomically, 0600 in 0700 folders
    (:mod:`.private_files`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write(self, kind: str, day: str, data: bytes) -> None:
        write_private(self.directory / kind / day / _object_name(), data, self.directory)

    def expire(self, before: date) -> None:
        for kind in KINDS:
            root = self.directory / kind
            if not root.is_dir():
                continue
            for folder in root.iterdir():
                with contextlib.suppress(ValueError):
                    if date.fromisoformat(folder.name) < before:
                        shutil.rmtree(folder, ignore_errors=True)


class S3Sink:
    """Batches as objects under ``s3://bucket/prefix/``; the lifecycle rule expires them."""

    def __init__(self, location: str, client: Any = None) -> None:
        bucket, _, prefix = location[5:].partition("/")
        self.bucket, self.prefix = bucket, prefix.strip("/")
        if client is None:
            import boto3

            client = boto3.client("s3")
        self.client = client

    def write(self, kind: str, day: str, data: bytes) -> None:
        key = "/".join(p for p in (self.prefix, kind, day, _object_name()) if p)
        self.client.put_object(
            Bucket=self.bucket, Key=key, Body=data, ContentType="application/x-ndjson"
        )
        # ContentEncoding is left unset: readers must get the gzip bytes as stored.

    def expire(self, before: date) -> None:
        """Nothing to do: the bucket's lifecycle rule deletes old objects."""


@dataclass
class LogStats:
    queued: int = 0
    written: int = 0
    dropped: int = 0
    failed_writes: int = 0


class QuestionLog:
    """A bounded queue and one writer thread; :meth:`submit` never blocks or raises.
    ``mask``: questions are written with e-mail addresses, phone numbers and key-shaped
    strings masked (:func:`~anchored_query.guard.logsafe.mask_personal`)."""

    def __init__(
        self,
        sink: LogSink,
        *,
        retention_days: int = 90,
        queue_max: int = QUEUE_MAX,
        batch_max: int = BATCH_MAX,
        flush_s: float = FLUSH_S,
        mask: bool = False,
    ) -> None:
        self.sink = sink
        self.mask = mask  # e-mail-, phone- and key-shaped strings in questions masked
        self.retention_days = retention_days
        self.batch_max = batch_max
        self.flush_s = flush_s
        self.stats = LogStats()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=queue_max)
        self._expired_on: date | None = None
        self._thread = threading.Thread(target=self._run, name="anchored-question-log", daemon=True)
        self._thread.start()

    def submit(self, record: dict[str, Any]) -> None:
        """Queue a record; when the queue is full it is dropped and counted."""
        try:
            self._queue.put_nowait(record)
            self.stats.queued += 1
        except queue.Full:
            self.stats.dropped += 1

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is queued and stop the thread."""
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout_s)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        pending: list[dict[str, Any]] = []
        oldest = 0.0
        while True:
            wait = max(0.0, oldest + self.flush_s - time.monotonic()) if pending else None
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                item = {}
            if item is None:
                self._flush(pending)
                return
            if item:
                if not pending:
                    oldest = time.monotonic()
                pending.append(item)
            if pending and (
                len(pending) >= self.batch_max or time.monotonic() - oldest >= self.flush_s
            ):
                self._flush(pending)
                pending = []

    def _flush(self, records: list[dict[str, Any]]) -> None:
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in records:
            kind = "feedback" if r.get("kind") == "feedback" else "asks"
            if self.mask and isinstance(r.get("question"), str):  # here, off the request path
                r = {**r, "question": mask_personal(r["question"])}
            groups.setdefault((kind, str(r.get("t", ""))[:10]), []).append(r)
        for (kind, day), rows in groups.items():
            data = gzip.compress(
                "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8"),
                mtime=0,
            )
            try:
                self.sink.write(kind, day, data)
                self.stats.written += len(rows)
            except Exception as exc:  # never reaches a reader; the count says it happened
                self.stats.failed_writes += 1
                log.warning("question log: a batch was not written: %s", type(exc).__name__)
        today = _now().date()
        if self.retention_days and self._expired_on != today:
            self._expired_on = today
            try:
                self.sink.expire(today - timedelta(days=self.retention_days))
            except Exception as exc:
                log.warning("question log: expiry failed: %s", type(exc).__name__)


def question_log(location: str, retention_days: int, **options: Any) -> QuestionLog | None:
    """The log for a setting, or None when it is off (``""``)."""
    if not location:
        return None
    sink: LogSink = S3Sink(location) if location.startswith("s3://") else LocalSink(Path(location))
    return QuestionLog(sink, retention_days=retention_days, **options)


# ------------------------------------------------------------------ reading


@dataclass
class ReadStats:
    objects: int = 0
    records: int = 0
    skipped_objects: int = 0  # corrupt, partial or not gzip
    skipped_records: int = 0  # not JSON or not a record of this log


def _days(since: date | None, until: date | None, names: list[str]) -> list[str]:
    out = []
    for name in sorted(names):
        try:
            day = date.fromisoformat(name)
        except ValueError:
            continue
        if (since is None or day >= since) and (until is None or day <= until):
            out.append(name)
    return out


def _objects(location: str, kind: str, since: date | None, until: date | None) -> Iterator[bytes]:
    """The stored bytes of each object of ``kind`` in the period, one at a time."""
    if location.startswith("s3://"):
        import boto3

        bucket, _, prefix = location[5:].partition("/")
        prefix = prefix.strip("/")
        client = boto3.client("s3")
        base = f"{prefix}/{kind}/" if prefix else f"{kind}/"
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=base, Delimiter="/"
        )
        names = [
            p["Prefix"][len(base) :].strip("/")
            for page in pages
            for p in page.get("CommonPrefixes", [])
        ]
        for day in _days(since, until, names):
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=f"{base}{day}/"
            ):
                for obj in page.get("Contents", []):
                    yield client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        return
    root = Path(location) / kind
    if not root.is_dir():
        return
    for day in _days(since, until, [p.name for p in root.iterdir() if p.is_dir()]):
        for path in sorted((root / day).iterdir()):
            if path.is_file() and not path.name.startswith("."):
                yield path.read_bytes()


def read_records(
    location: str,
    kind: str,
    *,
    since: date | None = None,
    until: date | None = None,
    stats: ReadStats | None = None,
) -> Iterator[dict[str, Any]]:
    """Stream the records of ``kind`` (``asks`` or ``feedback``) in the period.

    One object is in memory at a time. An object that is not complete gzip is
    skipped whole (counted); a line that is not one of this log's records is
    skipped (counted).
    """
    stats = stats or ReadStats()
    want = "ask" if kind == "asks" else "feedback"
    for raw in _objects(location, kind, since, until):
        stats.objects += 1
        try:
            lines = gzip.decompress(raw).decode("utf-8").splitlines()
        except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile):
            stats.skipped_objects += 1
            continue
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                stats.skipped_records += 1
                continue
            if not (isinstance(row, dict) and row.get("v") == VERSION and row.get("kind") == want):
                stats.skipped_records += 1
                continue
            t = str(row.get("t", ""))[:10]
            with contextlib.suppress(ValueError):
                day = date.fromisoformat(t)
                if (since and day < since) or (until and day > until):
                    continue
            stats.records += 1
            yield row
