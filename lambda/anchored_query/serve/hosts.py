"""The host names a server answers for: DNS rebinding cannot reach a local server.

A page on ``evil.example`` whose name is made to resolve to 127.0.0.1 calls
``anchored serve`` (or its ``/mcp``) as its own origin, so the browser's same-origin
rules and CORS let it read every reply; only the ``Host`` it sends, ``evil.example``,
gives it away. With ``ANCHORED_ALLOWED_HOSTS`` set (``anchored serve`` sets this
machine's names when it is unset), a request for any other host gets a 421 JSON error
before any route runs. Unset, every host is answered: on Lambda the function URL or
CloudFront decides which names reach the function.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


def host_name(value: str) -> str:
    """The name in a ``Host`` value (or an ``ANCHORED_ALLOWED_HOSTS`` entry): lower case,
    without its port, an IPv6 address without brackets."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8000
        return value[1 : value.find("]")] if "]" in value else ""
    if value.count(":") == 1:  # localhost:8000
        value = value.partition(":")[0]
    return value.rstrip(".")


class AllowedHosts:
    """Refuse (421) every HTTP request whose ``Host`` is not one of ``hosts``: names,
    addresses, ``*.example.com`` for its subdomains, ``*`` for any."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str]) -> None:
        self.app = app
        names = {host_name(h) for h in hosts if h.strip()}
        self.any = "*" in names
        self.suffixes = tuple(n[1:] for n in names if n.startswith("*."))
        self.names = frozenset(n for n in names if not n.startswith("*"))

    def allows(self, host: str) -> bool:
        """Whether a request with this ``Host`` value is answered."""
        name = host_name(host)
        return self.any or name in self.names or (bool(name) and name.endswith(self.suffixes))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = next((v for k, v in scope["headers"] if k == b"host"), b"")
            if not self.allows(host.decode("latin-1")):
                message = "this server does not answer for that host name (ANCHORED_ALLOWED_HOSTS)"
                response = JSONResponse(
                    {"error": {"code": "unknown_host", "message": message}}, 421
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
