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


# Headers whose value is always ``address:port``, an unbracketed IPv6 address too.
WITH_PORT = frozenset({"cloudfront-viewer-address"})


def viewer_ip(value: str, *, with_port: bool = True) -> str | None:
    """The address in a ``CloudFront-Viewer-Address`` (``ip:port``, IPv6 too) or
    ``X-Forwarded-For`` (first entry) value; None when there is none.

    The port comes off before the address is parsed: ``2001:db8::a:b:c:d:443`` is
    also a valid IPv6 address, so an unbracketed IPv6 address loses its last group
    only when the header always carries a port (``with_port``: CloudFront's);
    ``[v6]:port`` and ``v4:port`` are read whatever the header.
    """
    value = value.split(",", 1)[0].strip()
    if value.startswith("["):  # [2001:db8::7]:443
        address = value[1 : value.find("]")] if "]" in value else ""
    elif value.count(":") == 1:  # 198.51.100.10:46532
        address = value.partition(":")[0]
    elif with_port and ":" in value:  # 2001:db8::1:46532
        address, _, port = value.rpartition(":")
        if not (port.isascii() and port.isdigit() and int(port) <= 65535):
            address = value  # no port after all
    else:  # an address alone: 203.0.113.4, 2001:db8::5
        address = value
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
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
