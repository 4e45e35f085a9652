"""Abuse: CORS, rate limits, oversized and endless bodies, feedback as a write primitive,
path traversal against ``anchored serve``, and secrets in logs or responses.

Real HTTP where the transport matters (uvicorn in a thread or `anchored serve` in a
subprocess, raw sockets so that nothing normalises the request first); the ASGI
app directly where only the app's own rules are under test.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
import select
import shutil
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from anchored_query.owner.feedback import MAX_RECORD_BYTES
from anchored_query.serve.app import RateLimiter, create_app
from appsettings import settings_for
from fakes import (
    Behaviour,
    FakeBedrockServer,
    FakeOpenAIServer,
    Malformed,
    Reply,
    Status,
    quote_passages,
)
from liveserver import AppProcess, ThreadedServer, raw_request, read_response
from s3server import S3Bucket, moto_s3, s3
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

__all__ = ["moto_s3", "s3"]  # fixtures used by name

QUESTION = "Which port does the server use by default?"
ORIGIN = "https://docs.example.com"


# ---------------------------------------------------------------- CORS


@pytest.fixture
def cors_client(qa_index: Path, tmp_path: Path) -> Iterator[TestClient]:
    settings = settings_for(qa_index, tmp_path, allowed_origins=(ORIGIN,))
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


BAD_ORIGINS = [
    "https://evil.example",
    "null",
    "http://docs.example.com",  # another scheme is another origin
    "https://docs.example.com.evil.example",
    "https://docs.example.com:8443",
    "https://evil.example/https://docs.example.com",
    "https://DOCS.example.com.",
]


def test_cors_grants_only_the_configured_origin_on_real_requests(cors_client: TestClient) -> None:
    ok = cors_client.post("/v1/ask", json={"question": QUESTION}, headers={"origin": ORIGIN})
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == ORIGIN
    assert "origin" in ok.headers.get("vary", "").lower()
    assert "access-control-allow-credentials" not in ok.headers
    for origin in BAD_ORIGINS:
        r = cors_client.post("/v1/ask", json={"question": QUESTION}, headers={"origin": origin})
        assert "access-control-allow-origin" not in r.headers, origin
        r = cors_client.get("/v1/search", params={"q": "port"}, headers={"origin": origin})
        assert "access-control-allow-origin" not in r.headers, origin


def test_cors_on_error_responses(cors_client: TestClient) -> None:
    """The ask box can read an error's message from its own origin; nobody else can."""

    def errors(origin: str) -> list[Any]:
        h = {"origin": origin}
        json_h = {**h, "content-type": "application/json"}
        return [
            cors_client.post("/v1/ask", content=b"{broken", headers=json_h),  # 400
            cors_client.post("/v1/ask", json={"question": "x" * 100_000}, headers=h),  # 413
            cors_client.get("/v1/nope", headers=h),  # 404
            cors_client.get("/v1/ask", headers=h),  # 405
            cors_client.post("/v1/feedback", json={"answer_id": "../x", "rating": "up"}, headers=h),
        ]

    for origin, granted in ((ORIGIN, True), ("https://evil.example", False)):
        for r in errors(origin):
            assert r.status_code >= 400 and "error" in r.json()
            assert ("access-control-allow-origin" in r.headers) is granted, (origin, r.url)


def test_cors_on_429_exposes_retry_after_to_the_ask_box(qa_index: Path, tmp_path: Path) -> None:
    settings = settings_for(qa_index, tmp_path, allowed_origins=(ORIGIN,), rate_limit_per_min=1)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        for origin, granted in ((ORIGIN, True), ("https://evil.example", False)):
            c.get("/v1/search", params={"q": "port"}, headers={"origin": origin})
            r = c.get("/v1/search", params={"q": "port"}, headers={"origin": origin})
            assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
            assert ("access-control-allow-origin" in r.headers) is granted
            if granted:  # api.js reads Retry-After: the browser only shows it when exposed
                exposed = r.headers.get("access-control-expose-headers", "").lower()
                assert "retry-after" in exposed and "retry-after" in r.headers


