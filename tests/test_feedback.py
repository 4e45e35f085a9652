"""Feedback: where it lives, which answer ids it accepts, what a record may hold,
and what a failed write leaves behind (real HTTP: moto S3, uvicorn, TestClient)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from anchored_query.app import create_app
from anchored_query.engine import Engine
from anchored_query.settings import Settings
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
