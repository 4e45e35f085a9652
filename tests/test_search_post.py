"""POST /v1/search: the question in the body, not in the URL that CDN and proxy logs keep."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from starlette.testclient import TestClient


@pytest.fixture
def client(qa_index: Path, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        index=str(qa_index),
        cache_dir=str(tmp_path / "cache"),
        feedback=str(tmp_path / "feedback"),
        refresh_s=0,
        rate_limit_per_min=0,
    )
    with TestClient(create_app(settings)) as c:
        yield c


def test_post_search_answers_like_get(client: TestClient) -> None:
    got = client.get("/v1/search", params={"q": "default port", "k": "3"})
    posted = client.post("/v1/search", json={"q": "default port", "k": 3})
    assert posted.status_code == 200 and got.status_code == 200
    assert [r["chunk_id"] for r in posted.json()["results"]] == [
        r["chunk_id"] for r in got.json()["results"]
    ]
    assert len(posted.json()["results"]) == 3
    assert client.post("/v1/search", json={"q": "default port"}).json()["results"]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"q": ""}, 400),
        ({"q": "port", "k": "3"}, 400),
        ({"q": "port", "k": True}, 400),
        ({"q": "port", "k": 101}, 400),
        ({"q": "port", "query": "port"}, 400),
        ({"k": 3}, 400),
        ({"q": "x" * 5000}, 413),
    ],
)
def test_post_search_checks_its_body(
    client: TestClient, body: dict[str, object], status: int
) -> None:
    response = client.post("/v1/search", json=body)
    assert response.status_code == status
    assert response.json()["error"]["code"]


def test_post_search_takes_json_only(client: TestClient) -> None:
    response = client.post(
        "/v1/search", content=b'{"q": "port"}', headers={"content-type": "text/plain"}
    )
    assert response.status_code == 415
