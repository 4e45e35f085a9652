"""A cold start while S3 stalls answers a 503 within the request's deadline, over real HTTP.

The index is published to moto's S3 server; the function reads it through
``tests/stallings3.py``, a real HTTP server in front of moto that can take
connections and never answer, or answer a download's headers and first bytes
and then nothing. The app runs under uvicorn with ``ANCHORED_DEADLINE_S`` of
3 s, so a cold load may wait 1 s for S3 (the deadline less the 2 s kept for
the extractive answer, at least 1 s) and the catalog probe before it half of
that. Before, one stalled GET waited 60 s per read, 4 attempts, 3 times over,
so the request ended at Lambda's Timeout instead.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import anchored_query.engine as engine_module
import httpx
import pytest
from anchored_query.serve.app import create_app
from appsettings import settings_for
from liveserver import ThreadedServer
from s3server import S3Bucket, moto_s3, s3
from stallings3 import StallingS3

from build_index.publish import publish

__all__ = ["moto_s3", "s3"]  # fixtures used by name

DEADLINE_S = 3.0
# Every answer during a stall comes within the deadline; the margin is for a busy machine.
BOUND_S = DEADLINE_S + 2.0
WAIT_S = 60.0
CLIENT_S = 30.0  # Lambda's Timeout in template.yaml: a request held longer fails


@pytest.fixture
def stalling(s3: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> Iterator[StallingS3]:
    """The relay in front of this test's bucket; every new boto3 client goes through it."""
    with StallingS3(s3.server.endpoint_url) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.endpoint_url)
        yield proxy


def build_id_of(index_dir: Path) -> str:
    return str(json.loads((index_dir / "manifest.json").read_text())["build_id"])


def timed_get(client: httpx.Client, path: str, **params: str) -> tuple[httpx.Response, float]:
    t0 = time.monotonic()
    response = client.get(path, params=params)
    return response, time.monotonic() - t0


def recover(client: httpx.Client) -> list[int]:
    """Ask until a search answers 200, waiting Retry-After after each 503 (each within the
    bound); the statuses."""
    codes: list[int] = []
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        response, took = timed_get(client, "/v1/search", q="port")
        codes.append(response.status_code)
        if response.status_code == 200:  # the load, then the search (CPU: not bounded here)
            return codes
        assert response.status_code == 503, response.text
        assert took < BOUND_S, (took, response.text)
        time.sleep(int(response.headers["retry-after"]))
    raise AssertionError(f"no 200 within {WAIT_S} s: {codes}")


def no_part_files(cache: Path) -> bool:
    return not [p for p in cache.rglob("*.part")]


