"""The docs as Model Context Protocol tools, for coding agents (the SDK side; mcp_server.py).

Three tools, the same engine as ``/v1/*``:

- ``search_docs``: hybrid search; sections with snippets and links;
- ``ask_docs``: the cited answer; each citation's ``link`` lands on the passage and
  highlights it (links.py);
- ``read_section``: a section's whole text by its ``page/#anchor`` (sections.jsonl).

Two transports, one server (:func:`build_server`, the reference SDK's ``FastMCP``):

- Streamable HTTP at ``/mcp`` of the query function (:class:`McpEndpoint`, routed by
  app.py), **stateless** with JSON responses: no session lives across requests, so
  any Lambda instance answers any request. Each request gets its own session manager
  (cheap in stateless mode), so nothing depends on the ASGI lifespan, which Mangum
  runs with ``lifespan="off"``. The app's limits hold: the rate limit (each tool call
  counts as one request; ``initialize`` and ``tools/list`` do not touch the index),
  the body limit (``ANCHORED_MAX_BODY_BYTES``), the question limits of validation.py,
  the LLM spend cap (the engine's client) and the question log.
- stdio (``anchored mcp --index DIR``), for a local index.

Errors a caller can act on (bad arguments, no index, rate limited, unknown section)
are tool results with ``isError`` and a plain message, never a crash or a provider's
text.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urljoin

import anyio.to_thread
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from anchored_query.answer.extractive_answer import TENTATIVE
from anchored_query.engine import Engine
from anchored_query.errors import QueryError
from anchored_query.owner.querylog import QuestionLog, ask_record
from anchored_query.question.validation import parse_ask, parse_search
from anchored_query.serve.mcp_pages import MAX_PAGE_CHARS, llms_txt, page_markdown
from anchored_query.serve.mcp_pages import site_url as _site_url
from anchored_query.settings import Settings

log = logging.getLogger("anchored.query")

# An async check that raises QueryError (429) when the caller is over the rate limit.
Limiter = Callable[[Request], Awaitable[None]]

MAX_SECTION_CHARS = 20_000  # read_section returns at most this much text, then says so

INSTRUCTIONS = (
    "Tools over this documentation site. Prefer ask_docs for a question (a short answer "
    "whose every sentence cites a passage of the docs); use search_docs to find the "
    "sections about a topic, read_section to read one whole section by the `ref` "
    "those tools return (page/#anchor), and read_page for a whole page as Markdown; the "
    "resource docs://llms.txt lists every page. Answers come only from the docs: when "
    "`abstained` is true the docs do not cover the question."
)


def _public(exc: QueryError) -> ToolError:
    text = exc.message
    wait = (exc.headers or {}).get("Retry-After")
    if wait:
        text += f" (retry after {wait} s)"
    return ToolError(f"{exc.code}: {text}")


def _absolute(site: str, link: str) -> str:
    return urljoin(site, link) if site else link


def _result(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structuredContent=data)


def build_server(
    engine: Engine,
    settings: Settings,
    *,
    limit: Limiter | None = None,
    qlog: QuestionLog | None = None,
    site_dir: Path | None = None,
) -> FastMCP:
    """The MCP server with its four tools and the ``llms.txt`` resource, over ``engine``
    (either transport); ``site_dir``: the built site, whose Markdown twins ``read_page``
    reads (mcp_pages.py)."""
    server = FastMCP(
        "anchored-docs",
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        # Hosts differ per deployment (function URL, CloudFront, a custom domain); the
        # tools only read public docs, and a browser's cross-site POST is refused by the
        # transport's content-type and Accept checks.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False, idempotentHint=True)

    async def call(ctx: Context[Any, Any, Any], fn: Callable[..., Any], *args: Any) -> Any:
        """Rate limit (HTTP only), then ``fn`` in a worker thread; QueryError → tool error."""
        try:
            request = ctx.request_context.request
        except (LookupError, ValueError):  # no request in context (stdio)
            request = None
        try:
            if limit is not None and isinstance(request, Request):
                await limit(request)
            return await anyio.to_thread.run_sync(fn, *args)
        except QueryError as exc:
            raise _public(exc) from None
        except Exception:  # as /v1's on_crash: logged here, no internal text to the caller
            log.exception("unexpected error in an MCP tool")
            raise ToolError("internal: something went wrong on our side") from None

    @server.tool(
        name="search_docs",
        title="Search the docs",
        description=(
            "Hybrid (keyword + semantic) search over the documentation's sections. Returns "
            "the best sections, best first, each with its `ref` (page/#anchor, for "
            "read_section), title, heading path, a snippet and a `url` to the section. "
            "No answer is written; use ask_docs for that."
        ),
        annotations=read_only,
    )
    async def search_docs(
        query: Annotated[
            str,
            Field(description="What to look for: words, an API name, or a question."),
        ],
        ctx: Context[Any, Any, Any],
        k: Annotated[int, Field(description="How many sections to return.", ge=1, le=50)] = 8,
    ) -> CallToolResult:
        query, count = parse_search_args(query, k, settings)
        found = await call(ctx, engine.search, query, count)
        site = _site_url(engine)
        results = [
            {
                "ref": r["url"],
                "title": r["title"],
                "heading_path": r["heading_path"],
                "snippet": r["snippet"],
                "url": _absolute(site, r["url"]),
                "score": r["score"],
            }
            for r in found["results"]
        ]
        lines = [
            f"{i}. {' › '.join(r['heading_path']) or r['title']}  (ref: {r['ref']})\n"
            f"   {r['url']}\n   {r['snippet']}"
            for i, r in enumerate(results, start=1)
        ]
        text = "\n".join(lines) if lines else "No section matches."
        return _result(text, {"results": results, "build_id": found["build_id"]})

    @server.tool(
        name="ask_docs",
        title="Ask the docs",
        description=(
            "Answer a question from the documentation only. Every answer sentence cites "
            "passages as [n]; each citation has a `ref` (page/#anchor, for read_section) "
            "and a `link` that opens the page at the cited passage, highlighted. When "
            "`abstained` is true the docs do not answer the question: do not guess; the "
            "citations are then the closest sections. `mode` is 'llm' (a language model "
            "writes the answer) or 'extractive' (sentences quoted from the docs)."
        ),
        annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
    )
    async def ask_docs(
        question: Annotated[str, Field(description="The question, in natural language.")],
        ctx: Context[Any, Any, Any],
        include: Annotated[
            list[str] | None,
            Field(description="Only these page URL prefixes, e.g. ['reference/'].", max_length=20),
        ] = None,
        exclude: Annotated[
            list[str] | None,
            Field(description="Leave out these page URL prefixes.", max_length=20),
        ] = None,
    ) -> CallToolResult:
        scope: dict[str, Any] = {}
        if include:
            scope["include"] = include
        if exclude:
            scope["exclude"] = exclude
        try:
            request = parse_ask({"question": question, "scope": scope or None}, settings)
        except QueryError as exc:
            raise _public(exc) from None
        started = time.perf_counter()
        result = await call(ctx, engine.ask, request)
        if qlog is not None:  # a queue put: never waits, never raises (querylog.py)
            qlog.submit(ask_record(result, request.question, (time.perf_counter() - started) * 1e3))
        return _result(*_answer(result, _site_url(engine)))

    @server.tool(
        name="read_section",
        title="Read a docs section",
        description=(
            "The whole text of one documentation section, by its `ref` as search_docs and "
            "ask_docs return it: 'page/#anchor' (e.g. 'guide/install/#requirements'; a "
            "page's top section is 'page/' or 'page/#anchor-of-its-title')."
        ),
        annotations=read_only,
    )
    async def read_section(
        ref: Annotated[
            str,
            Field(description="The section's ref, 'page/#anchor'.", min_length=1, max_length=500),
        ],
        ctx: Context[Any, Any, Any],
    ) -> CallToolResult:
        section = await call(ctx, _find_section, engine, ref.strip())
        text = section["text"]
        cut = len(text) > MAX_SECTION_CHARS
        if cut:
            text = text[:MAX_SECTION_CHARS]
        site = _site_url(engine)
        ref = _ref(section)
        data = {
            "ref": ref,
            "title": section.get("title", ""),
            "heading_path": list(section.get("heading_path", [])),
            "url": _absolute(site, ref),
            "text": text,
            "truncated": cut,
        }
        heading = " › ".join(data["heading_path"]) or data["title"]
        note = f"\n[… cut at {MAX_SECTION_CHARS} characters]" if cut else ""
        return _result(f"# {heading}\n{data['url']}\n\n{text}{note}", data)

    @server.tool(
        name="read_page",
        title="Read a docs page",
        description=(
            "One whole documentation page as Markdown (headings with their anchors, code "
            "blocks, tables), by its URL (e.g. 'guide/install/' or the full URL) or its "
            "title. Use search_docs or the docs://llms.txt resource to find pages."
        ),
        annotations=read_only,
    )
    async def read_page(
        page: Annotated[
            str,
            Field(description="The page's URL or title.", min_length=1, max_length=500),
        ],
        ctx: Context[Any, Any, Any],
    ) -> CallToolResult:
        data = await call(ctx, page_markdown, engine, page, site_dir)
        note = f"\n[… cut at {MAX_PAGE_CHARS} characters]" if data["truncated"] else ""
        return _result(f"{data['url']}\n\n{data['markdown']}{note}", data)

    @server.resource(
        "docs://llms.txt",
        name="llms.txt",
        title="The site's pages (llms.txt)",
        description="Every page of the documentation with a one-line summary (llmstxt.org).",
        mime_type="text/markdown",
    )
    async def llms_resource() -> str:
        try:
            return await anyio.to_thread.run_sync(llms_txt, engine, site_dir)
        except QueryError as exc:
            raise _public(exc) from None

    return server


def parse_search_args(query: str, k: int, settings: Settings) -> tuple[str, int]:
    try:
        return parse_search(query, str(k), settings)
    except QueryError as exc:
        raise _public(exc) from None


def _ref(section: dict[str, Any]) -> str:
    page, anchor = str(section.get("page", "")), str(section.get("anchor", ""))
    return f"{page}#{anchor}" if anchor else page


def _find_section(engine: Engine, ref: str) -> dict[str, Any]:
    """The section a ``page/#anchor`` names (also a full URL or a page alone: its first)."""
    sections = engine.current().index.sections
    if "://" in ref:  # a full URL: keep the path after the site's root
        site = _site_url(engine)
        if site and ref.startswith(site):
            ref = ref[len(site) :]
    ref = ref.lstrip("/")
    page, _, anchor = ref.partition("#")
    page = page.split("?", 1)[0]
    anchor = anchor.split(":~:", 1)[0]
    if anchor and f"{page}#{anchor}" in sections:
        return sections[f"{page}#{anchor}"]
    if not anchor:  # a page alone: its first section (ids are "page#anchor", in page order)
        for section_id in sections:
            if section_id.partition("#")[0] == page:
                return sections[section_id]
    raise QueryError(
        404, "unknown_section", f"no section {ref!r}; use a ref from search_docs or ask_docs"
    )


