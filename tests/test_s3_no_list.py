"""The template's function may not list its bucket, and S3 treats such a caller differently.

To a caller without ``s3:ListBucket`` S3 answers a missing key with ``403 AccessDenied``,
not ``404 NoSuchKey`` (so the caller cannot learn which keys exist). moto does not
model that, so these tests put a forwarding proxy between the function and the moto
server that does what S3 does for such a caller: every 404 becomes a 403 AccessDenied.
The function then meets, over real HTTP, the answers it gets on AWS:

- an unversioned store has no ``versions.json``: the function looks for it once, takes
  the 403 as "not versioned" and serves the index (it used to look again, with a
  warning, on every request);
- nothing published yet: the 503's log line says so and names both causes.
"""

from __future__ import annotations

import http.client
import http.server
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from anchored_query.serve.app import create_app
from appsettings import settings_for
from s3server import MotoS3, S3Bucket, moto_s3, s3  # noqa: F401
from starlette.testclient import TestClient

from build_index.publish import publish

DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
)


class NoListProxy(http.server.ThreadingHTTPServer):
    """Forwards every request to ``upstream``; a 404 comes back as S3's 403 AccessDenied.

    ``gets`` counts the GET requests by path (``/bucket/key``)."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream = urlsplit(upstream)
        self.gets: Counter[str] = Counter()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Forward(http.server.BaseHTTPRequestHandler):
    server: NoListProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if self.command == "GET":
            self.server.gets[self.path.split("?", 1)[0]] += 1
        up = self.server.upstream
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            headers["Host"] = up.netloc
            conn.request(self.command, self.path, body=body, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
            if reply.status == 404:
                self.send_response(403)
                self.send_header("Content-Type", "application/xml")
                self.send_header(
                    "Content-Length", str(len(DENIED) if self.command != "HEAD" else 0)
                )
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(DENIED)
                return
            self.send_response(reply.status)
            for key, value in reply.getheaders():
                if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        finally:
            conn.close()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward


@pytest.fixture
def no_list(s3: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> Iterator[NoListProxy]:  # noqa: F811
    """The proxy in front of the test's moto server; new boto3 clients go through it."""
    proxy = NoListProxy(s3.server.endpoint_url)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.endpoint_url)
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_the_proxy_answers_like_s3_to_a_caller_that_may_not_list(
    s3: S3Bucket,  # noqa: F811
    no_list: NoListProxy,
) -> None:
    """Guard for the tests below: through the proxy a missing key is a 403 AccessDenied."""
    from botocore.exceptions import ClientError

    from build_index.s3_store import DENIED_CODES, error_code, make_client

    client = make_client()
    with pytest.raises(ClientError) as caught:
        client.get_object(Bucket=s3.name, Key="site/versions.json")
    assert error_code(caught.value) in DENIED_CODES
    s3.client.put_object(Bucket=s3.name, Key="site/x", Body=b"x")
    assert client.get_object(Bucket=s3.name, Key="site/x")["Body"].read() == b"x"


def test_an_unversioned_store_is_served_and_versions_json_looked_for_once(
    s3: S3Bucket,  # noqa: F811
    no_list: NoListProxy,
    qa_index: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    publish(qa_index, s3.url, client=s3.client)
    client = TestClient(create_app(settings_for(s3.url, tmp_path)))
    with caplog.at_level(logging.INFO, logger="anchored.query"):
        for question in ("How do I install it?", "What is the default port?", "Install"):
            response = client.get("/v1/search", params={"q": question})
            assert response.status_code == 200, response.text
            assert response.json()["results"]
    catalog = f"/{s3.name}/site/versions.json"
    assert no_list.gets[catalog] == 1, no_list.gets
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("anchored")
    ]
    assert not warned, warned
    assert any("unversioned index" in r.getMessage() for r in caplog.records)


def test_nothing_published_says_so_when_s3_answers_403(
    s3: S3Bucket,  # noqa: F811
    no_list: NoListProxy,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = TestClient(create_app(settings_for(s3.url, tmp_path)))
    with caplog.at_level(logging.INFO):
        response = client.get("/v1/search", params={"q": "install"})
    assert response.status_code == 503, response.text
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "no index is published at" in logged and "may not read" in logged, logged
    assert "AccessDenied" in logged
