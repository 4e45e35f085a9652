"""An S3 index (``s3://bucket/prefix``) copied into a local cache.

The cache is ``/tmp/anchored/<build_id>/`` on Lambda, filled by following
``current.json`` -> the build's ``manifest.json`` -> its files. Every file is
written under a temporary name, checked against the manifest's SHA-256 and
size, then renamed (the cache itself, its marker and eviction, is
:mod:`anchored_query.store.build_cache`). A file another cached build already has
(the ONNX model, shared across builds by its hash) is hard-linked instead of
downloaded again.

A cold start's ``fetch()`` answers within a time limit (the request's deadline,
less what the answer needs): the download runs in a thread of its own, the
request waits for it at most that long and then fails with ``SLOW``; the
download goes on, and the next ``fetch()`` waits for the same one (and takes
its build once it is done) instead of starting another. Its S3 calls have
connect and read timeouts sized from the limit, and no retry starts after it.
A download stopped halfway leaves nothing a later load trusts.

``check_for_update()`` is cheap enough to call on every request: at most once
every ``refresh_s`` seconds it sends a conditional GET of ``current.json``
(``If-None-Match`` the ETag seen last). When a new build fails verification it
raises and the previous build stays the one in use.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from anchored_query.store import snapshot
from anchored_query.store.build_cache import (
    BuildCache,
    has,
    link_or_copy,
    make_build_dir,
    part_name,
    write_atomic,
)
from anchored_query.store.prefetches import wait_for_prefetch
from anchored_query.store.source import (
    DEFAULT_TIME_LIMIT_S,
    NO_SPACE,
    NOT_PUBLISHED,
    SLOW,
    IndexSource,
    IndexStoreError,
)
from build_index.errors import IndexFormatError
from build_index.publish import (
    CURRENT,
    MANIFEST,
    Pointer,
    S3Client,
    S3Location,
    error_code,
    make_client,
)
from build_index.s3_store import DENIED_CODES

log = logging.getLogger("anchored_query.store.source")

T = TypeVar("T")

_TRANSIENT_CODES = {
    "500",
    "502",
    "503",
    "504",
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "Throttling",
    "ThrottlingException",
}
_DOWNLOAD_THREADS = 8


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: connection trouble, timeouts, throttling, 5xx."""
    from botocore.exceptions import (
        ClientError,
        ConnectionError,
        FlexibleChecksumError,
        HTTPClientError,
        IncompleteReadError,
    )

    if isinstance(exc, FlexibleChecksumError):
        return False  # the object itself is wrong; reading it again will not help
    if isinstance(exc, ConnectionError | HTTPClientError | IncompleteReadError):
        return True
    if isinstance(exc, ClientError):
        return error_code(exc) in _TRANSIENT_CODES
    return False


def request_client(endpoint_url: str | None, time_limit_s: float) -> S3Client:
    """An S3 client for calls a request waits for, sized to ``time_limit_s``.

    ``make_client``'s defaults for whole transfers (60 s reads, 5 attempts) let one
    stalled GET outlast any request; here a connect gives up after a quarter of the
    limit (at most 5 s), a read that brings no byte after half of it (at most 60 s),
    and botocore makes one attempt: :func:`with_retries` retries, and only while the
    limit leaves time.
    """
    limit = max(0.5, time_limit_s)
    return make_client(
        endpoint_url,
        connect_timeout=min(5.0, limit / 4),
        read_timeout=min(60.0, limit / 2),
        attempts=1,
    )


def with_retries(
    fn: Callable[[], T],
    *,
    attempts: int = 3,
    base_delay_s: float = 0.2,
    max_delay_s: float = 2.0,
    transient: Callable[[BaseException], bool] = is_transient,
    sleep: Callable[[float], None] = time.sleep,
    deadline: float | None = None,
) -> T:
    """Call ``fn``, retrying transient failures with jittered exponential backoff.

    This covers a whole operation (a download that broke off halfway is
    restarted from the beginning). With ``deadline`` (a ``time.monotonic()``
    value) no retry starts after it: the last failure is raised instead.
    """
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts or not transient(exc):
                raise
            delay = min(max_delay_s, base_delay_s * 2 ** (attempt - 1))
            delay *= 0.5 + random.random() / 2
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise  # out of time: a retry could not finish within the limit
            log.warning("retrying after %s (attempt %d of %d)", exc, attempt, attempts)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


