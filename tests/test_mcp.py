"""MCP: the reference SDK's own client against ``/mcp`` (uvicorn on 127.0.0.1) and
against ``anchored mcp`` (a subprocess over stdio): tools, their results, errors."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent
from pydantic import AnyUrl
from s3server import moto_s3  # noqa: F401  # the session's S3 server (moto over HTTP)

from tests.liveserver import ThreadedServer

TOOLS = {"search_docs", "ask_docs", "read_section", "read_page"}
Check = Callable[[ClientSession], Awaitable[None]]


def _text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def _settings(index: Path | str, tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(
        index=str(index),
        cache_dir=str(tmp_path / "cache"),
        feedback=str(tmp_path / "feedback"),
        refresh_s=0,
        **overrides,
    )


def _over_http(url: str, check: Check) -> None:
    async def main() -> None:
        async with (
            streamable_http_client(url) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await check(session)

    anyio.run(main)


def _over_stdio(index: Path | str, tmp_path: Path, check: Check) -> None:
    env = {
        **os.environ,
        "ANCHORED_CACHE_DIR": str(tmp_path / "cache"),
        "ANCHORED_REFRESH_S": "0",
    }
    params = StdioServerParameters(
        command=str(Path(sys.executable).parent / "anchored"),  # the installed console script
        args=["mcp", "--index", str(index)],
        env=env,
        cwd=str(tmp_path),
    )

    async def main() -> None:
        connection: AbstractAsyncContextManager[Any] = stdio_client(params)
        with anyio.fail_after(120):
            async with connection as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await check(session)

    anyio.run(main)


async def _check_tools(session: ClientSession) -> None:
    listed = await session.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 60
        assert tool.inputSchema["type"] == "object"
    assert tools["search_docs"].inputSchema["required"] == ["query"]
    assert tools["ask_docs"].inputSchema["required"] == ["question"]
    assert tools["read_section"].inputSchema["required"] == ["ref"]
    k = tools["search_docs"].inputSchema["properties"]["k"]
    assert k["minimum"] == 1 and k["maximum"] == 50
    assert tools["read_section"].annotations and tools["read_section"].annotations.readOnlyHint

    # search_docs: sections with refs, snippets and links to them
    found = await session.call_tool("search_docs", {"query": "change the port", "k": 3})
    assert not found.isError
    assert found.structuredContent is not None
    results = found.structuredContent["results"]
    assert 1 <= len(results) <= 3
    assert results[0]["ref"] == "guide/configuration/#port"
    assert results[0]["url"].endswith("guide/configuration/#port")
    assert "8000" in results[0]["snippet"]
    assert "guide/configuration/#port" in _text(found)

    # ask_docs: the cited answer; every citation's link highlights the passage
    asked = await session.call_tool("ask_docs", {"question": "How do I change the port?"})
    assert not asked.isError, _text(asked)
    data = asked.structuredContent
    assert data is not None and not data["abstained"]
    assert data["answer"] and all(s["citations"] for s in data["answer"])
    refs = {c["ref"] for c in data["citations"]}
    assert "guide/configuration/#port" in refs
    for c in data["citations"]:
        assert "anchored-hl=" in c["link"] and ":~:text=" in c["link"]
        assert c["link"].split("?", 1)[0] == c["ref"].split("#", 1)[0]
    assert "[1]" in _text(asked) and "Sources:" in _text(asked)

    # read_section: the section's whole text by its ref
    read = await session.call_tool("read_section", {"ref": "guide/configuration/#port"})
    assert not read.isError
    assert read.structuredContent is not None
    assert "dev_addr" in read.structuredContent["text"]
    assert "--dev-addr" in _text(read)
    # a citation's link works as a ref too (query and text fragment dropped)
    link = next(c["link"] for c in data["citations"] if c["ref"] == "guide/configuration/#port")
    again = await session.call_tool("read_section", {"ref": link})
    assert not again.isError and again.structuredContent == read.structuredContent
    page = await session.call_tool("read_section", {"ref": "guide/configuration/"})
    assert not page.isError and page.structuredContent is not None
    assert page.structuredContent["ref"].startswith("guide/configuration/#")

    # errors: tool results with isError and a message, the session goes on
    unknown = await session.call_tool("read_section", {"ref": "guide/nowhere/#x"})
    assert unknown.isError and "unknown_section" in _text(unknown)
    bad_k = await session.call_tool("search_docs", {"query": "port", "k": 0})
    assert bad_k.isError
    missing = await session.call_tool("ask_docs", {})
    assert missing.isError and "question" in _text(missing)
    blank = await session.call_tool("ask_docs", {"question": "   "})
    assert blank.isError and "question" in _text(blank)
    outside = await session.call_tool(
        "ask_docs", {"question": "port?", "include": ["no-such-section/"]}
    )
    assert outside.isError
    wrong_type = await session.call_tool("search_docs", {"query": ["a", "list"]})
    assert wrong_type.isError
    still = await session.call_tool("search_docs", {"query": "install with pip", "k": 1})
    assert not still.isError
    await _check_pages(session, twin=False)


async def _check_pages(session: ClientSession, *, twin: bool) -> None:
    """read_page (by URL, by a twin's URL, by title) and the llms.txt resource (issue 22)."""
    page = await session.call_tool("read_page", {"page": "guide/configuration/"})
    assert not page.isError, _text(page)
    data = page.structuredContent
    assert data is not None and data["page"] == "guide/configuration/"
    assert data["source"] == ("twin" if twin else "index")
    markdown = data["markdown"]
    assert "{#port}" in markdown and "dev_addr" in markdown
    assert markdown.lstrip().startswith("#")
    for other in ("guide/configuration/index.md", "/guide/configuration", data["title"].upper()):
        same = await session.call_tool("read_page", {"page": other})
        assert not same.isError and same.structuredContent == data, other
    nowhere = await session.call_tool("read_page", {"page": "guide/nowhere/"})
    assert nowhere.isError and "unknown_page" in _text(nowhere)
    listed = await session.list_resources()
    assert [str(r.uri) for r in listed.resources] == ["docs://llms.txt"]
    llms = await session.read_resource(AnyUrl("docs://llms.txt"))
    text = "".join(getattr(c, "text", "") for c in llms.contents)
    assert text.startswith("# ") and "guide/configuration/index.md" in text


def test_http_tools_results_and_errors(qa_index: Path, tmp_path: Path) -> None:
    from anchored_query.owner.querylog import read_records

    log_dir = tmp_path / "questions"
    app = create_app(_settings(qa_index, tmp_path, question_log=str(log_dir)))
    with ThreadedServer(app) as srv:
        _over_http(srv.url + "/mcp", _check_tools)
        # the /v1 API is unchanged next to it
        assert httpx.get(srv.url + "/v1/health", timeout=30).status_code == 200
    # the question log has the one answered ask_docs call (written at shutdown)
    asks = list(read_records(str(log_dir), "asks"))
    assert [a["question"] for a in asks] == ["How do I change the port?"]


def test_served_site_pages_come_from_their_twins(
    qa_project: Path, qa_index: Path, tmp_path: Path
) -> None:
    """With the built site beside it (anchored serve), read_page hands out the page's
    Markdown twin, and the llms.txt resource is the build's."""
    site = qa_project / "site"
    app = create_app(_settings(qa_index, tmp_path), site_dir=site)

    async def check(session: ClientSession) -> None:
        await _check_pages(session, twin=True)
        page = await session.call_tool("read_page", {"page": "guide/configuration/"})
        assert page.structuredContent is not None
        twin = (site / "guide" / "configuration" / "index.md").read_text(encoding="utf-8")
        assert page.structuredContent["markdown"] == twin
        llms = await session.read_resource(AnyUrl("docs://llms.txt"))
        built = (site / "llms.txt").read_text(encoding="utf-8")
        assert "".join(getattr(c, "text", "") for c in llms.contents) == built

    with ThreadedServer(app) as srv:
        _over_http(srv.url + "/mcp", check)


def test_http_works_without_the_lifespan(qa_index: Path, tmp_path: Path) -> None:
    """Mangum runs the app with lifespan="off": /mcp must not need it."""
    app = create_app(_settings(qa_index, tmp_path))

    async def check(session: ClientSession) -> None:
        listed = await session.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        found = await session.call_tool("search_docs", {"query": "port"})
        assert not found.isError

    with ThreadedServer(app, lifespan="off") as srv:
        _over_http(srv.url + "/mcp", check)


def test_http_rate_limited_is_a_tool_error(qa_index: Path, tmp_path: Path) -> None:
    app = create_app(_settings(qa_index, tmp_path, rate_limit_per_min=2))

    async def check(session: ClientSession) -> None:
        await session.list_tools()  # not counted: no index work
        for _ in range(2):
            assert not (await session.call_tool("search_docs", {"query": "port"})).isError
        limited = await session.call_tool("ask_docs", {"question": "How do I change the port?"})
        assert limited.isError
        assert "rate_limited" in _text(limited) and "retry after" in _text(limited)

    with ThreadedServer(app) as srv:
        _over_http(srv.url + "/mcp", check)
        # the same limit as /v1: the tool calls used it up
        assert httpx.get(srv.url + "/v1/search?q=port", timeout=30).status_code == 429


def test_http_no_index_is_a_tool_error(tmp_path: Path) -> None:
    app = create_app(_settings(tmp_path / "missing-index", tmp_path))

    async def check(session: ClientSession) -> None:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        for name, args in (
            ("search_docs", {"query": "port"}),
            ("ask_docs", {"question": "How do I change the port?"}),
            ("read_section", {"ref": "guide/configuration/#port"}),
        ):
            result = await session.call_tool(name, args)
            assert result.isError, name
            assert "Traceback" not in _text(result)

    with ThreadedServer(app) as srv:
        _over_http(srv.url + "/mcp", check)


def test_http_body_limit_and_plain_http(qa_index: Path, tmp_path: Path) -> None:
    app = create_app(_settings(qa_index, tmp_path, max_body_bytes=2048))
    headers = {"Accept": "application/json, text/event-stream"}
    with ThreadedServer(app) as srv:
        big = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "y" * 4000}}
        response = httpx.post(srv.url + "/mcp", json=big, headers=headers, timeout=30)
        assert response.status_code == 413
        # a JSON-RPC request without initialize still answers (stateless: no session)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        response = httpx.post(srv.url + "/mcp", json=listing, headers=headers, timeout=30)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/json")
        assert {t["name"] for t in response.json()["result"]["tools"]} == TOOLS
        assert "mcp-session-id" not in response.headers
        # a form post (a browser's cross-site simple request) is refused
        form = httpx.post(
            srv.url + "/mcp",
            content=json.dumps(listing),
            headers={**headers, "Content-Type": "text/plain"},
            timeout=30,
        )
        assert form.status_code >= 400


