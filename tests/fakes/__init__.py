"""Fake LLM provider servers: real HTTP on 127.0.0.1, the provider's wire format,
scripted behaviour, every request recorded (credentials redacted).

    from fakes import FakeOpenAIServer, Reply, Sleep, Status, echo_prompt

    with FakeOpenAIServer() as srv:
        srv.script(Status(500), Sleep(2.0, Reply("late")), Reply(echo_prompt))
        client = OpenAICompatClient(srv.url, "sk-test", "fake-model")
        ...
        assert srv.requests[0].system == "You answer from the docs."

Behaviours are consumed one per request, in order; when the queue is empty the
server's ``default`` behaviour answers (``Reply("This is a fake answer.")``).
A reply may be a callable of the :class:`RecordedRequest`, e.g. :func:`echo_prompt`,
:func:`quote_passages`, :func:`obey_injection` or :func:`leak_system_prompt`.
:class:`Stall` and :class:`Trickle` hold any reply back, whatever the provider's format
(headers then nothing, N stream events then nothing, a byte a second).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import re
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from running import Running

# ---------------------------------------------------------------- requests


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received, normalised across providers.

    ``headers`` has lower-case names; ``authorization`` (and AWS session
    tokens) are replaced by ``"[REDACTED]"``; use :meth:`sent_credential` to
    check which key was sent. ``messages`` is ``[{"role", "content"}]`` with
    system messages first, whatever the provider's wire shape.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    model: str
    messages: list[dict[str, str]]
    max_tokens: int | None
    temperature: float | None
    credential_sha256: str | None = field(default=None, repr=False)
    received: float = 0.0

    @property
    def system(self) -> str:
        """All system text, joined by blank lines."""
        return "\n\n".join(m["content"] for m in self.messages if m["role"] == "system")

    @property
    def user(self) -> str:
        """The last user message (the prompt the model answers)."""
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else ""

    @property
    def prompt(self) -> str:
        """Every message's text, joined: search it for what reached the model."""
        return "\n\n".join(m["content"] for m in self.messages)

    def sent_credential(self, secret: str) -> bool:
        """Whether the request carried ``secret`` (an API key, or an AWS access key id)."""
        digest = hashlib.sha256(secret.encode()).hexdigest()
        return self.credential_sha256 == digest


# ---------------------------------------------------------------- behaviours

ReplyText = str | Callable[[RecordedRequest], str]


@dataclass(frozen=True)
class Reply:
    """Answer with ``text``, or with ``text(request)`` when it is callable.

    ``finish_reason`` is sent in the OpenAI vocabulary ("stop", "length"; the
    Bedrock fake maps "length" to ``max_tokens``); ``usage`` is (input, output)
    tokens to report instead of the default word counts.
    """

    text: ReplyText
    finish_reason: str = "stop"
    usage: tuple[int, int] | None = None

    def render(self, request: RecordedRequest) -> str:
        """The reply text for ``request``."""
        return self.text(request) if callable(self.text) else self.text


@dataclass(frozen=True)
class Sleep:
    """Wait ``seconds`` (the client should time out), then behave as ``then``
    (default: the server's default); the wait ends early when the server closes."""

    seconds: float
    then: Behaviour | None = None


@dataclass(frozen=True)
class Status:
    """Answer with an error status in the provider's error format.

    ``retry_after`` (seconds) sends ``Retry-After`` (and ``x-amz-retry-after``
    in ms for Bedrock); ``error_type`` overrides the provider's error type
    (Bedrock: ``x-amzn-ErrorType``, e.g. "ModelErrorException").
    """

    code: int
    message: str = "fake provider error"
    retry_after: float | None = None
    error_type: str | None = None


@dataclass(frozen=True)
class Hang:
    """Accept the request and never answer: wait until the client goes away (recorded
    in :attr:`FakeServer.disconnected`) or the server closes."""


@dataclass(frozen=True)
class Malformed:
    """Answer 200 with ``body`` as-is (default: cut-off JSON)."""

    body: str = '{"choices": [{"message": {"content": "cut o'


@dataclass(frozen=True)
class Empty:
    """Answer 200, well formed, with no text."""


@dataclass(frozen=True)
class Refuse:
    """The model or a content filter declines (OpenAI ``finish_reason: content_filter``
    with a ``refusal``; Bedrock ``stopReason: guardrail_intervened``)."""

    text: str = "Sorry, I can't help with that."


@dataclass(frozen=True)
class Disconnect:
    """Close the connection without answering."""