class S3IndexSource(IndexSource):
    """An index published to S3, copied into a local cache and kept up to date by ETag."""

    verified = True  # downloads are hashed on the way in (see _download)

    def __init__(
        self,
        loc: S3Location,
        *,
        cache_dir: Path,
        refresh_s: float = 60.0,
        client: S3Client | None = None,
        endpoint_url: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_cached_builds: int = 2,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    ) -> None:
        super().__init__(f"s3://{loc.bucket}/{loc.prefix}".rstrip("/"))
        self.loc = loc
        self.cache_dir = cache_dir
        self.refresh_s = refresh_s
        self.max_cached_builds = max(1, max_cached_builds)
        self.time_limit_s = time_limit_s
        self._cache = BuildCache(cache_dir, self.max_cached_builds)
        self._client = client
        self._endpoint_url = endpoint_url
        self._clock = clock
        self._etag: str | None = None
        self._last_check = clock()
        self._lock = threading.Lock()
        # The cold start's download (fetch), running or done but not yet taken.
        self._job: Future[Path] | None = None
        self._job_lock = threading.Lock()

    @property
    def client(self) -> S3Client:
        """The S3 client, made on first use (so a local run never needs boto3 set up)."""
        if self._client is None:
            self._client = request_client(self._endpoint_url, self.time_limit_s)
        return self._client

    def fetch(self, timeout_s: float | None = None) -> Path:
        """Download (or reuse from the cache) the live build; return its directory.

        Waits at most ``timeout_s`` (at most, and by default, ``time_limit_s``), then
        raises IndexStoreError (``SLOW``) while the download goes on in its thread;
        the next call waits for that download rather than starting another, and
        returns its build once it is done. A download that failed is not reused: the
        next call starts a new one (files already verified stay in the cache).
        """
        limit = self.time_limit_s if timeout_s is None else min(timeout_s, self.time_limit_s)
        with self._job_lock:
            job = self._job
            if job is None or (job.done() and job.exception() is not None):
                job = self._job = self._start_job(time.monotonic() + limit)
        try:
            return job.result(timeout=max(0.0, limit))
        except TimeoutError:
            log.warning(
                "index %s not downloaded within %.1f s (S3 is slow or not answering); "
                "the download goes on in the background",
                self.location,
                limit,
            )
            raise IndexStoreError(
                f"the index at {self.location} did not download within {limit:.1f} s: "
                "S3 is slow or not answering",
                SLOW,
            ) from None
        finally:
            if job.done():
                with self._job_lock:
                    if self._job is job:
                        self._job = None  # taken: a later fetch starts afresh

    def wait_for_download(self, timeout_s: float) -> bool:
        """Wait for a cold start's download still running (tests, tools); True when none is."""
        job = self._job
        if job is None:
            return True
        try:
            job.exception(timeout=timeout_s)
        except TimeoutError:
            return False
        return True

    def fetch_within(self, timeout_s: float) -> Path:
        """:meth:`fetch` waiting at most ``timeout_s``."""
        return self.fetch(timeout_s)

    def _start_job(self, deadline: float) -> Future[Path]:
        """Run :meth:`_fetch_now` in a daemon thread (a stalled read must not hold a request
        or the interpreter's exit); its result or failure lands in the returned future."""
        job: Future[Path] = Future()
        job.set_running_or_notify_cancel()
        caller = threading.current_thread()  # a prefetch's own fetch must not wait for it

        def run() -> None:
            try:
                job.set_result(self._fetch_now(deadline, caller))
            except BaseException as exc:  # handed to whoever waits for the job
                job.set_exception(exc)

        threading.Thread(target=run, name="anchored-index-fetch", daemon=True).start()
        return job

    def _fetch_now(self, deadline: float, caller: threading.Thread) -> Path:
        # The prefetch's download fills the cache this one reads: wait for it whole (the
        # request waiting for this job is bounded by its own limit), not start another.
        wait_for_prefetch(self.location, self.cache_dir, waiter=caller)
        with self._lock:
            found = self._read_pointer(None, deadline)
            assert found is not None  # no If-None-Match, so never "not modified"
            pointer, etag = found
            path = self._materialise(pointer, deadline)
            self._use(pointer.build_id, path, etag)
            return path

    def check_for_update(self) -> Path | None:
        """At most every ``refresh_s``: the new build's directory once verified, else None.

        Raises IndexFormatError (a corrupt or truncated object, named) or
        IndexStoreError (S3 unreachable, disk full); either way the build in
        use stays as it was, so the caller keeps serving it.
        """
        now = self._clock()
        if now - self._last_check < self.refresh_s:
            return None
        if not self._lock.acquire(blocking=False):
            return None  # another thread is checking right now
        try:
            self._last_check = now
            if self.path is None:
                found = self._read_pointer(None)
            else:
                found = self._read_pointer(self._etag)
            if found is None:
                return None
            pointer, etag = found
            if pointer.build_id == self.build_id:
                self._etag = etag
                return None
            path = self._materialise(pointer)
            self._use(pointer.build_id, path, etag)
            return path
        finally:
            self._lock.release()

    def _use(self, build_id: str, path: Path, etag: str) -> None:
        if build_id != self.build_id:
            log.info("index build %s ready in %s", build_id, path)
        self.build_id, self.path, self._etag = build_id, path, etag

    def _read_pointer(
        self, etag: str | None, deadline: float | None = None
    ) -> tuple[Pointer, str] | None:
        """GET ``current.json`` (conditionally when ``etag``); None when not modified."""
        from botocore.exceptions import BotoCoreError, ClientError

        url = self.loc.url(CURRENT)
        kwargs: dict[str, Any] = {"Bucket": self.loc.bucket, "Key": self.loc.key(CURRENT)}
        if etag:
            kwargs["IfNoneMatch"] = etag

        def get() -> tuple[bytes, str]:
            response = self.client.get_object(**kwargs)
            return response["Body"].read(), str(response["ETag"])

        try:
            raw, new_etag = with_retries(get, deadline=deadline)
        except ClientError as exc:
            code = error_code(exc)
            if code in ("304", "NotModified"):
                return None
            if code in ("NoSuchKey", "404"):
                raise IndexStoreError(
                    f"no index is published at {self.location}: {url} does not exist; "
                    f"run `anchored publish INDEX_DIR {self.location}`",
                    NOT_PUBLISHED,
                ) from exc
            if code in DENIED_CODES:
                raise IndexStoreError(
                    f"no index is published at {self.location}, or the function may not read "
                    f"it: S3 answered {code} for {url} (its answer for a missing key to a caller "
                    f"that may not list the bucket); run `anchored publish INDEX_DIR "
                    f"{self.location}`, or check the function's s3:GetObject on it",
                    NOT_PUBLISHED,
                ) from exc
            raise IndexStoreError(f"cannot read {url}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise IndexStoreError(f"cannot reach S3 to read {url}: {exc}") from exc
        return Pointer.from_json(raw, url), new_etag

    def _materialise(self, pointer: Pointer, deadline: float | None = None) -> Path:
        """Make ``pointer``'s build complete and verified in the cache; return its directory."""
        build_dir = self.cache_dir / pointer.build_id
        try:
            if self._cache.is_complete(build_dir, pointer.manifest_sha256):
                return build_dir
            raw = self._download_manifest(pointer, deadline)
            manifest = snapshot.read_manifest(raw, self.loc.url(pointer.manifest))
            if manifest.build_id != pointer.build_id:
                raise IndexFormatError(
                    f"{self.loc.url(pointer.manifest)} names build {manifest.build_id}, "
                    f"current.json names {pointer.build_id}; publish the index again"
                )
            self._cache.evict(keep={pointer.build_id, *([self.build_id] if self.build_id else [])})
            make_build_dir(build_dir, pointer.build_id)
            missing = {
                name: entry
                for name, entry in manifest.files.items()
                if not has(build_dir / name, entry[1])
            }
            cached = self._cache.verified_files(exclude=build_dir)
            self._cache.check_space(
                pointer.build_id,
                sum(size for sha, size in missing.values() if (sha, size) not in cached),
            )
            downloads = []
            for name, (sha, size) in sorted(missing.items()):
                dest = build_dir / name
                if (sha, size) in cached:
                    link_or_copy(cached[sha, size], dest)
                else:
                    key = self.loc.key("builds", pointer.build_id, name)
                    downloads.append((key, dest, sha, size))
            self._download_all(downloads, deadline)
            write_atomic(build_dir / MANIFEST, raw)  # last: marks the build complete
            return build_dir
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise IndexStoreError(
                    f"no space left in {self.cache_dir} for index build {pointer.build_id}; "
                    "free /tmp or give the function more ephemeral storage "
                    "(EphemeralStorage in template.yaml)",
                    NO_SPACE,
                ) from exc
            raise IndexStoreError(
                f"cannot write the index cache {self.cache_dir}: {exc}",
                "the index cannot be written to this instance's storage",
            ) from exc

    def _download_manifest(self, pointer: Pointer, deadline: float | None = None) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        url = self.loc.url(pointer.manifest)

        def get() -> bytes:
            body: bytes = self.client.get_object(
                Bucket=self.loc.bucket, Key=self.loc.key(pointer.manifest)
            )["Body"].read()
            return body

        try:
            raw = with_retries(get, deadline=deadline)
        except ClientError as exc:
            raise IndexFormatError(
                f"{url} cannot be read ({error_code(exc) or exc}) although current.json "
                "names it; publish the index again"
            ) from exc
        except BotoCoreError as exc:
            raise IndexStoreError(f"cannot reach S3 to read {url}: {exc}") from exc
        got = hashlib.sha256(raw).hexdigest()
        if got != pointer.manifest_sha256:
            raise IndexFormatError(
                f"{url} is corrupt or was overwritten: sha256 {got[:12]}…, current.json says "
                f"{pointer.manifest_sha256[:12]}…; publish the index again"
            )
        return raw

    def _download_all(
        self, downloads: list[tuple[str, Path, str, int]], deadline: float | None = None
    ) -> None:
        """Download several objects at once (a cold start waits for all of them).

        One GET at a time costs a round trip per file before its first byte;
        in parallel the index takes about as long as its largest file (the
        model). The first failure is raised once every download has ended.
        """
        if len(downloads) <= 1:
            for item in downloads:
                self._download(*item, deadline=deadline)
            return
        from concurrent.futures import ThreadPoolExecutor

        _ = self.client  # made here, once; the threads then share it (clients are thread-safe)
        with ThreadPoolExecutor(max_workers=min(_DOWNLOAD_THREADS, len(downloads))) as pool:
            futures = [pool.submit(self._download, *item, deadline=deadline) for item in downloads]
        for future in futures:
            future.result()

    def _download(
        self, key: str, dest: Path, sha: str, size: int, deadline: float | None = None
    ) -> None:
        """Download one object to ``dest`` via a temporary name, verifying SHA-256 and size."""
        from botocore.exceptions import BotoCoreError, ClientError, FlexibleChecksumError

        url = f"s3://{self.loc.bucket}/{key}"
        tmp = part_name(dest)

        def get() -> tuple[str, int]:
            digest, count = hashlib.sha256(), 0
            body = self.client.get_object(Bucket=self.loc.bucket, Key=key)["Body"]
            try:
                with tmp.open("wb") as fh:
                    for block in body.iter_chunks(1 << 20):
                        count += len(block)
                        if count > size:
                            break  # longer than the manifest says: stop before it fills /tmp
                        digest.update(block)
                        fh.write(block)
            finally:
                body.close()  # a download cut short (disk full, too long) frees its connection
            return digest.hexdigest(), count

        try:
            got_sha, got_size = with_retries(get, deadline=deadline)
            if got_size != size or got_sha != sha:
                raise IndexFormatError(
                    f"{url} is corrupt or truncated: got {got_size} bytes with sha256 "
                    f"{got_sha[:12]}…, the manifest says {size} bytes with sha256 {sha[:12]}…; "
                    "the previous build stays in use; publish the index again"
                )
            os.replace(tmp, dest)
        except FlexibleChecksumError as exc:
            raise IndexFormatError(f"{url} is corrupt: {exc}; publish the index again") from exc
        except ClientError as exc:
            raise IndexFormatError(
                f"{url} cannot be read ({error_code(exc) or exc}) although its manifest lists "
                "it; publish the index again"
            ) from exc
        except BotoCoreError as exc:
            raise IndexStoreError(f"cannot reach S3 to read {url}: {exc}") from exc
        finally:
            tmp.unlink(missing_ok=True)