def test_cors_preflight_refuses_other_origins_methods_and_headers(cors_client: TestClient) -> None:
    def preflight(origin: str, method: str = "POST", headers: str = "content-type") -> Any:
        return cors_client.options(
            "/v1/ask",
            headers={
                "origin": origin,
                "access-control-request-method": method,
                "access-control-request-headers": headers,
            },
        )

    ok = preflight(ORIGIN)
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == ORIGIN
    for bad in (
        *(preflight(o) for o in BAD_ORIGINS),
        preflight(ORIGIN, method="DELETE"),
        preflight(ORIGIN, headers="content-type, x-api-key"),
        preflight(ORIGIN, headers="authorization"),
    ):
        assert bad.status_code == 400
        assert bad.headers.get("access-control-allow-origin") in (None, ORIGIN)
        assert bad.headers.get("access-control-allow-origin") != "*"


def test_without_configured_origins_nothing_is_granted(qa_index: Path, tmp_path: Path) -> None:
    with TestClient(create_app(settings_for(qa_index, tmp_path))) as c:
        r = c.post("/v1/ask", json={"question": QUESTION}, headers={"origin": ORIGIN})
        pre = c.options(
            "/v1/ask", headers={"origin": ORIGIN, "access-control-request-method": "POST"}
        )
    assert r.status_code == 200
    assert not [h for h in r.headers if h.startswith("access-control-")]
    assert not [h for h in pre.headers if h.startswith("access-control-allow")]


# ---------------------------------------------------------------- rate limiting


def test_rate_limit_is_per_client(qa_index: Path, tmp_path: Path) -> None:
    """A burst from one client gets 429 + Retry-After; another client is not limited."""
    app = create_app(settings_for(qa_index, tmp_path, rate_limit_per_min=30))

    async def run() -> tuple[list[int], list[int], httpx.Response, float]:
        def client(ip: str) -> httpx.AsyncClient:
            transport = httpx.ASGITransport(app=app, client=(ip, 40000))
            return httpx.AsyncClient(transport=transport, base_url="http://anchored")

        async with client("203.0.113.5") as noisy, client("198.51.100.7") as quiet:
            burst = [
                (await noisy.get("/v1/search", params={"q": "port"})).status_code for _ in range(65)
            ]
            limited = await noisy.post("/v1/feedback", json={"answer_id": "a", "rating": "up"})
            others = [
                (await quiet.get("/v1/search", params={"q": "port"})).status_code for _ in range(5)
            ]
            wait = int(limited.headers["retry-after"])
            await asyncio.sleep(wait)
            after = (await noisy.get("/v1/search", params={"q": "port"})).status_code
            return burst, others, limited, after

    burst, others, limited, after = asyncio.run(run())
    # 30 a minute: a burst of 30, then one more every 2 s.
    assert burst[:30] == [200] * 30 and burst[30:].count(429) >= 4
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited.headers["retry-after"]) <= 2
    assert others == [200] * 5
    assert after == 200


def _function_url_event(source_ip: str, forwarded_for: str) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/v1/search",
        "rawQueryString": "q=port",
        "headers": {
            "host": "abc.lambda-url.us-east-1.on.aws",
            "x-forwarded-for": forwarded_for,
            "x-forwarded-proto": "https",
            "x-forwarded-port": "443",
        },
        "queryStringParameters": {"q": "port"},
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "abc",
            "domainName": "abc.lambda-url.us-east-1.on.aws",
            "domainPrefix": "abc",
            "http": {
                "method": "GET",
                "path": "/v1/search",
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": "curl/8",
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/Jan/2026:00:00:00 +0000",
            "timeEpoch": 1767225600000,
        },
        "isBase64Encoded": False,
    }


def test_on_lambda_the_limit_keys_on_the_source_ip_not_x_forwarded_for(
    qa_index: Path, tmp_path: Path
) -> None:
    mangum = pytest.importorskip("mangum")
    handler = mangum.Mangum(
        create_app(settings_for(qa_index, tmp_path, rate_limit_per_min=3)), lifespan="off"
    )

    class Context:
        aws_request_id = "test"

    def status(source_ip: str, forwarded_for: str) -> int:
        return int(handler(_function_url_event(source_ip, forwarded_for), Context())["statusCode"])

    try:
        # A client rotating X-Forwarded-For is still one client ...
        spoofed = [status("203.0.113.9", f"10.0.0.{i}") for i in range(5)]
        assert spoofed[:3] == [200] * 3 and spoofed[3:] == [429, 429]
        # ... and cannot use someone else's address to get them limited.
        assert status("198.51.100.1", "203.0.113.9") == 200
    finally:
        # Mangum makes an event loop the thread's current one and keeps it (as a Lambda
        # process should); a test must close it, or it is garbage-collected unclosed
        # during whichever test next replaces the current loop.
        asyncio.get_event_loop_policy().get_event_loop().close()
        asyncio.set_event_loop(None)


