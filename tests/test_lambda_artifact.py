"""The deployed function, as close to Lambda as this machine gets without AWS.

The artifact is built with ``lambda/Makefile`` (what ``sam build`` runs), for
this interpreter and CPU so it can be imported here (cached between runs, see
``lambda_build.py``). ``handler.handler`` is then imported FROM THE ARTIFACT in
a fresh isolated interpreter (``python -I -S``: no site-packages, no
``PYTHON*`` variables), with the environment template.yaml sets, and fed
Lambda events from ``tests/events/`` with a fake context. The index it answers
from was published with ``build_index.publish.publish`` to a real
S3-compatible server over HTTP (moto in server mode) and is fetched through
``current.json`` exactly as on Lambda.
"""

from __future__ import annotations

import base64
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lambda_build import FORBIDDEN, artifact_sizes, build_artifact, invoke, lambda_env
from s3server import MotoS3, moto_s3  # noqa: F401  # the session's S3 server

from build_index.publish import publish

EVENTS = Path(__file__).parent / "events"
ORDER = (
    "function-url-search.json",
    "function-url-ask.json",
    "function-url-preflight.json",
    "function-url-bad-json.json",
    "http-api-v2-ask.json",
    "http-api-v2-health.json",
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the artifact holds manylinux wheels"
)


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return event


@pytest.fixture(scope="module")
def artifact() -> Path:
    path, _ = build_artifact()
    return path


@pytest.fixture(scope="module")
def published(moto_s3: MotoS3, qa_index: Path) -> Iterator[tuple[str, str]]:  # noqa: F811
    """``(s3 url, build id)`` of the qa site's index published to the moto server."""
    client = moto_s3.client()
    bucket = f"anchored-lambda-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    target = f"s3://{bucket}/docs"
    result = publish(qa_index, target, client=client)
    yield target, result.build_id


