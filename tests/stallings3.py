"""An S3 that stops answering, for tests: a real HTTP server in front of moto.

``StallingS3(upstream)`` relays every request to the moto server at
``upstream`` over HTTP, counting them by method and path, until told to stall:

- ``silent = True``: every request is read and never answered (the TCP
  connection is accepted, then nothing comes back), as an S3 endpoint that
  hangs;
- ``stall_key = "model.onnx"``: a GET of a key ending so gets its status line,
  headers (with the full ``Content-Length``) and its first ``stall_after``
  bytes, then nothing more;
- ``slow_key = "model.onnx"``: a GET of a key ending so gets its body in 20
  pieces over ``slow_s`` seconds (S3 slow but moving).

:meth:`resume` relays everything again and lets the held requests go (their
connections are closed unanswered). Point a client at it with
``AWS_ENDPOINT_URL_S3 = proxy.endpoint_url``.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import urlsplit

from running import Running

HOLD_S = 120.0  # the longest a held request is kept unanswered
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-connection"}
_OWN = {"content-length", "server", "date"}  # written by this server itself


class StallingS3(Running):
    """A relay to ``upstream`` (an ``http://host:port`` S3) that can stall on request."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.silent = False
        self.stall_key: str | None = None
        self.stall_after = 64 * 1024
        self.slow_key: str | None = None
        self.slow_s = 4.0
        self.requests: Counter[str] = Counter()  # "GET /bucket/key" -> how many
        self.held = 0  # requests held unanswered so far
        self._lock = threading.Lock()
        self._release = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy._handle(self)

            do_HEAD = do_PUT = do_GET

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="stalling-s3", daemon=True
        )

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.resume()
        self.server.shutdown()
        self.server.server_close()

    def resume(self) -> None:
        """Relay everything again; held requests end unanswered."""
        self.silent = False
        self.stall_key = None
        self._release.set()

    def count(self, suffix: str, method: str = "GET") -> int:
        """How many ``method`` requests were for a path ending with ``suffix``."""
        with self._lock:
            return sum(
                n
                for k, n in self.requests.items()
                if k.startswith(method + " ") and k.endswith(suffix)
            )

    def _hold(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.held += 1
        self._release.wait(HOLD_S)
        handler.close_connection = True

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        path = urlsplit(handler.path).path
        with self._lock:
            self.requests[f"{handler.command} {path}"] += 1
        if self.silent:
            self._hold(handler)
            return
        upstream = http.client.HTTPConnection(*self._upstream, timeout=30)
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
            upstream.request(handler.command, handler.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            replied = response.getheaders()
        finally:
            upstream.close()
        handler.send_response(response.status)
        for key, value in replied:
            if key.lower() not in _HOP | _OWN:
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if handler.command == "HEAD":
            return
        stall = self.stall_key
        if handler.command == "GET" and stall is not None and path.endswith(stall):
            handler.wfile.write(data[: self.stall_after])
            handler.wfile.flush()
            self._hold(handler)
            return
        slow = self.slow_key
        if handler.command == "GET" and slow is not None and path.endswith(slow):
            step = -(-len(data) // 20) or 1
            for start in range(0, len(data), step):
                handler.wfile.write(data[start : start + step])
                handler.wfile.flush()
                time.sleep(self.slow_s / 20)
            return
        handler.wfile.write(data)
