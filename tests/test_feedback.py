"""Feedback: where it lives, which answer ids it accepts, what a record may hold,
and what a failed write leaves behind (real HTTP: moto S3, uvicorn, TestClient)."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anchored_query.engine import Engine
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from appsettings import settings_for
from s3server import S3Bucket, moto_s3, s3
from starlette.testclient import TestClient

from build_index.pipeline import BuildConfig, build
from build_index.publish import publish
from build_index.static_site import pages_from_site_dir

__all__ = ["moto_s3", "s3"]  # fixtures used by name

QUESTION = "Which port does the server use by default?"


@pytest.fixture(scope="module")
def second_index(qa_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another build of the qa site (one page left out): a different build id."""
    out = tmp_path_factory.mktemp("second") / "index"
    pages = [p for p in pages_from_site_dir(qa_project / "site") if p.url != "notes/"]
    build(pages, out, BuildConfig(cache_dir=tmp_path_factory.mktemp("embed-cache")))
    return out


def s3_settings(s3: S3Bucket, tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "index": s3.url,
        "cache_dir": str(tmp_path / "cache"),
        "refresh_s": 0,
        "rate_limit_per_min": 0,
    }
    values.update(overrides)
    return Settings(**values)


def answer_id(client: TestClient) -> str:
    response = client.post("/v1/ask", json={"question": QUESTION})
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def feedback_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.json") if p.is_file())


# ---------------------------------------------------------------- item 3: never evicted


