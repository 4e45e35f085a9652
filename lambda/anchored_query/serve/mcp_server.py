"""``/mcp``: the docs as Model Context Protocol tools, routed by app.py.

The reference SDK (``mcp``) takes about a second to import, so the query function
imports it (mcp_tools.py) on the first ``/mcp`` request only: ``/v1/*`` cold starts
do not pay for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from anchored_query.engine import Engine
from anchored_query.owner.querylog import QuestionLog
from anchored_query.settings import Settings

if TYPE_CHECKING:
    from anchored_query.serve.mcp_tools import McpEndpoint

# An async check that raises QueryError (429) when the caller is over the rate limit.
Limiter = Callable[[Request], Awaitable[None]]


class LazyMcp:
    """An ASGI app (so Starlette's ``Route`` passes it the raw request) that builds the
    MCP endpoint on first use."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        limit: Limiter | None = None,
        qlog: QuestionLog | None = None,
        site_dir: Path | None = None,
    ) -> None:
        self._args: dict[str, Any] = {"limit": limit, "qlog": qlog, "site_dir": site_dir}
        self._engine = engine
        self._settings = settings
        self._endpoint: McpEndpoint | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._endpoint is None:
            from anchored_query.serve.mcp_tools import McpEndpoint

            self._endpoint = McpEndpoint(self._engine, self._settings, **self._args)
        await self._endpoint(scope, receive, send)
