"""Where the query function reads its index: a local directory or S3 (moto over HTTP)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anchored_query.store.s3_source as s3_source
import pytest
from anchored_query.store.build_cache import CACHE_MARKER
from anchored_query.store.local_source import LocalIndexSource
from anchored_query.store.location import source_for
from anchored_query.store.s3_source import S3IndexSource, request_client, with_retries
from anchored_query.store.source import IndexStoreError
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from s3server import MotoS3, S3Bucket, moto_s3, s3, write_fake_index

from build_index.errors import IndexFormatError
from build_index.publish import publish

__all__ = ["moto_s3", "s3"]  # fixtures used by name

FILES = {
    "chunks.jsonl": b'{"id": "a"}\n',
    "vectors.npy": bytes(range(256)) * 8,
    "model.onnx": hashlib.sha256(b"model").digest() * 4096,
}


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _publish(s3: S3Bucket, tmp_path: Path, n: int, **changes: bytes) -> str:
    directory = tmp_path / f"index{n}"
    changes.setdefault("chunks.jsonl", b'{"id": "%d"}\n' % n)
    build_id = write_fake_index(
        directory, {**FILES, **changes}, created=f"2026-01-{n + 1:02d}T00:00:00+00:00"
    )
    publish(directory, s3.url, client=s3.client)
    return build_id


def _source(s3: S3Bucket, tmp_path: Path, clock: Clock, client: Any = None) -> S3IndexSource:
    source = source_for(
        s3.url,
        cache_dir=tmp_path / "cache",
        refresh_s=30,
        client=client if client is not None else s3.server.client(),
        clock=clock,
    )
    assert isinstance(source, S3IndexSource)
    return source


def _same_files(directory: Path, expected: dict[str, bytes]) -> None:
    for name, data in expected.items():
        assert (directory / name).read_bytes() == data, name
    manifest = json.loads((directory / "manifest.json").read_bytes())
    assert set(manifest["files"]) == set(expected)
    assert not [p for p in directory.iterdir() if p.name.endswith(".part")]


def test_fetch_downloads_the_live_build_into_the_cache(s3: S3Bucket, tmp_path: Path) -> None:
    build_id = _publish(s3, tmp_path, 1)
    source = _source(s3, tmp_path, Clock())

    path = source.fetch()
    assert path == tmp_path / "cache" / build_id
    assert source.build_id == build_id and source.path == path
    _same_files(path, {**FILES, "chunks.jsonl": b'{"id": "1"}\n'})


def test_a_cached_build_is_not_downloaded_again(s3: S3Bucket, tmp_path: Path) -> None:
    _publish(s3, tmp_path, 1)
    _source(s3, tmp_path, Clock()).fetch()
    client, calls = s3.counting_client()

    _source(s3, tmp_path, Clock(), client).fetch()  # a new process, same /tmp
    assert calls["GetObject"] == 1  # current.json only


def test_check_for_update_is_throttled_and_conditional(s3: S3Bucket, tmp_path: Path) -> None:
    _publish(s3, tmp_path, 1)
    clock = Clock()
    client, calls = s3.counting_client()
    source = _source(s3, tmp_path, clock, client)
    source.fetch()
    gets = calls["GetObject"]

    assert source.check_for_update() is None  # within refresh_s: no request at all
    assert calls["GetObject"] == gets
    clock.now += 31
    assert source.check_for_update() is None  # one conditional GET, answered 304
    assert calls["GetObject"] == gets + 1


def test_check_for_update_picks_up_a_new_build_and_shares_the_model(
    s3: S3Bucket, tmp_path: Path
) -> None:
    first = _publish(s3, tmp_path, 1)
    clock = Clock()
    source = _source(s3, tmp_path, clock)
    old = source.fetch()
    second = _publish(s3, tmp_path, 2)

    clock.now += 31
    new = source.check_for_update()
    assert new == tmp_path / "cache" / second and source.build_id == second
    _same_files(new, {**FILES, "chunks.jsonl": b'{"id": "2"}\n'})
    # The model is the same file on disk, not a second download.
    assert (new / "model.onnx").stat().st_ino == (old / "model.onnx").stat().st_ino
    assert old.name == first and old.is_dir()  # the previous build stays for in-flight readers


def test_at_most_two_builds_stay_cached(s3: S3Bucket, tmp_path: Path) -> None:
    clock = Clock()
    _publish(s3, tmp_path, 1)
    source = _source(s3, tmp_path, clock)
    source.fetch()
    for n in (2, 3, 4):
        build_id = _publish(s3, tmp_path, n)
        clock.now += 31
        assert source.check_for_update() == tmp_path / "cache" / build_id
        assert len([p for p in (tmp_path / "cache").iterdir() if p.is_dir()]) <= 2
    assert (tmp_path / "cache" / build_id / "model.onnx").read_bytes() == FILES["model.onnx"]


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("vectors.npy", b"\xff" * len(FILES["vectors.npy"])),  # same size, wrong bytes
        ("vectors.npy", FILES["vectors.npy"][:100]),  # truncated
        ("model.onnx", FILES["model.onnx"] + b"trailing"),  # too long
    ],
)
def test_a_corrupt_object_is_named_and_the_previous_build_keeps_serving(
    s3: S3Bucket, tmp_path: Path, name: str, body: bytes
) -> None:
    first = _publish(s3, tmp_path, 1)
    clock = Clock()
    source = _source(s3, tmp_path, clock)
    old = source.fetch()
    second = _publish(
        s3, tmp_path, 2, **{"vectors.npy": b"\x01" * 2048, "model.onnx": b"\x02" * 4096}
    )
    key = f"site/builds/{second}/{name}"
    s3.client.put_object(Bucket=s3.name, Key=key, Body=body)

    clock.now += 31
    with pytest.raises(IndexFormatError, match=re.escape(f"s3://{s3.name}/{key} is corrupt")):
        source.check_for_update()
    assert source.build_id == first and source.path == old
    _same_files(old, {**FILES, "chunks.jsonl": b'{"id": "1"}\n'})
    assert not (tmp_path / "cache" / second / "manifest.json").exists()

    # Once the object is right again, the next check takes the new build.
    s3.client.put_object(
        Bucket=s3.name, Key=key, Body=b"\x01" * 2048 if name == "vectors.npy" else b"\x02" * 4096
    )
    clock.now += 31
    assert source.check_for_update() == tmp_path / "cache" / second


def test_a_manifest_that_does_not_match_current_json_is_refused(
    s3: S3Bucket, tmp_path: Path
) -> None:
    build_id = _publish(s3, tmp_path, 1)
    key = f"site/builds/{build_id}/manifest.json"
    manifest = json.loads(s3.get(key))
    manifest["files"]["chunks.jsonl"]["size"] += 1
    s3.client.put_object(Bucket=s3.name, Key=key, Body=json.dumps(manifest).encode())

    with pytest.raises(IndexFormatError, match=re.escape(f"{key} is corrupt or was overwritten")):
        _source(s3, tmp_path, Clock()).fetch()


def test_nothing_published_says_how_to_publish(s3: S3Bucket, tmp_path: Path) -> None:
    with pytest.raises(IndexStoreError, match=r"no index is published.*anchored publish"):
        _source(s3, tmp_path, Clock()).fetch()


def test_an_unreachable_store_names_the_cause(tmp_path: Path) -> None:
    unreachable = MotoS3()
    unreachable.endpoint_url = "http://127.0.0.1:9"  # nothing listens there
    client = unreachable.client(retries={"max_attempts": 1}, connect_timeout=2)
    source = source_for("s3://bkt/site", cache_dir=tmp_path, client=client)
    with pytest.raises(IndexStoreError, match=r"cannot reach S3.*current.json.*Could not connect"):
        source.fetch()


def test_a_full_disk_is_reported_before_downloading(
    s3: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _publish(s3, tmp_path, 1)
    monkeypatch.setattr(shutil, "disk_usage", lambda _: SimpleNamespace(total=1, used=1, free=0))
    with pytest.raises(IndexStoreError, match=r"no space left in .*EphemeralStorage"):
        _source(s3, tmp_path, Clock()).fetch()


def test_running_out_of_space_while_writing_is_a_clear_error(
    s3: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _publish(s3, tmp_path, 1)

    def full(*_: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(s3_source.os, "replace", full)
    with pytest.raises(IndexStoreError, match="no space left in"):
        _source(s3, tmp_path, Clock()).fetch()
    assert not [p for p in tmp_path.rglob("*.part")]


def test_with_retries_retries_only_transient_failures() -> None:
    delays: list[float] = []
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
        return "ok"

    assert with_retries(flaky, sleep=delays.append) == "ok"
    assert len(delays) == 2 and delays[0] < delays[1] * 2

    def denied() -> None:
        attempts.append(1)
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetObject")

    attempts.clear()
    with pytest.raises(ClientError):
        with_retries(denied, sleep=delays.append)
    assert len(attempts) == 1


def test_with_retries_starts_no_retry_past_its_deadline() -> None:
    delays: list[float] = []
    attempts: list[int] = []

    def stalled() -> None:
        attempts.append(1)
        raise ReadTimeoutError(endpoint_url="http://127.0.0.1:9")

    # The first retry would sleep at least 0.1 s (0.2 s jittered down to half): too late.
    with pytest.raises(ReadTimeoutError):
        with_retries(stalled, sleep=delays.append, deadline=time.monotonic() + 0.05)
    assert len(attempts) == 1 and not delays
    attempts.clear()
    with pytest.raises(ReadTimeoutError):
        with_retries(stalled, sleep=delays.append, deadline=time.monotonic() + 60)
    assert len(attempts) == 3 and len(delays) == 2


def test_a_request_waits_for_s3_no_longer_than_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request path's client: a connect within a quarter of the limit, a read within
    half of it, one attempt (with_retries retries, within the limit); boto3's default 60 s
    reads and 4 attempts outlasted Lambda's 30 s Timeout."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for limit, connect, read in ((18.0, 4.5, 9.0), (1.0, 0.25, 0.5), (400.0, 5.0, 60.0)):
        config = request_client("http://127.0.0.1:9", limit).meta.config
        assert (config.connect_timeout, config.read_timeout) == (connect, read)
        assert config.retries["total_max_attempts"] == 1


def test_make_client_attempts_count_every_call_to_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    """``attempts`` is the number of calls botocore makes, the first included (botocore's
    own ``max_attempts`` counts only the retries: attempts=2 used to make 3 calls)."""
    import http.server
    import threading

    from build_index.s3_store import make_client

    calls: list[str] = []

    class Failing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            calls.append(self.path)
            body = b"<Error><Code>InternalError</Code><Message>x</Message></Error>"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for attempts in (1, 2):
            calls.clear()
            client = make_client(f"http://127.0.0.1:{server.server_address[1]}", attempts=attempts)
            with pytest.raises(ClientError):
                client.get_object(Bucket="b", Key="k")
            assert len(calls) == attempts
    finally:
        server.shutdown()
        server.server_close()


def test_a_local_directory_is_read_through_a_verified_private_snapshot(tmp_path: Path) -> None:
    build_id = write_fake_index(tmp_path / "index", FILES)
    clock = Clock()
    made = []
    for location in (tmp_path / "index", f"file://{tmp_path / 'index'}"):
        source = source_for(location, refresh_s=5, clock=clock, cache_dir=tmp_path / "cache")
        assert isinstance(source, LocalIndexSource) and source.verified
        path = source.fetch()
        assert path.is_relative_to(tmp_path / "cache") and source.build_id == build_id
        _same_files(path, FILES)
        made.append(path)
        assert (path / "vectors.npy").stat().st_ino != (
            tmp_path / "index/vectors.npy"
        ).stat().st_ino

    assert source.check_for_update() is None
    write_fake_index(tmp_path / "index", {**FILES, "chunks.jsonl": b"rebuilt\n"})
    assert source.check_for_update() is None  # not yet: refresh_s has not passed
    clock.now += 6
    new = source.check_for_update()
    assert new is not None and new != path and source.build_id != build_id
    _same_files(new, {**FILES, "chunks.jsonl": b"rebuilt\n"})
    assert path.is_dir()  # the previous snapshot stays for requests in flight

    # A file changed in place (same size, same manifest) is refused, once; the
    # snapshot in use is untouched.
    os.truncate(tmp_path / "index" / "vectors.npy", 128)
    clock.now += 6
    with pytest.raises(IndexFormatError, match=r"vectors\.npy does not match its manifest"):
        source.check_for_update()
    clock.now += 6
    assert source.check_for_update() is None  # the same broken state is not copied again
    assert source.path == new and (new / "vectors.npy").read_bytes() == FILES["vectors.npy"]
    snapshots = set((tmp_path / "cache" / ".local-index").iterdir())
    # The first source's one, and of this source: the one in use and the one before it.
    assert snapshots == {made[0], path, new}


def test_a_missing_local_index_says_how_to_build_one(tmp_path: Path) -> None:
    with pytest.raises(IndexStoreError, match=r"manifest.json is missing"):
        source_for(tmp_path, cache_dir=tmp_path / "cache").fetch()
    with pytest.raises(IndexStoreError, match="unsupported index location"):
        source_for("https://example.com/index")


def test_a_real_index_round_trips_through_s3(s3: S3Bucket, tmp_path: Path) -> None:
    """The real writer's output publishes, downloads and opens with the real reader."""
    pipeline = pytest.importorskip("build_index.pipeline")
    index_format = pytest.importorskip("build_index.index_format")
    from build_index.types import PageInput

    page = PageInput(
        url="guide/",
        html="<h1 id='guide'>Guide</h1><p>Publish the index to S3.</p>"
        "<h2 id='rollback'>Rollback</h2><p>Point current.json back.</p>",
        title="Guide",
    )
    pipeline.build([page], tmp_path / "index")
    first = publish(tmp_path / "index", s3.url, client=s3.client)
    pipeline.build(
        [page, PageInput(url="faq/", html="<h1 id='faq'>FAQ</h1><p>Yes.</p>")], tmp_path / "index"
    )
    second = publish(tmp_path / "index", s3.url, client=s3.client)
    assert "model.onnx" in first.uploaded and "model.onnx" in second.copied

    path = _source(s3, tmp_path, Clock()).fetch()
    index = index_format.read_index(path)
    assert index.manifest["build_id"] == second.build_id


