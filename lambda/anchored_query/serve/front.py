"""Behind a CloudFront (+ AWS WAF) front: only requests that came through it, readers' addresses.

With ``ANCHORED_FRONT_SECRET`` set, the front adds that secret as the
``X-Anchored-Front`` header to every request it forwards (a CloudFront origin
custom header, see ``template-edge.yaml``), and :class:`FrontOnly` answers
anything without it ``403``: calling the function URL directly can no longer
skip the WAF. Only then is the reader's address taken from the front's header
(``ANCHORED_CLIENT_IP_HEADER``, CloudFront's ``CloudFront-Viewer-Address`` by
default): without the secret, anyone could send that header and be whoever
they like to the rate limit.
"""

from __future__ import annotations

import hmac
import ipaddress

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

FRONT_HEADER = b"x-anchored-front"


def viewer_ip(value: str) -> str | None:
    """The address in a ``CloudFront-Viewer-Address`` (``ip:port``, IPv6 too) or
    ``X-Forwarded-For`` (first entry) value; None when there is none."""
    value = value.split(",", 1)[0].strip()
    candidates = [value]
    if value.startswith("[") and "]" in value:  # [2001:db8::1]:443
        candidates.insert(0, value[1 : value.index("]")])
    elif ":" in value:
        candidates.append(value.rsplit(":", 1)[0])  # 198.51.100.10:46532, 2001:db8::1:46532
    for candidate in candidates:
        try:
            return str(ipaddress.ip_address(candidate))
        except ValueError:
            continue
    return None


class FrontOnly:
    """Refuse (403) every HTTP request that does not carry the front's secret header."""

    def __init__(self, app: ASGIApp, secret: str) -> None:
        self.app = app
        self.secret = secret.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            sent = b""
            for name, value in scope["headers"]:
                if name == FRONT_HEADER:
                    sent = value
                    break
            if not hmac.compare_digest(sent, self.secret):
                response = JSONResponse(
                    {"error": {"code": "forbidden", "message": "use the site's ask box"}}, 403
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
