"""Real servers for tests: the ASGI app under uvicorn (thread or subprocess), raw HTTP.

Everything listens on 127.0.0.1 and a free port; every wait is bounded.

    with ThreadedServer(create_app(settings)) as srv:
        status, headers, body = raw_request(srv.port, b"GET /../etc/passwd HTTP/1.1\\r\\n...")

    with AppProcess(env) as proc:          # python -m uvicorn ... in a subprocess
        httpx.get(proc.url + "/v1/health")
        proc.kill()                        # SIGKILL, no shutdown
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

import httpx
from running import Running

HOST = "127.0.0.1"


def free_port() -> int:
    """A port nothing listens on right now (bound and released)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class ThreadedServer(Running):
    """uvicorn serving ``app`` in a background thread on 127.0.0.1 (free port)."""

    def __init__(self, app: Any, **config: Any) -> None:
        import uvicorn

        options: dict[str, Any] = {
            "host": HOST,
            "port": 0,
            "log_level": "warning",
            "access_log": False,
            "lifespan": "on",
        }
        options.update(config)
        self.server = uvicorn.Server(uvicorn.Config(app, **options))
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)
        self.port = 0

    def start(self, timeout_s: float = 20.0) -> Self:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        sockets = self.server.servers[0].sockets
        self.port = int(sockets[0].getsockname()[1])
        return self

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)


class AppProcess(Running):
    """``python -m uvicorn anchored_query.serve.app:create_app --factory`` in a subprocess.

    The app reads its settings from ``env`` (``ANCHORED_*``). ``command`` runs
    something else instead (``--port`` is appended), e.g. ``anchored serve``.
    ``start`` waits until ``ready_path`` answers 200 (the index loaded).
    """

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        port: int | None = None,
        ready_path: str = "/v1/health",
        extra_args: tuple[str, ...] = (),
        log_file: Path | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.env = {**os.environ, **env}
        self.port = port or free_port()
        self.ready_path = ready_path
        self.args = (
            [*command, "--port", str(self.port)]
            if command
            else [
                sys.executable,
                "-m",
                "uvicorn",
                "anchored_query.serve.app:create_app",
                "--factory",
                "--host",
                HOST,
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--no-access-log",
                *extra_args,
            ]
        )
        self.log_file = log_file
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout_s: float = 60.0) -> Self:
        self._log = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=self._log, stderr=self._log)
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=5.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the server exited with {self.proc.returncode}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(self.url + self.ready_path).status_code == 200:
                        return self
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the server did not answer {self.ready_path} in time")
                time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, nothing runs after."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
            self._log = None


def raw_request(
    port: int, request: bytes, *, timeout_s: float = 10.0
) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are (no client-side path normalising); read one response.

    Reads until the body is complete (Content-Length) or the server closes.
    """
    with socket.create_connection((HOST, port), timeout=timeout_s) as sock:
        sock.sendall(request)
        return read_response(sock, timeout_s=timeout_s)


def read_response(
    sock: socket.socket, *, timeout_s: float = 10.0
) -> tuple[int, dict[str, str], bytes]:
    """Read one HTTP/1.1 response from ``sock`` (status, lower-cased headers, body)."""
    sock.settimeout(timeout_s)
    data = b""
    deadline = time.monotonic() + timeout_s
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk or time.monotonic() > deadline:
            raise ConnectionError(f"no complete response header: {data[:200]!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "-1"))
    while (length < 0 or len(body) < length) and time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        body += chunk
    return status, headers, body