def test_stdio_tools_results_and_errors(qa_index: Path, tmp_path: Path) -> None:
    _over_stdio(qa_index, tmp_path, _check_tools)


def test_stdio_no_index_is_a_tool_error(tmp_path: Path) -> None:
    async def check(session: ClientSession) -> None:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        result = await session.call_tool("search_docs", {"query": "port"})
        assert result.isError and "Traceback" not in _text(result)

    _over_stdio(tmp_path / "missing-index", tmp_path, check)


@pytest.mark.parametrize("flag", ["--help"])
def test_cli_lists_the_command(flag: str) -> None:
    from plugin.cli import parser

    with pytest.raises(SystemExit):
        parser().parse_args(["mcp", flag])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="manylinux wheels")
def test_lambda_artifact_answers_mcp(
    qa_index: Path,
    tmp_path: Path,
    moto_s3: Any,  # noqa: F811
) -> None:
    """The built Lambda artifact (lambda/Makefile, cached by lambda_build.py) answers /mcp
    through Mangum with lifespan="off": tools/list and a search_docs call, each a
    function URL event, the index fetched from S3 (moto over HTTP) as on Lambda."""
    import base64
    import uuid

    from lambda_build import build_artifact, invoke, lambda_env

    from build_index.publish import publish

    artifact, _ = build_artifact()
    client = moto_s3.client()
    bucket = f"anchored-mcp-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    publish(qa_index, f"s3://{bucket}/docs", client=client)
    template = json.loads(
        (Path(__file__).parent / "events" / "function-url-search.json").read_text("utf-8")
    )

    def event(message: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(message)
        headers = {k: v for k, v in template["headers"].items() if k not in ("origin", "referer")}
        headers.update(
            {
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "content-length": str(len(body)),
                "user-agent": "claude-code/2.0",
            }
        )
        http = {**template["requestContext"]["http"], "method": "POST", "path": "/mcp"}
        return {
            **template,
            "rawPath": "/mcp",
            "rawQueryString": "",
            "headers": headers,
            "requestContext": {**template["requestContext"], "http": http},
            "body": body,
            "isBase64Encoded": False,
        }

    call = {"name": "search_docs", "arguments": {"query": "change the port", "k": 2}}
    events = [
        event({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        event({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}),
    ]
    env = lambda_env(f"s3://{bucket}/docs", moto_s3.endpoint_url, tmp_path / "lambda-tmp")
    out = invoke(artifact, events, env)
    replies = []
    for resp in out["responses"]:
        assert resp["statusCode"] == 200, resp
        body = resp["body"]
        if resp.get("isBase64Encoded"):
            body = base64.b64decode(body).decode("utf-8")
        replies.append(json.loads(body))
    assert {t["name"] for t in replies[0]["result"]["tools"]} == TOOLS
    result = replies[1]["result"]
    assert not result.get("isError"), result
    assert result["structuredContent"]["results"][0]["ref"] == "guide/configuration/#port"


def test_a_tentative_answer_says_it_is_the_closest_passage() -> None:
    from anchored_query.answer.extractive_answer import TENTATIVE
    from anchored_query.serve.mcp_tools import _answer

    result = {
        "mode": "extractive",
        "abstained": False,
        "answer": [
            {"text": "Cookies set on the client are sent with every request.", "citations": [1]}
        ],
        "citations": [{"n": 1, "url": "advanced/clients/#cookies", "title": "Clients"}],
    }
    sure_text, sure = _answer(result, "https://docs.example.com/")
    text, data = _answer({**result, "tentative": True}, "https://docs.example.com/")
    assert "tentative" not in sure and TENTATIVE not in sure_text
    assert data["tentative"] is True
    assert text.startswith(f"Note: {TENTATIVE}\n")
    assert "Cookies set on the client" in text
