"""The HTTP API (v1) as a Starlette app: the same app on Lambda and locally.

Routes translate requests into ``Engine`` calls and errors into
``{"error": {"code", "message"}}``; nothing a provider says and no stack
trace reaches the client.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anchored_query.engine import Engine
from anchored_query.errors import QueryError
from anchored_query.guard import logsafe
from anchored_query.guard.budget import current_client
from anchored_query.guard.ids import check_secret, is_issued
from anchored_query.guard.ratelimit import RateLimiter, SharedRateLimiter, client_key
from anchored_query.guard.shared_state import shared_counters
from anchored_query.owner.feedback import (
    FeedbackStore,
    check_record,
    default_feedback_dir,
    feedback_store,
)
from anchored_query.owner.querylog import ask_record, feedback_record, question_log
from anchored_query.question.validation import (
    LANGUAGE_FIELDS,
    parse_ask,
    parse_feedback,
    parse_json_body,
    parse_language,
    parse_search,
    parse_version,
)
from anchored_query.serve.front import WITH_PORT, FrontOnly, viewer_ip
from anchored_query.serve.hosts import AllowedHosts
from anchored_query.serve.mcp_server import LazyMcp
from anchored_query.serve.site import SiteFiles
from anchored_query.serve.streaming import EventStream, events, precheck, wants_stream
from anchored_query.settings import Settings

log = logging.getLogger("anchored.query")

# Worker threads when an LLM answers and ANCHORED_WORKER_THREADS is unset.
LLM_WORKER_THREADS = 100


class BarePreflight:
    """Answer a CORS preflight with 204 and no grants, for when the app does no CORS itself.

    On Lambda the function URL's CORS configuration owns the ``Access-Control-*``
    headers: AWS adds them to every response, answers preflights with them alone,
    and sends a response's own CORS headers alongside its configured ones (a
    duplicated ``Access-Control-Allow-Origin``, which browsers refuse). So there
    ``ANCHORED_ALLOWED_ORIGINS`` stays unset and, should a preflight reach the
    function, it gets a 2xx that grants nothing rather than a 405 that would fail
    the preflight whatever headers AWS adds.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "OPTIONS":
            names = {name for name, _ in scope["headers"]}
            if b"origin" in names and b"access-control-request-method" in names:
                await Response(status_code=204, headers={"Vary": "Origin"})(scope, receive, send)
                return
        await self.app(scope, receive, send)


class SecurityHeaders:
    """On every response: no framing by other sites (clickjacking of the docs and the
    ask box), no content sniffing. Headers a response already sets are kept."""

    HEADERS = (
        (b"x-frame-options", b"SAMEORIGIN"),
        (b"content-security-policy", b"frame-ancestors 'self'"),
        (b"x-content-type-options", b"nosniff"),
    )

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(k, v) for k, v in self.HEADERS if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status, headers=headers)