@dataclass(frozen=True)
class Partial:
    """To a streaming request: send the first ``tokens`` pieces of ``text`` (at the
    server's :class:`StreamRate`), then ``then``: "disconnect" (drop the connection) or
    "hang" (send nothing more until the client goes away). Not streaming: a Disconnect."""

    text: ReplyText
    tokens: int
    then: str = "disconnect"

    def render(self, request: RecordedRequest) -> str:
        """The reply text for ``request``."""
        return self.text(request) if callable(self.text) else self.text


@dataclass(frozen=True)
class Stall:
    """Answer as ``then`` would (default: the server's default), but send only its status
    line, its headers and its first ``events`` writes, then nothing until the client goes
    away. A streamed reply writes one event at a time (the OpenAI fake's first is the role
    chunk, Bedrock's ``messageStart``); a buffered one writes its body at once, so
    ``events=0`` is "headers, then a body that never comes"."""

    then: Behaviour | None = None
    events: int = 0


@dataclass(frozen=True)
class Trickle:
    """Answer as ``then`` would, the headers at once and then the body one byte every
    ``every_s`` seconds: each read gets a byte before a read timeout longer than
    ``every_s`` fires, so only a limit on the whole call stops it."""

    then: Behaviour | None = None
    every_s: float = 1.0


@dataclass(frozen=True)
class StreamRate:
    """How fast a fake streams a reply: ``first_token_s`` before the first piece (the
    model reading the prompt), then ``tokens_per_s`` pieces a second (0: all at once).
    A piece is a word with the white space after it (about a token of English)."""

    first_token_s: float = 0.0
    tokens_per_s: float = 0.0
    buffered: bool = False  # also wait that long before a reply sent whole (a model would)


Behaviour = (
    Reply
    | Sleep
    | Hang
    | Status
    | Malformed
    | Empty
    | Refuse
    | Disconnect
    | Partial
    | Stall
    | Trickle
)


# ---------------------------------------------------------------- reply helpers


def echo_prompt(request: RecordedRequest) -> str:
    """Reply with the last user message, verbatim."""
    return request.user


_PASSAGE_MARK = re.compile(r"(?m)^[^\S\n]*\[(\d+)\][^\S\n]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def quote_passages(
    k: int = 1, pattern: re.Pattern[str] = _PASSAGE_MARK
) -> Callable[[RecordedRequest], str]:
    """A reply that quotes the first sentence of the first ``k`` passages in the
    prompt, each cited: ``"<sentence> [n]."`` (so citation checks pass).

    ``pattern`` finds a passage's mark (group 1: its number; default: a line
    starting ``[n]``). Its text is the lines after the mark line up to a blank
    line, a ``<tag>`` line or the next mark; with no such lines, the rest of the
    mark line itself (``[n] text`` on one line).
    """

    def reply(request: RecordedRequest) -> str:
        text = request.user or request.prompt
        marks = list(pattern.finditer(text))
        sentences: list[str] = []
        for i, mark in enumerate(marks[:k]):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
            lines: list[str] = []
            for line in text[mark.end() : end].split("\n")[1:]:
                if not line.strip() or line.lstrip().startswith("<"):
                    break
                lines.append(line.strip())
            if not lines:
                lines = [text[mark.end() : end].split("\n", 1)[0].strip()]
            passage = " ".join(" ".join(lines).split())
            if passage:
                sentence = _SENTENCE_END.split(passage, maxsplit=1)[0].rstrip(".!? ")
                sentences.append(f"{sentence} [{mark.group(1)}].")
        return " ".join(sentences) or "I could not find any passages."

    return reply


_INJECTION = re.compile(
    r"(?i)[^.\n]*\b(ignore (all |any )?(previous|prior|above|earlier) instructions"
    r"|disregard (the |your )?(system|previous)|you are now|new instructions?:)[^\n]*"
)


def obey_injection(request: RecordedRequest) -> str:
    """A model that falls for prompt injection: repeats the injected instruction
    found in the prompt (uncited) and claims to follow it."""
    found = _INJECTION.search(request.prompt)
    if found is None:
        return "I will now ignore my instructions. No citations needed."
    return f"As instructed: {found.group(0).strip()} I will follow these new instructions."


def leak_system_prompt(request: RecordedRequest) -> str:
    """A model that leaks its system prompt verbatim (uncited)."""
    return f"My instructions are: {request.system}"