def test_a_store_that_never_answers_is_a_503_within_the_deadline_then_recovers(
    s3: S3Bucket,
    stalling: StallingS3,
    qa_index: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A back-off long enough that the next request surely comes within it, on a busy
    # machine too (the default first wait is 1 s).
    monkeypatch.setattr(engine_module, "COLD_RETRY_BASE_S", 4.0)
    publish(qa_index, s3.url, client=s3.client)
    stalling.silent = True
    caplog.set_level(logging.INFO)
    app = create_app(settings_for(s3.url, tmp_path, deadline_s=DEADLINE_S))
    with ThreadedServer(app) as srv, httpx.Client(base_url=srv.url, timeout=CLIENT_S) as client:
        first, took = timed_get(client, "/v1/search", q="port")
        assert first.status_code == 503, first.text
        assert took < BOUND_S, took
        error = first.json()["error"]
        assert error["code"] == "index_unavailable"
        assert error["message"].startswith("the index is unavailable: ")
        for detail in (s3.name, "s3://", stalling.endpoint_url):
            assert detail not in first.text, detail
        assert int(first.headers["retry-after"]) >= 1
        logged = "\n".join(r.getMessage() for r in caplog.records)
        assert "S3 is slow or not answering" in logged or "Read timeout" in logged, logged

        # Within Retry-After the same 503 comes at once, without asking S3 for the catalog.
        probes = stalling.count("/versions.json")
        during = client.post("/v1/ask", json={"question": "Which port does it use?"})
        assert during.status_code == 503 and during.json() == first.json()
        assert stalling.count("/versions.json") == probes
        assert app.state.engine.source.wait_for_download(WAIT_S)  # the stalled one gives up
        assert stalling.held >= 1  # S3 took requests and never answered them

        # S3 answers again: a request after Retry-After loads the index (never a 5xx
        # other than the 503, none slower than the bound).
        stalling.resume()
        codes = recover(client)
        assert set(codes) <= {200, 503}
        health = client.get("/v1/health")
        assert health.status_code == 200 and health.json()["build_id"] == build_id_of(qa_index)
    cache = tmp_path / "cache"
    assert (cache / build_id_of(qa_index) / "manifest.json").is_file()
    assert no_part_files(cache)


def test_a_download_that_stops_midway_is_a_503_and_leaves_nothing_trusted(
    s3: S3Bucket, stalling: StallingS3, qa_index: Path, tmp_path: Path
) -> None:
    """S3 sends model.onnx's headers and first 64 KiB, then nothing: the request ends
    within its deadline; the download is given up without a manifest or a part file; the
    files already verified are kept, and the next load after Retry-After completes."""
    publish(qa_index, s3.url, client=s3.client)
    build = build_id_of(qa_index)
    stalling.stall_key = "model.onnx"
    app = create_app(settings_for(s3.url, tmp_path, deadline_s=DEADLINE_S))
    cache = tmp_path / "cache"
    with ThreadedServer(app) as srv, httpx.Client(base_url=srv.url, timeout=CLIENT_S) as client:
        first, took = timed_get(client, "/v1/search", q="port")
        assert first.status_code == 503, first.text
        assert took < BOUND_S, took
        assert int(first.headers["retry-after"]) >= 1

        # The download in the background reaches model.onnx (on a busy machine maybe only
        # after the 503), then gives up (its read times out, no retry is left in the
        # limit) and removes its part file; the build is not marked complete.
        assert app.state.engine.source.wait_for_download(WAIT_S)
        assert stalling.count("/model.onnx") >= 1 and stalling.held >= 1
        assert no_part_files(cache)
        build_dir = cache / build
        assert not (build_dir / "manifest.json").exists()
        manifest = json.loads((qa_index / "manifest.json").read_text())
        for name, entry in manifest["files"].items():
            if (build_dir / name).exists():  # a final name only for a verified file
                assert (build_dir / name).read_bytes() == (qa_index / name).read_bytes(), name
                assert entry["size"] == (build_dir / name).stat().st_size
        assert not (build_dir / "model.onnx").exists()

        stalling.resume()
        codes = recover(client)
        assert set(codes) <= {200, 503}
        health = client.get("/v1/health")
        assert health.status_code == 200 and health.json()["build_id"] == build
    assert (cache / build / "manifest.json").is_file()
    assert no_part_files(cache)


def test_a_slow_download_started_by_the_prefetch_is_the_only_download(
    s3: S3Bucket, stalling: StallingS3, qa_index: Path, tmp_path: Path
) -> None:
    """A cold start's prefetch (handler.py) starts the download; S3 is slow, so the first
    requests answer 503 within the deadline, and the build they then answer from is the
    prefetch's: model.onnx is read from S3 once. Before, the prefetch gave up at a
    request's limit while its download went on, and the request started a second one."""
    from anchored_query.store.prefetch import prefetch
    from anchored_query.store.prefetches import wait_for_prefetch

    publish(qa_index, s3.url, client=s3.client)
    stalling.slow_key, stalling.slow_s = "model.onnx", 3.0
    assert prefetch(s3.url, cache_dir=tmp_path / "cache")
    app = create_app(settings_for(s3.url, tmp_path, deadline_s=DEADLINE_S))
    with ThreadedServer(app) as srv, httpx.Client(base_url=srv.url, timeout=CLIENT_S) as client:
        codes = recover(client)
        assert codes[0] == 503 and codes[-1] == 200, codes
    wait_for_prefetch(s3.url, tmp_path / "cache", timeout_s=WAIT_S)
    assert stalling.count("model.onnx") == 1
    assert no_part_files(tmp_path / "cache")