def test_eviction_deletes_only_the_build_folders_the_cache_made(
    s3: S3Bucket, tmp_path: Path
) -> None:
    """Folders without the cache's marker (feedback kept there, another tool's files, an
    old build copied in by hand) survive any number of new builds; cached builds go."""
    cache = tmp_path / "cache"
    precious = {
        "feedback/2026-01-01/1-abc.json": b'{"rating": "up"}',
        "notes/readme.txt": b"mine",
        "0123456789abcdef/manifest.json": b"{}",  # looks like a build, was not made here
    }
    for name, data in precious.items():
        (cache / name).parent.mkdir(parents=True, exist_ok=True)
        (cache / name).write_bytes(data)
    clock = Clock()
    _publish(s3, tmp_path, 1)
    source = _source(s3, tmp_path, clock)
    first = source.fetch()
    assert (first / CACHE_MARKER).is_file()
    for n in (2, 3, 4):
        _publish(s3, tmp_path, n)
        clock.now += 31
        assert source.check_for_update() is not None
    for name, data in precious.items():
        assert (cache / name).read_bytes() == data, name
    assert not first.exists()  # the cache's own old builds are still evicted
    marked = [p for p in cache.iterdir() if (p / CACHE_MARKER).is_file()]
    assert len(marked) == 2