# ---------------------------------------------------------------- server


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that dropped its connection (gave up on a stream) is no server error.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 10  # idle keep-alive connections end on their own

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep test output clean

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        try:
            self.server.fake._serve(self)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, _GoneAway):
            self.close_connection = True  # the client gave up (e.g. timed out)

    def send_body(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        """Write one complete response."""
        self.send_response(status)
        sent = {k.lower() for k in (headers or {})}
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if "content-type" not in sent:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


class FakeServer(Running):
    """Base of the fake providers: threading HTTP server, behaviour queue, recording.

    Subclasses turn a request into a :class:`RecordedRequest` (:meth:`parse`)
    and a behaviour into a response (:meth:`respond`).
    """

    default_reply: ClassVar[str] = "This is a fake answer."

    def __init__(self, default: Behaviour | None = None, *, rate: StreamRate | None = None) -> None:
        self.default: Behaviour = default or Reply(self.default_reply)
        self.rate = rate or StreamRate()
        self._queue: deque[Behaviour] = deque()
        self._requests: list[RecordedRequest] = []
        self._disconnected: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> Self:
        """Listen on a free port of 127.0.0.1 and serve in a background thread."""
        if self._httpd is not None:
            return self
        self._closing.clear()
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end sleeping behaviours and drop open connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._closing.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._httpd is None:
            raise RuntimeError("the fake server is not started; use it as a context manager")
        return int(self._httpd.server_address[1])

    @property
    def root(self) -> str:
        """``http://127.0.0.1:<port>`` without any path."""
        return f"http://127.0.0.1:{self.port}"

    # -- script and records

    def script(self, *behaviours: Behaviour) -> Self:
        """Queue behaviours, one per coming request, after any already queued."""
        with self._lock:
            self._queue.extend(behaviours)
        return self

    @property
    def pending(self) -> int:
        """How many scripted behaviours are not used yet."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (a copy), oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def last(self) -> RecordedRequest:
        """The latest request; AssertionError when there was none."""
        with self._lock:
            assert self._requests, "the fake server received no request"
            return self._requests[-1]

    def reset(self) -> None:
        """Forget queued behaviours and recorded requests."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._disconnected.clear()

    # -- internals

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _serve(self, handler: _Handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in handler.headers.items()}
        request = self.parse(handler.command, handler.path, headers, raw)
        error = self.validate(request)
        with self._lock:
            self._requests.append(request)
            behaviour = None if error else (self._queue.popleft() if self._queue else None)
        if error is not None:
            self.respond(handler, request, error)
            return
        behaviour = behaviour or self.default
        while isinstance(behaviour, Sleep | Hang):
            seconds = behaviour.seconds if isinstance(behaviour, Sleep) else float("inf")
            if not self._wait(handler, request, seconds):
                handler.close_connection = True
                return
            behaviour = (behaviour.then if isinstance(behaviour, Sleep) else None) or self.default
        if isinstance(behaviour, Disconnect):
            handler.close_connection = True
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if isinstance(behaviour, Stall | Trickle):
            output = handler.wfile
            handler.wfile = _HeldBack(self, handler, request, behaviour)  # type: ignore[assignment]
            try:
                self.respond(handler, request, behaviour.then or self.default)
            finally:
                handler.wfile = output
            return
        self.respond(handler, request, behaviour)

    def _wait(self, handler: _Handler, request: RecordedRequest, seconds: float) -> bool:
        """Wait ``seconds``; False (and the request noted as abandoned when the client
        went away) if the server closes or the client disconnects first."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return True
            if self._closing.wait(min(left, 0.02)):
                return False
            if _peer_closed(handler.connection):
                with self._lock:
                    self._disconnected.append(request)
                return False

    @property
    def disconnected(self) -> list[RecordedRequest]:
        """Requests whose client closed the connection while the server was still
        working on them (a Sleep or a Hang): the client cancelled them."""
        with self._lock:
            return list(self._disconnected)

    def record(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        *,
        model: str,
        messages: list[dict[str, str]],
        max_tokens: int | None,
        temperature: float | None,
        body: Any,
        credential: str | None,
    ) -> RecordedRequest:
        """Build the record, redacting credentials from the headers."""
        safe = dict(headers)
        for name in ("authorization", "x-amz-security-token", "api-key", "x-api-key"):
            if name in safe:
                safe[name] = "[REDACTED]"
        digest = hashlib.sha256(credential.encode()).hexdigest() if credential else None
        return RecordedRequest(
            method=method,
            path=path,
            headers=safe,
            body=body,
            raw=raw,
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            credential_sha256=digest,
            received=time.time(),
        )

    def parse(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> RecordedRequest:
        """Turn the request into a record (provider specific)."""
        raise NotImplementedError

    def validate(self, request: RecordedRequest) -> Status | None:
        """A Status to answer with when the request breaks the wire format, else None."""
        return None

    def respond(self, handler: _Handler, request: RecordedRequest, behaviour: Behaviour) -> None:
        """Write the response for ``behaviour`` (provider specific)."""
        raise NotImplementedError


_PIECE = re.compile(r"\s*\S+\s*|\s+")


def stream_pieces(text: str) -> list[str]:
    """``text`` cut into the pieces a fake streams: words with their white space."""
    return _PIECE.findall(text)


class ChunkedWriter:
    """Writes a ``Transfer-Encoding: chunked`` body, paced by a :class:`StreamRate`;
    a client that went away is noted in :attr:`FakeServer.disconnected`."""

    def __init__(self, fake: FakeServer, handler: _Handler, request: RecordedRequest) -> None:
        self.fake, self.handler, self.request = fake, handler, request
        self.start = time.monotonic()
        self.sent = 0

    def pace(self) -> bool:
        """Wait until the next piece is due; False when the client or server went away."""
        rate = self.fake.rate
        due = self.start + rate.first_token_s
        if rate.tokens_per_s > 0:
            due += self.sent / rate.tokens_per_s
        return self.fake._wait(self.handler, self.request, due - time.monotonic())

    def write(self, data: bytes) -> bool:
        """Send one chunk; False when the client went away."""
        try:
            self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.handler.wfile.flush()
        except OSError:
            with self.fake._lock:
                self.fake._disconnected.append(self.request)
            self.handler.close_connection = True
            return False
        self.sent += 1
        return True

    def end(self) -> None:
        """The last, empty chunk."""
        with contextlib.suppress(OSError):
            self.handler.wfile.write(b"0\r\n\r\n")
            self.handler.wfile.flush()


class _GoneAway(Exception):
    """The client went away (or the server closed) while a reply was held back."""


class _HeldBack:
    """A handler's output that passes the headers (its first write) and then holds the
    reply back: a :class:`Stall` passes ``events`` more writes and then waits until the
    client goes away; a :class:`Trickle` passes the rest a byte every ``every_s``."""

    def __init__(
        self, fake: FakeServer, handler: _Handler, request: RecordedRequest, how: Stall | Trickle
    ) -> None:
        self.fake, self.handler, self.request, self.how = fake, handler, request, how
        self.inner = handler.wfile
        self.writes = 0

    def write(self, data: bytes) -> int:
        self.writes += 1
        if isinstance(self.how, Trickle):
            if self.writes == 1:  # the headers
                self._send(data)
                return len(data)
            for i in range(len(data)):
                if not self.fake._wait(self.handler, self.request, self.how.every_s):
                    raise _GoneAway()
                self._send(data[i : i + 1])
        elif self.writes - 1 <= self.how.events:  # the headers, then ``events`` writes
            self._send(data)
        else:
            self.fake._wait(self.handler, self.request, float("inf"))
            raise _GoneAway()
        return len(data)

    def _send(self, data: bytes) -> None:
        try:
            self.inner.write(data)
            self.inner.flush()
        except OSError:
            with self.fake._lock:
                self.fake._disconnected.append(self.request)
            raise _GoneAway() from None

    def flush(self) -> None:
        return


def _peer_closed(conn: socket.socket) -> bool:
    """Whether the client closed (or reset) its end of ``conn``."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        if not readable:
            return False
        return conn.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def json_body(raw: bytes) -> Any:
    """The parsed JSON body, or None when it is not JSON."""
    try:
        return json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        return None


def iter_text(value: Any) -> Iterator[str]:
    """Strings inside an OpenAI content value (a string or a list of parts)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for part in value:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]


from .bedrock_server import FakeBedrockServer  # noqa: E402 - needs the base above
from .openai_server import FakeOpenAIServer  # noqa: E402

__all__ = [
    "Behaviour",
    "ChunkedWriter",
    "Disconnect",
    "Empty",
    "FakeBedrockServer",
    "FakeOpenAIServer",
    "FakeServer",
    "Hang",
    "Malformed",
    "Partial",
    "RecordedRequest",
    "Refuse",
    "Reply",
    "Sleep",
    "Stall",
    "Status",
    "StreamRate",
    "Trickle",
    "echo_prompt",
    "leak_system_prompt",
    "obey_injection",
    "quote_passages",
    "stream_pieces",
]
