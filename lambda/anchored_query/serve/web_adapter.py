"""The reader's address under the AWS Lambda Web Adapter (run.sh, ResponseStreaming=true).

The adapter turns each function-URL invocation into an HTTP request to the app from
127.0.0.1, and sends the invocation's request context along as JSON in the
``x-amzn-request-context`` header, which it sets on every request (replacing one the
client sent). The reader is the context's ``http.sourceIp`` (function URLs and HTTP
APIs; ``identity.sourceIp`` for REST APIs): what Mangum makes the ASGI client for the
buffered handler, so the rate limit counts the same client either way.
``X-Forwarded-For`` is not used (run.sh starts uvicorn with ``--no-proxy-headers``):
the client writes it, and a client rotating it would be a new client each time.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

HEADER = b"x-amzn-request-context"
_PATHS = (("http", "sourceIp"), ("identity", "sourceIp"))


def source_ip(raw: bytes) -> str | None:
    """The source IP in a request context (JSON), None when it names none."""
    try:
        context = json.loads(raw)
    except ValueError:
        return None
    for path in _PATHS:
        node: Any = context
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, str):
            try:
                return str(ipaddress.ip_address(node))
            except ValueError:
                return None
    return None


class RequestContextClient:
    """ASGI middleware: an HTTP request's client is its invocation's source IP."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = next((v for k, v in scope.get("headers", ()) if k == HEADER), None)
            ip = source_ip(raw) if raw is not None else None
            if ip is not None:
                scope = {**scope, "client": (ip, 0)}
        await self.app(scope, receive, send)