@pytest.fixture(scope="module")
def run(
    artifact: Path,
    published: tuple[str, str],
    moto_s3: MotoS3,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """One cold process of the function, given every event in ``ORDER``."""
    target, _ = published
    env = lambda_env(target, moto_s3.endpoint_url, tmp_path_factory.mktemp("lambda-tmp"))
    return invoke(artifact, [load_event(name) for name in ORDER], env)


def response(run: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = run["responses"][ORDER.index(name)]
    return found


def body_of(resp: dict[str, Any]) -> Any:
    body = resp["body"]
    if resp.get("isBase64Encoded"):
        body = base64.b64decode(body).decode("utf-8")
    return json.loads(body)


def cors_headers(resp: dict[str, Any]) -> list[str]:
    return [h for h in resp.get("headers", {}) if h.lower().startswith("access-control-")]


def test_events_are_lambda_payloads() -> None:
    for name in ORDER:
        event = load_event(name)
        assert event["version"] == "2.0" and event["routeKey"] == "$default", name
        http = event["requestContext"]["http"]
        assert event["rawPath"] == http["path"], name
        assert isinstance(event["isBase64Encoded"], bool), name
        if name.startswith("function-url-"):
            assert event["requestContext"]["accountId"] == "anonymous", name  # AuthType NONE
            assert event["requestContext"]["domainName"].endswith(".on.aws"), name
        else:
            assert ".execute-api." in event["requestContext"]["domainName"], name
    assert load_event("function-url-bad-json.json")["isBase64Encoded"] is True
    assert load_event("function-url-ask.json")["isBase64Encoded"] is False


def test_handler_loads_from_the_artifact_only(run: dict[str, Any], artifact: Path) -> None:
    for name, where in run["loaded_from"].items():
        assert Path(where).is_relative_to(artifact), f"{name} came from {where}"
    importable = [name for name, found in run["importable"].items() if found]
    assert importable == [], f"the artifact must not ship {importable}"
    assert set(run["importable"]) == set(FORBIDDEN)
    assert not (artifact / "build_index" / "models").exists(), "the model travels in the index"


def test_search_through_a_function_url(run: dict[str, Any], published: tuple[str, str]) -> None:
    resp = response(run, "function-url-search.json")
    assert resp["statusCode"] == 200, resp
    assert resp["headers"]["content-type"] == "application/json"
    assert cors_headers(resp) == [], "the function URL's CORS config emits these, not the app"
    body = body_of(resp)
    assert body["build_id"] == published[1]
    assert 1 <= len(body["results"]) <= 5
    top = body["results"][0]
    assert set(top) >= {"url", "chunk_id", "title", "heading_path", "score", "snippet"}
    assert top["url"] == "guide/configuration/#port"
    assert "dev_addr" in top["snippet"]


def test_ask_through_a_function_url(run: dict[str, Any], published: tuple[str, str]) -> None:
    resp = response(run, "function-url-ask.json")
    assert resp["statusCode"] == 200, resp
    assert cors_headers(resp) == []
    body = body_of(resp)
    assert body["build_id"] == published[1]
    assert body["mode"] == "extractive" and body["abstained"] is False
    assert body["answer"] and all({"text", "citations"} <= set(s) for s in body["answer"])
    cited = {n for sentence in body["answer"] for n in sentence["citations"]}
    assert cited and cited == {c["n"] for c in body["citations"]}
    for citation in body["citations"]:
        assert set(citation) >= {"n", "chunk_id", "url", "title", "heading_path", "passage"}
    # The port is set on the configuration page (its #port section or its options table).
    assert any(c["url"].startswith("guide/configuration/#") for c in body["citations"])
    assert "port" in " ".join(s["text"] for s in body["answer"])


def test_ask_through_an_http_api(run: dict[str, Any]) -> None:
    resp = response(run, "http-api-v2-ask.json")
    assert resp["statusCode"] == 200, resp
    body = body_of(resp)
    assert body["abstained"] is False and body["citations"]
    assert any(c["url"].startswith("guide/configuration/") for c in body["citations"])


def test_health_through_an_http_api(run: dict[str, Any], published: tuple[str, str]) -> None:
    resp = response(run, "http-api-v2-health.json")
    assert resp["statusCode"] == 200, resp
    body = body_of(resp)
    assert body["status"] == "ok" and body["build_id"] == published[1]
    assert body["chunks"] > 0 and body["model"]


def test_a_form_encoded_post_is_a_415_with_a_json_error(run: dict[str, Any]) -> None:
    """curl -d without a content type: refused, so a cross-site form cannot ask either."""
    resp = response(run, "function-url-bad-json.json")
    assert resp["statusCode"] == 415, resp
    assert resp["headers"]["content-type"] == "application/json"
    assert body_of(resp) == {
        "error": {
            "code": "unsupported_media_type",
            "message": "send the request body as application/json",
        }
    }
    assert "Traceback" not in run["stderr"]


def test_preflight_is_left_to_the_function_url(run: dict[str, Any]) -> None:
    """With CORS on the function URL (template.yaml), the app grants nothing itself.

    If Lambda forwards a preflight at all, a 2xx lets the URL's configured
    headers stand alone; a 405 would fail the preflight in the browser.
    """
    resp = response(run, "function-url-preflight.json")
    assert resp["statusCode"] == 204, resp
    assert cors_headers(resp) == []
    assert not resp.get("body")


def test_preflight_gets_the_apps_cors_when_it_owns_cors(
    artifact: Path,
    published: tuple[str, str],
    moto_s3: MotoS3,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Behind a front without CORS, ANCHORED_ALLOWED_ORIGINS makes the app answer it."""
    env = lambda_env(
        published[0],
        moto_s3.endpoint_url,
        tmp_path,
        ANCHORED_ALLOWED_ORIGINS="https://docs.example.com",
    )
    out = invoke(artifact, [load_event("function-url-preflight.json")], env)
    resp = out["responses"][0]
    assert resp["statusCode"] == 200, resp
    assert resp["headers"]["access-control-allow-origin"] == "https://docs.example.com"
    assert "POST" in resp["headers"]["access-control-allow-methods"]


# Lambda refuses a deployment package over 250 MB unzipped (code and layers together).
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024


def test_artifact_fits_lambdas_size_limit_with_room_to_spare(artifact: Path) -> None:
    size = artifact_sizes(artifact)["unzipped"]
    # 10% headroom: a dependency's next release must not break deploys at sam deploy time.
    assert size < 0.9 * LAMBDA_UNZIPPED_LIMIT, f"{size / 2**20:.0f} MB unzipped"
    assert not any(artifact.glob("cryptography*")), "cryptography is trimmed (lambda/Makefile)"
