"""The HTTP API end to end, on a real index built by `mkdocs build` with the plugin."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from starlette.testclient import TestClient


def make_client(index: Path, tmp_path: Path, **overrides: Any) -> TestClient:
    settings = Settings(
        index=str(index),
        cache_dir=str(tmp_path / "cache"),
        feedback=str(tmp_path / "feedback"),
        refresh_s=0,
        **overrides,
    )
    return TestClient(create_app(settings), raise_server_exceptions=False)


@pytest.fixture
def client(qa_index: Path, tmp_path: Path) -> Iterator[TestClient]:
    with make_client(qa_index, tmp_path) as c:
        yield c


def ids_on_page(project: Path, url: str) -> set[str]:
    page = url.split("#", 1)[0]
    html = (project / "site" / page / "index.html").read_text("utf-8")
    return set(re.findall(r'\sid="([^"]+)"', html))


def test_health_names_the_build(client: TestClient, qa_index: Path) -> None:
    body = client.get("/v1/health").json()
    manifest = json.loads((qa_index / "manifest.json").read_text())
    assert body["build_id"] == manifest["build_id"]
    assert body["chunks"] == manifest["counts"]["chunks"] > 0
    assert body["llm"] == "none"


def test_search_returns_sections_with_real_anchors(client: TestClient, qa_project: Path) -> None:
    body = client.get("/v1/search", params={"q": "change the development server port"}).json()
    assert body["results"], body
    top = body["results"][0]
    assert top["url"] == "guide/configuration/#port"
    for r in body["results"]:
        anchor = r["url"].partition("#")[2]
        assert anchor in ids_on_page(qa_project, r["url"]) or anchor == ""


def test_extractive_answer_cites_in_order_and_highlights_page_text(
    client: TestClient, qa_project: Path, qa_index: Path
) -> None:
    body = client.post("/v1/ask", json={"question": "Which port does the server use by default?"})
    assert body.status_code == 200, body.text
    answer = body.json()
    assert answer["mode"] == "extractive" and not answer["abstained"]
    assert answer["answer"] and all(s["citations"] for s in answer["answer"])
    order: list[int] = []
    for sentence in answer["answer"]:
        for n in sentence["citations"]:
            if n not in order:
                order.append(n)
    assert order == list(range(1, len(order) + 1))
    assert [c["n"] for c in answer["citations"]] == order
    text = " ".join(s["text"] for s in answer["answer"])
    assert "8000" in text
    sections = {
        json.loads(line)["id"]: json.loads(line)["text"]
        for line in (qa_index / "sections.jsonl").read_text("utf-8").splitlines()
    }
    for c in answer["citations"]:
        page, _, anchor = c["url"].partition("#")
        assert anchor in ids_on_page(qa_project, c["url"])
        section_text = " ".join(sections[f"{page}#{anchor}"].split())
        assert c["highlight"] and c["highlight"] in section_text


def test_unrelated_question_abstains_and_lists_what_is_covered(client: TestClient) -> None:
    answer = client.post(
        "/v1/ask", json={"question": "What is the best recipe for sourdough bread?"}
    ).json()
    assert answer["abstained"] is True
    assert answer["answer"] == []
    assert answer["citations"], "an abstention still lists the closest sections"


def test_scope_limits_the_sources(client: TestClient) -> None:
    answer = client.post(
        "/v1/ask",
        json={"question": "How do I change the port?", "scope": {"include": ["troubleshooting/"]}},
    ).json()
    assert answer["citations"]
    assert all(c["url"].startswith("troubleshooting/") for c in answer["citations"])


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"", 400, "bad_request"),
        (b"{broken", 400, "bad_json"),
        (b"\xff\xfe\xfa", 400, "bad_encoding"),
        (json.dumps({"question": "   "}).encode(), 400, "empty"),
        (json.dumps({"question": ["a"]}).encode(), 400, "bad_request"),
        (json.dumps({"question": "x" * 100_000}).encode(), 413, "too_large"),
        (
            json.dumps(
                {"question": "ok?", "history": [{"role": "user", "content": "hi"}] * 1001}
            ).encode(),
            413,
            "too_large",
        ),
    ],
)
def test_bad_requests_get_json_errors(
    client: TestClient, body: bytes, status: int, code: str
) -> None:
    response = client.post("/v1/ask", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


def test_long_history_is_trimmed_not_refused(client: TestClient) -> None:
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(1000)
    ]
    response = client.post("/v1/ask", json={"question": "And the port?", "history": history})
    assert response.status_code == 200


def test_unknown_route_and_method(client: TestClient) -> None:
    assert client.get("/v1/nope").json()["error"]["code"] == "not_found"
    assert client.get("/v1/ask").status_code == 405


def test_missing_index_is_a_503_naming_the_problem_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with make_client(tmp_path / "nowhere", tmp_path) as c:
        response = c.get("/v1/search", params={"q": "port"})
    assert response.status_code == 503
    assert "nowhere" not in response.text and str(tmp_path) not in response.text
    assert "no index is published" in response.json()["error"]["message"]
    assert "nowhere" in caplog.text


def test_tampered_index_is_refused_naming_the_file(
    qa_index: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "index"
    shutil.copytree(qa_index, broken)
    with open(broken / "chunks.jsonl", "a", encoding="utf-8") as fh:
        fh.write("\n")
    with make_client(broken, tmp_path) as c:
        response = c.post("/v1/ask", json={"question": "port?"})
    assert response.status_code == 503
    assert "damaged" in response.json()["error"]["message"] and str(tmp_path) not in response.text
    assert "chunks.jsonl" in caplog.text


def test_feedback_is_stored_before_the_reply(client: TestClient, tmp_path: Path) -> None:
    issued = client.post("/v1/ask", json={"question": "port?"}).json()["id"]
    response = client.post(
        "/v1/feedback", json={"answer_id": issued, "rating": "down", "reason": "wrong"}
    )
    assert response.status_code == 200 and response.json()["stored"] is True
    files = list((tmp_path / "feedback").rglob("*.json"))
    assert len(files) == 1
    stored = json.loads(files[0].read_text())
    assert stored["answer_id"] == issued and stored["rating"] == "down"


def test_rate_limit_answers_429_with_retry_after(qa_index: Path, tmp_path: Path) -> None:
    with make_client(qa_index, tmp_path, rate_limit_per_min=2) as c:
        codes = [c.get("/v1/search", params={"q": "port"}).status_code for _ in range(3)]
        last = c.get("/v1/search", params={"q": "port"})
    assert codes[:2] == [200, 200] and codes[2] == 429
    assert int(last.headers["retry-after"]) >= 1


def test_cors_allows_only_configured_origins(qa_index: Path, tmp_path: Path) -> None:
    with make_client(qa_index, tmp_path, allowed_origins=("https://docs.example.com",)) as c:
        ok = c.options(
            "/v1/ask",
            headers={
                "origin": "https://docs.example.com",
                "access-control-request-method": "POST",
            },
        )
        bad = c.options(
            "/v1/ask",
            headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
        )
    assert ok.headers.get("access-control-allow-origin") == "https://docs.example.com"
    assert "access-control-allow-origin" not in bad.headers


def test_served_site_has_no_path_traversal(
    qa_project: Path, qa_index: Path, tmp_path: Path
) -> None:
    settings = Settings(index=str(qa_index), cache_dir=str(tmp_path), refresh_s=0)
    app = create_app(settings, site_dir=qa_project / "site")
    with TestClient(app) as c:
        assert c.get("/").status_code == 200
        assert "anchored-config" in c.get("/guide/configuration/").text
        for path in ("/../mkdocs.yml", "/%2e%2e/mkdocs.yml", "/..%2fmkdocs.yml"):
            assert c.get(path).status_code == 404