def test_the_limiter_forgets_the_oldest_clients_first() -> None:
    limiter = RateLimiter(per_minute=1, max_clients=100)
    for i in range(5000):
        assert limiter.check(f"10.0.{i // 256}.{i % 256}") == 0
    assert len(limiter.buckets) == 100
    assert limiter.check("10.0.19.135") > 0  # recent: still limited
    assert limiter.check("10.0.0.1") == 0  # forgotten long ago


# ---------------------------------------------------------------- cross-site simple requests

# What a form or fetch() on any page may send without a CORS preflight.
SIMPLE_TYPES = [
    "text/plain",
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    None,  # fetch() with a string body and no header sends text/plain; curl sends none
    "application/jsonx",
    "application/json-seq",
]


def test_only_json_posts_reach_the_engine(qa_index: Path, tmp_path: Path) -> None:
    """A cross-site "simple request" (text/plain, form-encoded: no preflight, so the
    allowlist never gets to refuse it) is a 415 before the body is read; the engine and
    the feedback store never see it. application/json, which a browser sends only after
    a preflight the allowlist answers, still works."""
    from anchored_query.engine import Engine

    settings = settings_for(qa_index, tmp_path, allowed_origins=(ORIGIN,))
    engine = Engine(settings)
    calls: list[str] = []
    real_ask = engine.ask

    def counting_ask(request: Any) -> Any:
        calls.append("ask")
        return real_ask(request)

    engine.ask = counting_ask  # type: ignore[method-assign]

    class Store:
        def save(self, item: Any, *, build_id: str) -> str:
            calls.append("feedback")
            return f"2026-01-01/1-{uuid.uuid4().hex}.json"

    app = create_app(settings, engine=engine, feedback=Store())
    ask_body = json.dumps({"question": QUESTION}).encode()
    with ThreadedServer(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        answer_id = http.post("/v1/ask", json={"question": QUESTION}).json()["id"]
        calls.clear()
        feedback_body = json.dumps({"answer_id": answer_id, "rating": "down"}).encode()
        for path, body in (("/v1/ask", ask_body), ("/v1/feedback", feedback_body)):
            for content_type in SIMPLE_TYPES:
                headers = {"origin": "https://evil.example"}
                if content_type is not None:
                    headers["content-type"] = content_type
                r = http.post(path, content=body, headers=headers)
                assert r.status_code == 415, (path, content_type, r.status_code)
                error = r.json()["error"]
                assert error["code"] == "unsupported_media_type"
                assert "application/json" in error["message"]
                assert "access-control-allow-origin" not in r.headers
        assert calls == []
        for content_type in (
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
        ):
            h = {"content-type": content_type, "origin": ORIGIN}
            assert http.post("/v1/ask", content=ask_body, headers=h).status_code == 200
            assert http.post("/v1/feedback", content=feedback_body, headers=h).status_code == 200
        assert calls == ["ask", "feedback"] * 3


def test_the_ask_box_sends_json() -> None:
    """plugin/assets/api.js declares application/json on its POSTs (else every ask is a 415)."""
    api = (Path(__file__).parent.parent / "plugin" / "assets" / "api.js").read_text("utf-8")
    assert re.search(r"'Content-Type':\s*'application/json'", api)


# ---------------------------------------------------------------- request size


class CountingApp:
    """Wraps the app and counts the request-body bytes it was handed."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.received = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def counting() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                self.received += len(message.get("body", b""))
            return message

        await self.app(scope, counting, send)


@pytest.fixture
def counted(qa_index: Path, tmp_path: Path) -> Iterator[tuple[CountingApp, ThreadedServer]]:
    app = CountingApp(create_app(settings_for(qa_index, tmp_path, max_body_bytes=65536)))
    with ThreadedServer(app) as srv:
        yield app, srv


def test_a_declared_huge_body_is_refused_before_it_is_sent(
    counted: tuple[CountingApp, ThreadedServer],
) -> None:
    app, srv = counted
    t0 = time.monotonic()
    status, _, body = raw_request(
        srv.port,
        b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000000\r\n\r\n",
        timeout_s=10,
    )
    assert status == 413 and json.loads(body)["error"]["code"] == "too_large"
    assert time.monotonic() - t0 < 5
    assert app.received == 0


@pytest.mark.parametrize("path", ["/v1/ask", "/v1/feedback"])
def test_an_endless_chunked_body_is_cut_off_at_the_limit(
    counted: tuple[CountingApp, ThreadedServer], path: str
) -> None:
    app, srv = counted
    limit, chunk = 65536, b"a" * 16384
    cap = 32 * 1024 * 1024  # what the client would send at most
    sent = 0
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        deadline = time.monotonic() + 30
        while sent < cap and time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break  # the server answered before the body ended
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                break
            sent += len(chunk)
        status, _, body = read_response(sock, timeout_s=10)
    assert status == 413 and json.loads(body)["error"]["code"] == "too_large"
    assert sent < cap, "the server read the whole body"
    # The app stopped reading at the limit, plus at most one network read: asyncio reads up
    # to 256 KiB a time, and on a loaded machine one read can hold several of our chunks.
    assert app.received <= limit + 256 * 1024 + len(chunk)


def test_overlong_urls_and_headers_are_refused_by_the_server(
    counted: tuple[CountingApp, ThreadedServer],
) -> None:
    _, srv = counted
    q = "port " * 40_000
    status, _, _ = raw_request(
        srv.port, f"GET /v1/search?q={q} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), timeout_s=10
    )
    assert status in (400, 413, 414, 431)
    status, _, _ = raw_request(
        srv.port,
        b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n",
        timeout_s=10,
    )
    assert status in (400, 431)
    status, _, body = raw_request(
        srv.port, f"GET /v1/search?q={'p' * 3000} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )
    assert status == 413 and json.loads(body)["error"]["code"] == "too_large"


def test_history_reaches_the_model_trimmed(qa_index: Path, tmp_path: Path) -> None:
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"TURN{i:03d} " + "x" * 900}
        for i in range(60)
    ]
    with FakeOpenAIServer(default=Reply(quote_passages(k=1))) as llm:
        settings = settings_for(
            qa_index,
            tmp_path,
            llm_provider="openai",
            llm_model="m",
            llm_base_url=llm.url,
            max_history_turns=3,
            max_history_chars=2000,
        )
        with TestClient(create_app(settings)) as c:
            r = c.post("/v1/ask", json={"question": "And the port?", "history": history})
        assert r.status_code == 200
        for request in llm.requests:
            turns = re.findall(r"TURN(\d{3})", request.prompt)
            assert all(int(t) >= 54 for t in turns), turns  # only the last 3 exchanges
            past = [m["content"] for m in request.messages[1:-1]]
            assert sum(len(m) for m in past) <= 2000


# ---------------------------------------------------------------- feedback as a write primitive

HOSTILE_IDS = [
    "../../etc/passwd",
    "..\\..\\windows",
    "/etc/passwd",
    "a/../../b",
    "abc\x00.json",
    "%2e%2e%2f",
    "a" * 65,
    "a" * 100_000,
    "",
    " ",
    "ok id",
    "id;rm -rf",
    "ＡＢＣ/..",
]
FEEDBACK_KEY = re.compile(r"^\d{4}-\d{2}-\d{2}/\d+-[0-9a-f]{32}\.json$")


def _feedback_attacks(post: Any) -> list[int]:
    statuses = [post({"answer_id": i, "rating": "down"}).status_code for i in HOSTILE_IDS]
    statuses += [
        post({"answer_id": "ok", "rating": "up", "comment": "c" * 2001}).status_code,
        post({"answer_id": "ok", "rating": "up", "reason": "r" * 201}).status_code,
        post({"answer_id": "ok", "rating": "up", "comment": "😀" * 2001}).status_code,
        post({"answer_id": "ok", "rating": "up", "extra": "x" * 1000}).status_code,
        post({"answer_id": "ok", "rating": "up", "comment": ["x"] * 10}).status_code,
        post({"answer_id": "ok", "rating": "../up"}).status_code,
        post({"answer_id": "ok", "rating": "up", "comment": "x" * 70_000}).status_code,
    ]
    return statuses


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def test_feedback_cannot_write_outside_its_folder_or_store_blobs(
    qa_index: Path, tmp_path: Path
) -> None:
    settings = settings_for(qa_index, tmp_path, max_body_bytes=65536)
    before = _tree(tmp_path)
    with TestClient(create_app(settings)) as c:
        statuses = _feedback_attacks(lambda body: c.post("/v1/feedback", json=body))
        issued = c.post("/v1/ask", json={"question": QUESTION}).json()["id"]
        too_big = c.post(
            "/v1/feedback",
            json={"answer_id": issued, "rating": "up", "reason": "r" * 200, "comment": "😀" * 2000},
        )
        biggest = c.post(
            "/v1/feedback",
            json={"answer_id": issued, "rating": "up", "reason": "r" * 200, "comment": "😀" * 800},
        )
    assert set(statuses) <= {400, 413}, statuses
    assert too_big.status_code == 413
    assert biggest.status_code == 200
    folder = tmp_path / "feedback"
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert len(files) == 1 and FEEDBACK_KEY.match(files[0].relative_to(folder).as_posix())
    assert files[0].stat().st_size <= MAX_RECORD_BYTES
    new = {n for n in _tree(tmp_path) - before if not n.startswith(("cache", "feedback"))}
    assert not new, new
    assert not Path("/etc/passwd.json").exists()


def test_feedback_in_s3_stays_under_its_prefix(
    s3: S3Bucket, qa_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    settings = settings_for(qa_index, tmp_path, feedback=f"s3://{s3.name}/feedback/v1")
    with TestClient(create_app(settings)) as c:
        statuses = _feedback_attacks(lambda body: c.post("/v1/feedback", json=body))
        issued = c.post("/v1/ask", json={"question": QUESTION}).json()["id"]
        ok = c.post(
            "/v1/feedback", json={"answer_id": issued, "rating": "up", "comment": "é" * 1500}
        )
    assert set(statuses) <= {400, 413}, statuses
    assert ok.status_code == 200
    keys = s3.keys()
    assert len(keys) == 1 and keys[0].startswith("feedback/v1/")
    assert FEEDBACK_KEY.match(keys[0].removeprefix("feedback/v1/"))
    assert len(s3.get(keys[0])) <= MAX_RECORD_BYTES


# ---------------------------------------------------------------- `anchored serve` and the site

SECRET = "TOP-SECRET-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def served(qa_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`anchored serve` (the real CLI, a subprocess) on a copy of the qa project, with a
    secret file next to the project and symlinks planted in the served folder."""
    root = tmp_path_factory.mktemp("serve")
    project = root / "project"
    shutil.copytree(qa_project, project, ignore=shutil.ignore_patterns("site"))
    (root / "secret.txt").write_text(SECRET)
    (project / "secret.txt").write_text(SECRET)
    tmpdir = root / "tmp"
    tmpdir.mkdir()
    command = [
        sys.executable,
        "-m",
        "mkdocs_anchored.cli",
        "serve",
        "-f",
        str(project / "mkdocs.yml"),
    ]
    env = {"TMPDIR": str(tmpdir), "NO_MKDOCS_2_WARNING": "1", "ANCHORED_RATE_LIMIT_PER_MIN": "0"}
    with AppProcess(env, command=command, log_file=root / "serve.log") as proc:
        (site,) = tmpdir.glob("anchored-site-*")
        (site / "leak.txt").symlink_to(root / "secret.txt")
        (site / "leakdir").symlink_to(root, target_is_directory=True)
        (site / "inside.html").symlink_to(site / "index.html")
        yield {"port": proc.port, "site": site, "root": root}
    assert not site.exists(), "anchored serve leaves its built site behind"


TRAVERSALS = [
    "/../secret.txt",
    "/../../secret.txt",
    "/%2e%2e/secret.txt",
    "/%2E%2E/%2E%2E/secret.txt",
    "/%2e%2e%2fsecret.txt",
    "/..%2fsecret.txt",
    "/..%2f..%2fsecret.txt",
    "/..%5csecret.txt",
    "/..\\secret.txt",
    "/..\\..\\secret.txt",
    "/guide/../../secret.txt",
    "/guide/%2e%2e/%2e%2e/secret.txt",
    "/%252e%252e/secret.txt",
    "/.%2e/secret.txt",
    "/....//secret.txt",
    "//secret.txt",
    "/%2f%2e%2e%2fsecret.txt",
    "/leak.txt",
    "/leakdir/secret.txt",
    "/leakdir/project/mkdocs.yml",
    "/leakdir/project/.anchored/index/manifest.json",
    "/../project/mkdocs.yml",
    "/../../etc/passwd",
    "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/etc/passwd",
    "/%00",
    "/index.html%00.txt",
    "/%c0%ae%c0%ae/secret.txt",
    "/..%c0%afsecret.txt",
    "http://127.0.0.1/../secret.txt",
    "../secret.txt",
]


@pytest.mark.parametrize("target", TRAVERSALS)
def test_anchored_serve_serves_nothing_outside_the_built_site(
    served: dict[str, Any], target: str
) -> None:
    try:
        status, _, body = raw_request(
            served["port"],
            b"GET " + target.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            timeout_s=10,
        )
    except ConnectionError:
        return  # the server dropped a request it could not parse: nothing served
    assert status in (400, 404), (target, status)
    assert SECRET.encode() not in body and b"root:x:0:0" not in body
    assert b"site_name" not in body and b"anchored-index" not in body


# A host name anchored serve answers for (its allowed hosts: issue 23, finding 7).
LOCAL = b"Host: 127.0.0.1\r\n\r\n"


def test_anchored_serve_still_serves_the_site(served: dict[str, Any]) -> None:
    port = served["port"]
    status, _, body = raw_request(port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert status == 200 and b"anchored" in body
    status, _, body = raw_request(port, b"GET /guide/configuration/ HTTP/1.1\r\n" + LOCAL)
    assert status == 200
    # A symlink that stays inside the site is fine (realpath checked, not the name).
    status, _, _ = raw_request(port, b"GET /inside.html HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert status == 200
    status, _, body = raw_request(port, b"GET /v1/search?q=port HTTP/1.1\r\n" + LOCAL)
    assert status == 200 and json.loads(body)["results"]


def test_anchored_serve_cannot_be_framed_or_sniffed(served: dict[str, Any]) -> None:
    """Another site cannot frame the docs or the ask box (clickjacking), and no response
    is content-sniffed into something else; the API answers carry the same headers."""
    port = served["port"]
    for target in (
        b"/",
        b"/guide/configuration/",
        b"/assets/anchored/anchored.js",
        b"/v1/health",
        b"/nope",
        b"/v1/search?q=port",
    ):
        status, headers, _ = raw_request(port, b"GET " + target + b" HTTP/1.1\r\n" + LOCAL)
        assert status in (200, 404), target
        lowered = {k.lower(): v for k, v in headers.items()}
        assert lowered.get("x-frame-options", "").upper() == "SAMEORIGIN", target
        assert "frame-ancestors 'self'" in lowered.get("content-security-policy", ""), target
        assert lowered.get("x-content-type-options", "").lower() == "nosniff", target


def test_health_is_rate_limited_too(qa_index: Path, tmp_path: Path) -> None:
    settings = settings_for(qa_index, tmp_path, rate_limit_per_min=3)
    with TestClient(create_app(settings)) as c:
        codes = [c.get("/v1/health").status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]


# ---------------------------------------------------------------- secrets


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    for name in ("botocore", "boto3", "urllib3", "httpx", "httpcore", "uvicorn", "anchored"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def _everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    formatter = logging.Formatter("%(name)s %(message)s")
    return "\n".join(formatter.format(r) for r in caplog.records)


def _aws_secrets() -> dict[str, str]:
    tail = uuid.uuid4().hex.upper()
    return {
        "AWS_ACCESS_KEY_ID": "AKIA" + tail[:16],
        "AWS_SECRET_ACCESS_KEY": base64.b64encode(os.urandom(30)).decode(),
        "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjE" + base64.b64encode(os.urandom(90)).decode(),
    }


def test_no_llm_key_in_logs_or_responses_even_when_the_provider_echoes_it(
    qa_index: Path, tmp_path: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    key = "sk-proj-" + uuid.uuid4().hex + uuid.uuid4().hex
    echo: list[Behaviour] = [
        Status(401, f"Incorrect API key provided: {key}. Find yours at https://x/keys."),
        Status(500, f"upstream failed; request had Authorization: Bearer {key}"),
        Malformed(f'{{"error": {{"message": "bad key {key}"}}}}'),
        Malformed(f"<html>key={key}</html>"),
        Reply(f"Your key is {key} [1]. The port is 8000 [1]."),
        Status(429, f"rate limited for {key}", retry_after=30),
    ]
    responses: list[httpx.Response] = []
    with FakeOpenAIServer() as llm:
        settings = settings_for(
            qa_index,
            tmp_path,
            llm_provider="openai",
            llm_model="m",
            llm_base_url=llm.url,
            llm_api_key=key,
            llm_timeout_s=2.0,
        )
        app = create_app(settings)
        server = ThreadedServer(app, log_config=None, log_level="debug", access_log=True)
        with server as srv, httpx.Client(base_url=srv.url, timeout=30) as c:
            for behaviour in echo:
                for mode in ("auto", "llm"):
                    llm.reset()
                    llm.script(*[behaviour] * 6)
                    responses.append(c.post("/v1/ask", json={"question": QUESTION, "mode": mode}))
        assert any(r.sent_credential(key) for r in llm.requests)
    assert {r.status_code for r in responses} <= {200, 502, 504}
    assert any(r.status_code == 502 for r in responses)
    for r in responses:
        assert key not in r.text and key not in str(r.headers)
    logged = _everything_logged(debug_logs)
    assert "LLM failed" in logged or "attempt" in logged
    assert key not in logged
    assert key[:20] not in logged


def test_no_aws_credential_in_logs_with_botocore_at_debug(
    s3: S3Bucket,
    qa_index: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    from build_index.publish import publish

    publish(qa_index, s3.url, client=s3.client)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    settings = settings_for(s3.url, tmp_path, feedback=f"s3://{s3.name}/feedback")
    app = create_app(settings)
    # Credentials the app has never seen: only the patterns can catch them.
    secrets = _aws_secrets()
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    server = ThreadedServer(app, log_config=None, log_level="debug", access_log=True)
    with server as srv, httpx.Client(base_url=srv.url, timeout=60) as c:
        assert c.get("/v1/search", params={"q": "port"}).status_code == 200
        issued = c.post("/v1/ask", json={"question": QUESTION}).json()["id"]
        feedback = c.post("/v1/feedback", json={"answer_id": issued, "rating": "up"})
        assert feedback.status_code == 200
        health = c.get("/v1/health")
    assert secrets["AWS_ACCESS_KEY_ID"] not in health.text
    logged = _everything_logged(debug_logs)
    assert "Sending http request" in logged  # botocore did log its requests at DEBUG
    for name, value in secrets.items():
        assert value not in logged, name
        assert value[:24] not in logged, name


def test_no_aws_credential_in_logs_or_responses_with_bedrock(
    qa_index: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    env = FakeBedrockServer.aws_env()
    secrets = _aws_secrets()
    env.update(secrets)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    token = secrets["AWS_SESSION_TOKEN"]
    with FakeBedrockServer() as srv:
        srv.script(
            Status(403, f"The security token included in the request is invalid: {token}"),
            Reply("port"),
            Status(400, f"bad request from {secrets['AWS_ACCESS_KEY_ID']}"),
        )
        settings = settings_for(
            qa_index,
            tmp_path,
            llm_provider="bedrock",
            llm_model="anthropic.claude-test",
            llm_base_url=srv.url,
            llm_region="us-east-1",
        )
        with TestClient(create_app(settings)) as c:
            first = c.post("/v1/ask", json={"question": QUESTION})
            second = c.post("/v1/ask", json={"question": QUESTION, "mode": "llm"})
    logged = _everything_logged(debug_logs)
    assert "Sending http request" in logged
    for value in secrets.values():
        for text in (first.text, second.text, str(first.headers), logged):
            assert value not in text
            assert value[:24] not in text


def test_the_log_filter_masks_secrets_not_placeholders(caplog: pytest.LogCaptureFixture) -> None:
    from anchored_query.guard import logsafe

    key = "sk-" + uuid.uuid4().hex
    logsafe.protect(key, "testing")  # "testing": moto's credentials, not a secret
    caplog.set_level(logging.INFO)
    log = logging.getLogger("botocore.endpoint")
    log.info("headers=%s", {"X-Amz-Security-Token": b"IQoJunknown/token+value=="})
    log.info("sent %s while testing", key)
    try:
        raise ValueError(f"provider said: bad key {key}")
    except ValueError:
        log.exception("failed")
    text = _everything_logged(caplog) + "".join(r.exc_text or "" for r in caplog.records)
    assert key not in text and "IQoJunknown" not in text
    assert "while testing" in text
    assert logsafe.without_secrets(f"Your key is {key}.") == "Your key is [REDACTED]."
    assert logsafe.without_secrets("token: abc is documented") == "token: abc is documented"
