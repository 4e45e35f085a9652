"""One model call's deadline, kept whatever the server does.

A timeout on each read cannot hold a call to its time: a server may send its
headers and stall the body, stop a stream between two events, or trickle a byte
a second so that no single read ever waits long. So each attempt has one
:class:`AttemptDeadline`, and the client does two things with it:

- each wait before the reply starts (the connect, sending the request, the wait
  for a pooled connection and for the headers) is given at most the time left
  when it begins (:meth:`~AttemptDeadline.httpx_timeouts` for httpx, botocore's
  per-request read timeout for Bedrock), not a timeout fixed when the attempt
  began;
- the socket the reply comes on, once its headers are in, is shut down when the
  deadline passes (:meth:`~AttemptDeadline.guard`), so a read blocked on it
  returns at once, whichever library made it and whatever timeout that library
  set: a stalled body or stream, or a trickle, ends at the deadline.

Whatever a call then fails with after :attr:`~AttemptDeadline.fired` is a timeout.
Not covered: a server that trickles its status line and headers (before them the
socket is not known here, and each read only has its own timeout).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from anchored_query.llm.base import Closing, check_timeout

# What a wait gets once the deadline has passed: long enough to be a timeout (a
# socket with timeout 0 would be non-blocking, and fail as a broken connection).
EXPIRED_WAIT_S = 0.001


class AttemptDeadline(Closing):
    """The end of one attempt, ``seconds`` from now on a monotonic clock.

    Use it as a context manager: leaving it stops the watchdog.
    """

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = check_timeout(seconds)
        self._clock = clock
        self.end = clock() + self.seconds
        self._fired = threading.Event()
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._watched: socket.socket | None = None
        self._closed = False

    def left(self) -> float:
        """Seconds until the deadline (negative once it has passed)."""
        return self.end - self._clock()

    def wait_s(self, cap: float | None = None) -> float:
        """What one blocking wait may take: the time left, at most ``cap``; a sliver
        (:data:`EXPIRED_WAIT_S`) once the deadline has passed."""
        left = self.left() if cap is None else min(cap, self.left())
        return max(left, EXPIRED_WAIT_S)

    @property
    def fired(self) -> bool:
        """Whether the watchdog shut the connection down: the call ran out of time."""
        return self._fired.is_set()

    def httpx_timeouts(self, connect_s: float) -> dict[str, float | None]:
        """Timeouts for an httpx request (``request.extensions["timeout"]``), each worked
        out when httpcore looks it up: at the start of the connect (capped at
        ``connect_s``), of sending, of the wait for a pooled connection, for the headers
        and for the body, so each of them waits at most what is left then."""
        return _TimeLeft(self, {"connect": connect_s, "read": None, "write": None, "pool": None})

    def guard(self, sock: socket.socket | None) -> None:
        """Shut ``sock`` down when the deadline passes (at once if it has passed)."""
        if sock is None:
            return
        self.release()
        with self._lock:
            if self._closed:
                return
            self._watched = sock
            self._timer = threading.Timer(max(0.0, self.left()), self._fire, args=(sock,))
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, sock: socket.socket) -> None:
        # Under the lock, so that once release() returns the socket is left alone.
        with self._lock:
            if self._closed or self._watched is not sock:
                return
            self._fired.set()
            # The plain socket's shutdown, also for TLS: it wakes a read blocked in
            # another thread (which then fails) without touching the TLS state it uses.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def release(self) -> None:
        """Stop watching the socket: the reply is in (and the connection may go back to
        its pool, where it must not be shut down later)."""
        with self._lock:
            timer, self._timer, self._watched = self._timer, None, None
        if timer is not None:
            timer.cancel()

    def restart(self) -> None:
        """Start the next attempt: ``seconds`` from now, the watchdog stopped."""
        self.release()
        with self._lock:
            self.end = self._clock() + self.seconds
            self._fired.clear()

    def close(self) -> None:
        """Stop the watchdog: the attempt is over."""
        with self._lock:
            self._closed = True
        self.release()


class _TimeLeft(dict[str, float | None]):
    """httpx's timeouts for one request, each the time left when it is looked up (at most
    its own value; ``None``: no cap of its own)."""

    def __init__(self, deadline: AttemptDeadline, caps: dict[str, float | None]) -> None:
        super().__init__(caps)
        self._deadline = deadline

    def get(self, key: str, default: Any = None) -> float | None:
        return self._deadline.wait_s(super().get(key, default))

    def __getitem__(self, key: str) -> float | None:
        return self._deadline.wait_s(super().__getitem__(key))


def socket_of(raw: object) -> socket.socket | None:
    """The socket under a response (httpx's ``network_stream`` extension, urllib3's
    ``connection``), or None when it is not to be found."""
    extensions = getattr(raw, "extensions", None)
    if isinstance(extensions, dict):
        stream = extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
    else:
        sock = getattr(getattr(raw, "connection", None), "sock", None)
    return sock if isinstance(sock, socket.socket) else None