def _answer(result: dict[str, Any], site: str) -> tuple[str, dict[str, Any]]:
    citations = [
        {
            "n": c["n"],
            "ref": c["url"],
            "title": c.get("title", ""),
            "heading_path": list(c.get("heading_path", [])),
            "link": _absolute(site, c.get("link") or c["url"]),
        }
        for c in result.get("citations", [])
    ]
    sentences = [
        {
            "text": s["text"],
            "citations": list(s.get("citations", [])),
            **({"verified": False} if s.get("verified") is False else {}),
            **({"note": True} if s.get("note") else {}),
        }
        for s in result.get("answer", [])
    ]
    data: dict[str, Any] = {
        "abstained": bool(result.get("abstained")),
        "coverage": result.get("coverage", "none" if result.get("abstained") else "full"),
        "mode": result.get("mode", ""),
        "answer": sentences,
        "citations": citations,
        "answer_id": result.get("id", ""),
        "build_id": result.get("build_id", ""),
    }
    if result.get("reason"):
        data["note"] = result["reason"]
    if result.get("tentative"):
        data["tentative"] = True
    lines: list[str] = []
    if data.get("note"):
        lines.append(f"Note: {data['note']}.")
    if data.get("tentative"):
        lines.append(f"Note: {TENTATIVE}")
    if data["coverage"] == "partial":
        lines.append("Coverage: partial (the docs answer part of this; see the note).")
    if data["abstained"]:
        lines.append("Coverage: none. The docs do not seem to cover this.")
    for s in sentences:
        marks = "".join(f"[{n}]" for n in s["citations"])
        flag = " (not verified)" if s.get("verified") is False else ""
        lines.append(f"{s['text']} {marks}{flag}".rstrip())
    if data["abstained"]:
        lines.append("Closest sections:")
    lines.append("")
    lines.append("Sources:")
    for c in citations:
        heading = " › ".join(c["heading_path"]) or c["title"]
        lines.append(f"[{c['n']}] {heading} (ref: {c['ref']})\n    {c['link']}")
    return "\n".join(lines), data


class McpEndpoint:
    """``/mcp``: Streamable HTTP, stateless, JSON responses."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        limit: Limiter | None = None,
        qlog: QuestionLog | None = None,
        site_dir: Path | None = None,
    ) -> None:
        self.server = build_server(engine, settings, limit=limit, qlog=qlog, site_dir=site_dir)
        self.max_body = settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # One manager per request: stateless mode keeps nothing between requests, and
        # run() gives this request's server task a task group without the app lifespan.
        manager = StreamableHTTPSessionManager(
            app=self.server._mcp_server,
            json_response=True,
            stateless=True,
            security_settings=self.server.settings.transport_security,
            max_request_body_size=self.max_body,
        )
        async with manager.run():
            await manager.handle_request(scope, receive, send)


def serve_stdio(engine: Engine, settings: Settings) -> None:
    """``anchored mcp``: the tools over stdin/stdout until the client closes them."""
    server = build_server(engine, settings)
    with contextlib.suppress(KeyboardInterrupt):
        server.run("stdio")