def create_app(
    settings: Settings | None = None,
    *,
    engine: Engine | None = None,
    site_dir: Path | None = None,
    feedback: FeedbackStore | None = None,
) -> Starlette:
    """The ASGI app. ``site_dir`` also serves a built site (``anchored serve``)."""
    settings = settings or Settings.from_env()
    check_secret(settings.answer_id_secret)
    logsafe.protect(settings.answer_id_secret)
    engine = engine or Engine(settings)
    store = feedback or feedback_store(settings.feedback, default_feedback_dir(settings.cache_dir))
    qlog = question_log(  # None: off
        settings.question_log, settings.question_log_days, mask=settings.question_log_mask
    )
    # One limit across instances when they share a store (DynamoDB on AWS), else per process.
    local = RateLimiter(settings.rate_limit_per_min)
    limiter: RateLimiter | SharedRateLimiter = local
    if settings.shared_state not in ("", "memory") and settings.rate_limit_per_min > 0:
        counters = shared_counters(settings.shared_state)
        limiter = SharedRateLimiter(settings.rate_limit_per_min, counters, local=local)

    def client_of(request: Request) -> str:
        host = request.client.host if request.client else "unknown"
        if settings.front_secret:  # the front (CloudFront) is the peer; it names the reader
            value = request.headers.get(settings.client_ip_header, "")
            host = viewer_ip(value, with_port=settings.client_ip_header in WITH_PORT) or host
        return client_key(host, ipv6_prefix=settings.rate_limit_ipv6_prefix)

    async def limited(request: Request) -> None:
        client = client_of(request)
        # The LLM calls made for this request count against the client's share of the
        # spend cap too (budget.py); the worker thread answering it inherits the context.
        current_client.set(client)
        if isinstance(limiter, SharedRateLimiter):  # a store round trip: off the event loop
            wait = await run_in_threadpool(limiter.check, client)
        else:
            wait = limiter.check(client)
        if wait:
            raise QueryError(
                429,
                "rate_limited",
                "too many questions; wait a moment",
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )

    def json_only(request: Request) -> None:
        # A cross-site form or fetch() may POST text/plain, form data or multipart with
        # no CORS preflight, so the origin allowlist never gets to refuse it; a browser
        # sends application/json only after a preflight. Refused before anything else.
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            raise QueryError(
                415, "unsupported_media_type", "send the request body as application/json"
            )

    async def body_of(request: Request) -> dict[str, Any]:
        declared = request.headers.get("content-length", "")
        # isascii: str.isdigit() is also true of "²" and other digits int() refuses.
        if declared.isascii() and declared.isdigit() and int(declared) > settings.max_body_bytes:
            raise QueryError(
                413, "too_large", f"the request body is over {settings.max_body_bytes} bytes"
            )
        body = b""
        async for part in request.stream():
            body += part
            if len(body) > settings.max_body_bytes:
                raise QueryError(
                    413, "too_large", f"the request body is over {settings.max_body_bytes} bytes"
                )
        return parse_json_body(body, settings.max_body_bytes)

    async def ask(request: Request) -> Response:
        json_only(request)
        await limited(request)
        ask_request = parse_ask(await body_of(request), settings)
        started = time.perf_counter()
        if wants_stream(request.headers.get("accept", "")):  # Server-Sent Events (streaming.py)
            deadline = await run_in_threadpool(precheck, engine, ask_request)

            def logged(result: dict[str, Any]) -> None:
                if qlog is not None:
                    latency_ms = (time.perf_counter() - started) * 1000
                    qlog.submit(ask_record(result, ask_request.question, latency_ms))

            body = events(engine, ask_request, logged, request.is_disconnected, deadline)
            return EventStream(body)
        result = await run_in_threadpool(engine.ask, ask_request)
        if qlog is not None:  # a queue put: never waits, never raises (querylog.py)
            latency_ms = (time.perf_counter() - started) * 1000
            qlog.submit(ask_record(result, ask_request.question, latency_ms))
        return JSONResponse(result)

    async def search(request: Request) -> Response:
        if request.method == "POST":
            json_only(request)
        await limited(request)
        if request.method == "POST":
            # The question in the body, where CDN, proxy and access logs do not keep it.
            body = await body_of(request)
            unknown = sorted(set(body) - {"q", "k", "version"} - LANGUAGE_FIELDS)
            if unknown:
                raise QueryError(400, "bad_request", f"unknown field {unknown[0]!r}")
            k = body.get("k")
            if k is not None and (isinstance(k, bool) or not isinstance(k, int)):
                raise QueryError(400, "bad_request", "'k' must be a whole number")
            query, count = parse_search(body.get("q"), None if k is None else str(k), settings)
            version = parse_version(body.get("version"))
            language = parse_language(body)
        else:
            query, count = parse_search(
                request.query_params.get("q"), request.query_params.get("k"), settings
            )
            version = parse_version(request.query_params.get("version"))
            params = request.query_params
            flag = params.get("other_languages")
            language = parse_language(
                {
                    "lang": params.get("lang"),
                    "other_languages": {"true": True, "false": False}.get(flag or "false", flag),
                }
            )
        lang, others = language["lang"], language["other_languages"]
        return JSONResponse(
            await run_in_threadpool(engine.search, query, count, version, lang, others)
        )

    async def post_feedback(request: Request) -> Response:
        json_only(request)
        await limited(request)
        item = parse_feedback(await body_of(request))
        if not is_issued(item.answer_id, settings.answer_id_secret):
            raise QueryError(400, "unknown_answer", "'answer_id' is not an answer this site gave")
        check_record(item)
        loaded = engine._loaded
        build_id = loaded.index.build_id if loaded else ""
        try:
            key = await run_in_threadpool(store.save, item, build_id=build_id)
        except Exception as exc:  # the reader's feedback must not vanish silently
            log.error("feedback could not be stored: %s: %s", type(exc).__name__, exc)
            raise QueryError(
                503, "feedback_unavailable", "feedback could not be stored; try again"
            ) from None
        if qlog is not None:
            qlog.submit(feedback_record(item.answer_id, item.rating))
        return JSONResponse({"stored": True, "id": key.rsplit("/", 1)[-1].removesuffix(".json")})

    async def health(request: Request) -> Response:
        await limited(request)
        return JSONResponse(await run_in_threadpool(engine.health))

    async def on_query_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, QueryError)
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if not request.url.path.startswith("/v1") and exc.status_code == 404:
            return Response("Not found", 404, media_type="text/plain")
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail))

    async def on_crash(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s", request.url.path)
        return error_response(500, "internal", "something went wrong on our side")

    routes: list[BaseRoute] = [
        Route("/v1/ask", ask, methods=["POST"]),
        Route("/v1/search", search, methods=["GET", "POST"]),
        Route("/v1/feedback", post_feedback, methods=["POST"]),
        Route("/v1/health", health, methods=["GET"]),
        # MCP over Streamable HTTP (mcp_server.py): same engine, limits and question log.
        Route("/mcp", LazyMcp(engine, settings, limit=limited, qlog=qlog, site_dir=site_dir)),
    ]
    if site_dir is not None:
        # The built site, with its pages' Markdown twins for Accept: text/markdown (site.py).
        routes.append(Mount("/", app=SiteFiles(directory=site_dir, html=True), name="site"))
    # Either the app does CORS (ANCHORED_ALLOWED_ORIGINS: `anchored serve` on another
    # origin, a container) or the front (a Lambda function URL) does, never both.
    cors = Middleware(
        CORSMiddleware,
        allow_origins=list(settings.allowed_origins),
        allow_methods=["GET", "POST"],
        allow_headers=["content-type"],
        expose_headers=["Retry-After"],  # the ask box reads it on a 429
        max_age=600,
    )
    middleware = [cors if settings.allowed_origins else Middleware(BarePreflight)]
    if settings.front_secret:  # only requests that came through the front (front.py)
        logsafe.protect(settings.front_secret)
        middleware.insert(0, Middleware(FrontOnly, secret=settings.front_secret))
    if settings.allowed_hosts:  # a DNS-rebinding page's Host is none of them (hosts.py)
        middleware.insert(0, Middleware(AllowedHosts, hosts=settings.allowed_hosts))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Each /v1 request holds a thread, an ask with an LLM for seconds of waiting: the
        # limit bounds the answers in progress at once, and searches queue behind them
        # when it is reached (anyio's default is 40; see site/reliability.md, "Load").
        threads = settings.worker_threads or (LLM_WORKER_THREADS if engine.llm else 0)
        if threads:
            import anyio.to_thread

            anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        yield
        engine.close()
        if qlog is not None:
            await run_in_threadpool(qlog.close)

    middleware.insert(0, Middleware(SecurityHeaders))  # outermost: on every response
    app = Starlette(
        lifespan=lifespan,
        routes=routes,
        middleware=middleware,
        exception_handlers={
            QueryError: on_query_error,
            HTTPException: on_http_error,
            Exception: on_crash,
        },
    )
    app.state.engine = engine
    app.state.question_log = qlog
    return app
