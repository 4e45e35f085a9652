"""The host names a server answers for and whose forwarded headers it believes, over real
HTTP (issue 23, finding 7): a DNS-rebinding page (``Host: evil.example``) is refused on every
route of ``anchored serve``, ``/mcp`` included, and ``X-Forwarded-For`` rotated from
127.0.0.1 names no new client unless ``ANCHORED_FORWARDED_ALLOW_IPS`` trusts that proxy."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from anchored_query.serve.app import create_app
from anchored_query.serve.hosts import AllowedHosts
from anchored_query.settings import Settings
from liveserver import AppProcess, ThreadedServer
from mkdocs_anchored.cli import local_hosts, server_options

EVIL = "evil.example"
MCP_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def serve_settings(index: Path, tmp_path: Path, **env: str) -> Settings:
    """What ``anchored serve`` reads: ANCHORED_ALLOWED_HOSTS this machine's names unless set."""
    values = {
        "ANCHORED_INDEX": str(index),
        "ANCHORED_CACHE_DIR": str(tmp_path / "cache"),
        "ANCHORED_FEEDBACK": str(tmp_path / "feedback"),
        "ANCHORED_REFRESH_S": "0",
        "ANCHORED_RATE_LIMIT_PER_MIN": "0",
        **env,
    }
    values.setdefault("ANCHORED_ALLOWED_HOSTS", local_hosts("127.0.0.1"))
    return Settings.from_env(values)


def requests(url: str, host: str | None) -> dict[str, httpx.Response]:
    """/v1/ask, /mcp, /v1/search, /v1/health and a page, each sent with ``host`` as Host."""
    headers = {"Host": host} if host else {}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        return {
            "ask": c.post("/v1/ask", json={"question": "Which port does Skylark use?"}),
            "mcp": c.post("/mcp", json=MCP_LIST, headers=MCP_HEADERS),
            "search": c.get("/v1/search", params={"q": "port"}),
            "health": c.get("/v1/health"),
        }


def test_a_rebinding_host_is_refused_on_every_route(qa_index: Path, tmp_path: Path) -> None:
    settings = serve_settings(qa_index, tmp_path)
    with ThreadedServer(create_app(settings), **server_options(settings)) as srv:
        for route, response in requests(srv.url, EVIL).items():
            assert response.status_code == 421, route
            assert response.json()["error"]["code"] == "unknown_host", route
            assert "nosniff" in response.headers.get("x-content-type-options", "")
        for host in (f"127.0.0.1:{srv.port}", f"localhost:{srv.port}", f"[::1]:{srv.port}"):
            statuses = {r: resp.status_code for r, resp in requests(srv.url, host).items()}
            assert statuses == dict.fromkeys(statuses, 200), (host, statuses)


def test_more_hosts_by_the_setting(qa_index: Path, tmp_path: Path) -> None:
    hosts = "localhost,docs.example.org,*.internal.example"
    settings = serve_settings(qa_index, tmp_path, ANCHORED_ALLOWED_HOSTS=hosts)
    with ThreadedServer(create_app(settings), **server_options(settings)) as srv:
        for host, status in [
            ("docs.example.org", 200),
            ("DOCS.example.org:443", 200),
            ("wiki.internal.example", 200),
            ("internal.example", 421),
            ("127.0.0.1", 421),  # the setting replaces the default
            (EVIL, 421),
        ]:
            assert requests(srv.url, host)["mcp"].status_code == status, host


def searches(url: str, forwarded: list[str]) -> list[int]:
    with httpx.Client(base_url=url, timeout=60) as c:
        return [
            c.get("/v1/search", params={"q": "port"}, headers={"X-Forwarded-For": ip}).status_code
            for ip in forwarded
        ]


ROTATED = [f"203.0.113.{i}" for i in range(1, 8)]


def test_a_rotated_forwarded_for_is_one_client_unless_its_proxy_is_trusted(
    qa_index: Path, tmp_path: Path
) -> None:
    settings = serve_settings(qa_index, tmp_path, ANCHORED_RATE_LIMIT_PER_MIN="4")
    with ThreadedServer(create_app(settings), **server_options(settings)) as srv:
        assert searches(srv.url, ROTATED) == [200] * 4 + [429] * 3
    # Behind a reverse proxy on this machine the owner says so, and each reader counts apart.
    trusted = serve_settings(
        qa_index,
        tmp_path,
        ANCHORED_RATE_LIMIT_PER_MIN="4",
        ANCHORED_FORWARDED_ALLOW_IPS="127.0.0.1",
    )
    with ThreadedServer(create_app(trusted), **server_options(trusted)) as srv:
        assert searches(srv.url, ROTATED) == [200] * 7


def test_anchored_serve_itself(qa_project: Path, tmp_path: Path) -> None:
    """The real ``anchored serve``: a rebinding host refused on /v1/ask and /mcp, and the
    rotated X-Forwarded-For of one local client limited as one."""
    project = tmp_path / "project"
    shutil.copytree(qa_project, project, ignore=shutil.ignore_patterns("site"))
    config = str(project / "mkdocs.yml")
    command = [sys.executable, "-m", "mkdocs_anchored.cli", "serve", "-f", config]
    env = {
        "NO_MKDOCS_2_WARNING": "1",
        "ANCHORED_RATE_LIMIT_PER_MIN": "4",
        "ANCHORED_CACHE_DIR": str(tmp_path / "query-cache"),
    }
    for name in ("ANCHORED_ALLOWED_HOSTS", "ANCHORED_FORWARDED_ALLOW_IPS", "FORWARDED_ALLOW_IPS"):
        env[name] = ""  # unset for the server: its own defaults
    with AppProcess(env, command=command, log_file=tmp_path / "serve.log") as proc:
        refused = requests(proc.url, EVIL)
        assert refused["ask"].status_code == refused["mcp"].status_code == 421
        # The readiness probe's /v1/health took its share of the 4 already.
        statuses = searches(proc.url, ROTATED)
        assert statuses.count(200) <= 4 and statuses[-3:] == [429] * 3, statuses


def test_the_defaults() -> None:
    assert local_hosts("127.0.0.1") == "localhost,127.0.0.1,::1"
    assert local_hosts("0.0.0.0") == local_hosts("::") == "localhost,127.0.0.1,::1"
    assert local_hosts("192.168.1.20") == "localhost,127.0.0.1,::1,192.168.1.20"
    # The function itself answers any host unless told (on Lambda its URL decides).
    plain = Settings.from_env({"ANCHORED_INDEX": "x"})
    assert plain.allowed_hosts == () and plain.forwarded_allow_ips == ""
    assert server_options(plain) == {"proxy_headers": False}
    set_ = Settings.from_env({"ANCHORED_INDEX": "x", "ANCHORED_ALLOWED_HOSTS": " a.example , b "})
    assert set_.allowed_hosts == ("a.example", "b")


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost", True),
        ("LocalHost:8000", True),
        ("localhost.:8000", True),
        ("[::1]:8000", True),
        ("127.0.0.1", True),
        ("127.0.0.2", False),
        ("localhost.evil.example", False),
        ("evil.example:8000", False),
        ("", False),
        ("[::1", False),
    ],
)
def test_host_values(host: str, allowed: bool) -> None:
    assert AllowedHosts(_app, local_hosts("127.0.0.1").split(",")).allows(host) is allowed


async def _app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover - never called
    raise AssertionError