def test_feedback_with_the_default_location_survives_new_builds_and_cold_starts(
    s3: S3Bucket,
    qa_project: Path,
    qa_index: Path,
    second_index: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ANCHORED_FEEDBACK unset with an S3 index: every feedback answered 200 is still on
    disk after the cache downloads another build (refresh) and after a cold start that
    downloads a third one (the cache's eviction runs both times)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    settings = s3_settings(s3, tmp_path)
    assert settings.feedback == ""
    publish(qa_index, s3.url, client=s3.client)
    app = create_app(settings)
    engine: Engine = app.state.engine
    stored: list[str] = []
    with TestClient(app) as c:
        for _ in range(3):
            body = {"answer_id": answer_id(c), "rating": "up"}
            response = c.post("/v1/feedback", json=body)
            assert response.status_code == 200, response.text
            stored.append(response.json()["id"])
        publish(second_index, s3.url, client=s3.client)
        c.get("/v1/health")
        assert engine.wait_for_refresh(60)
    # A cold start on the same /tmp that downloads yet another build.
    third = tmp_path / "third-index"
    build(list(pages_from_site_dir(qa_project / "site"))[:2], third, BuildConfig())
    publish(third, s3.url, client=s3.client)
    with TestClient(create_app(settings)) as c:
        assert c.get("/v1/health").json()["build_id"] != ""

    cache = Path(settings.cache_dir)
    everywhere = feedback_files(tmp_path)
    kept = [p for p in everywhere if p.stem in stored]
    assert sorted(p.stem for p in kept) == sorted(stored), everywhere
    # And it is not kept inside the cache, where a future eviction could reach it.
    assert not [p for p in kept if p.is_relative_to(cache)]


# ---------------------------------------------------------------- item 7: ids, size, writes


def test_feedback_is_accepted_only_for_answer_ids_the_function_issued(
    qa_index: Path, tmp_path: Path
) -> None:
    settings = settings_for(qa_index, tmp_path, answer_id_secret="s" * 32)
    with TestClient(create_app(settings)) as c:
        issued = answer_id(c)
        forged = [
            "answer1",
            "a" * 64,
            uuid_hex(),
            issued[:-1] + ("0" if issued[-1] != "0" else "1"),  # one digit of the MAC changed
            issued.split("-")[0] + "-" + "0" * 32,
            issued.upper(),
        ]
        for bad in forged:
            r = c.post("/v1/feedback", json={"answer_id": bad, "rating": "up"})
            assert r.status_code == 400, bad
            assert r.json()["error"]["code"] == "unknown_answer"
        assert not feedback_files(tmp_path / "feedback")
        assert c.post("/v1/feedback", json={"answer_id": issued, "rating": "up"}).status_code == 200
    # Another instance with the same secret accepts the id; one with another does not.
    with TestClient(create_app(settings)) as c:
        assert c.post("/v1/feedback", json={"answer_id": issued, "rating": "up"}).status_code == 200
    other = settings_for(qa_index, tmp_path, answer_id_secret="t" * 32)
    with TestClient(create_app(other)) as c:
        r = c.post("/v1/feedback", json={"answer_id": issued, "rating": "up"})
        assert r.status_code == 400


def uuid_hex() -> str:
    import uuid

    return uuid.uuid4().hex


def test_a_feedback_record_is_bounded_in_bytes(qa_index: Path, tmp_path: Path) -> None:
    from anchored_query.owner.feedback import MAX_RECORD_BYTES

    with TestClient(create_app(settings_for(qa_index, tmp_path))) as c:
        issued = answer_id(c)
        # 2,000 four-byte characters: within the character limit, 8 kB as UTF-8.
        big = {"answer_id": issued, "rating": "down", "reason": "😀" * 200, "comment": "😀" * 2000}
        r = c.post("/v1/feedback", json=big)
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
        ok = {"answer_id": issued, "rating": "down", "reason": "wrong", "comment": "😀" * 500}
        assert c.post("/v1/feedback", json=ok).status_code == 200
    sizes = [p.stat().st_size for p in feedback_files(tmp_path / "feedback")]
    assert len(sizes) == 1 and sizes[0] <= MAX_RECORD_BYTES


def test_the_local_feedback_folder_is_capped(qa_index: Path, tmp_path: Path) -> None:
    from anchored_query.owner.feedback import LocalFeedbackStore

    store = LocalFeedbackStore(tmp_path / "feedback", max_records=5, max_bytes=1 << 20)
    settings = settings_for(qa_index, tmp_path)
    with TestClient(create_app(settings, feedback=store), raise_server_exceptions=False) as c:
        issued = answer_id(c)
        statuses = [
            c.post("/v1/feedback", json={"answer_id": issued, "rating": "up"}).status_code
            for _ in range(8)
        ]
    assert statuses == [200] * 5 + [503] * 3
    assert len(feedback_files(tmp_path / "feedback")) == 5
    # A new process counts what is already there.
    again = LocalFeedbackStore(tmp_path / "feedback", max_records=5, max_bytes=1 << 20)
    with TestClient(create_app(settings, feedback=again), raise_server_exceptions=False) as c:
        r = c.post("/v1/feedback", json={"answer_id": answer_id(c), "rating": "up"})
        assert r.status_code == 503
    small = LocalFeedbackStore(tmp_path / "feedback", max_records=1000, max_bytes=600)
    with TestClient(create_app(settings, feedback=small), raise_server_exceptions=False) as c:
        r = c.post("/v1/feedback", json={"answer_id": answer_id(c), "rating": "up"})
        assert r.status_code == 503


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs (real ENOSPC); skipped where this process cannot mount one."""
    path = tmp_path / "tiny"
    path.mkdir()
    if not (hasattr(os, "geteuid") and os.geteuid() == 0 and sys.platform.startswith("linux")):
        pytest.skip("mounting a tmpfs needs root on Linux")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(path)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr!r}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def test_a_full_disk_is_a_503_and_leaves_no_partial_file(
    qa_index: Path, tmp_path: Path, tiny_disk: Path
) -> None:
    folder = tiny_disk / "feedback"
    settings = settings_for(qa_index, tmp_path, feedback=str(folder))
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        issued = answer_id(c)
        body = {"answer_id": issued, "rating": "down", "comment": "x" * 1000}
        assert c.post("/v1/feedback", json=body).status_code == 200
        filler = tiny_disk / "filler"
        with contextlib.suppress(OSError), open(filler, "wb") as fh:
            for _ in range(64):
                fh.write(b"\0" * 65536)
                fh.flush()
        failed = [c.post("/v1/feedback", json=body).status_code for _ in range(5)]
        assert failed == [503] * 5
        left = sorted(p.name for p in tiny_disk.rglob("*") if p.is_file())
        assert not [n for n in left if n.endswith(".tmp")], left
        assert not [p for p in folder.rglob("*.json") if p.stat().st_size == 0]
        filler.unlink()
        assert c.post("/v1/feedback", json=body).status_code == 200
    assert len(feedback_files(folder)) == 2


def test_a_stalled_s3_fails_the_feedback_write_inside_the_functions_timeout(
    s3: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S3 takes the connection and never answers: the write gives up (the app's 503) well
    inside Lambda's 30 s Timeout. boto3's defaults waited 60 s a read, 5 attempts."""
    from anchored_query.owner.feedback import S3FeedbackStore
    from anchored_query.question.validation import FeedbackRequest

    held: list[socket.socket] = []
    stop = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.2)

        def accept() -> None:
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    held.append(server.accept()[0])  # taken, never answered

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{server.getsockname()[1]}")
        store = S3FeedbackStore(f"s3://{s3.name}/feedback")
        started = time.monotonic()
        with pytest.raises(Exception):  # noqa: B017 - botocore's read timeout
            store.save(FeedbackRequest(answer_id="a" * 32, rating="up"), build_id="b")
        took = time.monotonic() - started
        stop.set()
        thread.join()
    for conn in held:
        conn.close()
    assert took < 25, f"the feedback write gave up after {took:.0f} s"


def test_feedback_files_are_0600_in_0700_folders_whatever_the_umask(
    qa_index: Path, tmp_path: Path
) -> None:
    # Readers' comments may name them (issue 23, finding 9): not readable by other users.
    folder = tmp_path / "feedback"
    folder.mkdir()
    folder.chmod(0o755)  # as an earlier version left it
    old = os.umask(0o022)
    try:
        with TestClient(create_app(settings_for(qa_index, tmp_path))) as client:
            for rating in ("up", "down"):
                payload = {"answer_id": answer_id(client), "rating": rating, "comment": "Ann"}
                assert client.post("/v1/feedback", json=payload).status_code == 200
    finally:
        os.umask(old)
    files = feedback_files(folder)
    folders = [folder, *(p for p in folder.rglob("*") if p.is_dir())]
    assert len(files) == 2 and len(folders) == 2
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {"0o600"}
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in folders} == {"0o700"}