def test_a_foreign_folder_named_like_the_build_is_not_adopted(s3: S3Bucket, tmp_path: Path) -> None:
    build_id = _publish(s3, tmp_path, 1)
    foreign = tmp_path / "cache" / build_id
    foreign.mkdir(parents=True)
    (foreign / "mine.txt").write_bytes(b"mine")
    with pytest.raises(IndexStoreError, match="did not write"):
        _source(s3, tmp_path, Clock()).fetch()
    assert (foreign / "mine.txt").read_bytes() == b"mine"


def test_a_build_folder_another_instance_is_marking_is_adopted(tmp_path: Path) -> None:
    """Two instances share a cache: one has made the build's folder and is writing its
    marker (a temporary file, not yet renamed) when the other gets there. That folder
    is the cache's own, not foreign files (test_faults' two-instance switch met this)."""
    from anchored_query.store.build_cache import make_build_dir, part_name

    build_dir = tmp_path / "cache" / "b1"
    build_dir.mkdir(parents=True)
    part_name(build_dir / CACHE_MARKER).write_bytes(b"anchored index cache: build b1\n")
    make_build_dir(build_dir, "b1")
    assert (build_dir / CACHE_MARKER).is_file()
    # A folder with a file of someone else's is still refused.
    other = tmp_path / "cache" / "b2"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(IndexStoreError, match="did not write"):
        make_build_dir(other, "b2")
