"""Client for Amazon Bedrock's Converse API (``POST /model/{modelId}/converse``, and
``/converse-stream`` for :meth:`BedrockClient.stream`).

Credentials come from the usual AWS chain (the function's IAM role on Lambda).
botocore signs, times out and retries (``standard`` mode); this module only
shapes the request, reads ``output.message.content[*].text`` and maps every
failure to an :class:`~anchored_query.errors.LLMError` category.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import boto3
import botocore.loaders
import botocore.session
import urllib3.exceptions
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)
from botocore.parsers import ResponseParserError

from anchored_query.errors import LLMError, LLMErrorCategory, redact
from anchored_query.llm.base import (
    ChatMessage,
    Closing,
    Completion,
    StreamEvent,
    UnclosedReasoning,
    check_request,
    check_timeout,
    reply_byte_bound,
    strip_reasoning,
    usage_int,
)
from anchored_query.llm.deadline import AttemptDeadline, socket_of

# Error codes of the Converse API (and of AWS in general) by category.
_CODE_CATEGORIES: dict[str, LLMErrorCategory] = {
    "ThrottlingException": "rate_limited",
    "ServiceQuotaExceededException": "rate_limited",
    "TooManyRequestsException": "rate_limited",
    "ModelNotReadyException": "rate_limited",
    "InternalServerException": "http_5xx",
    "ServiceUnavailableException": "http_5xx",
    "ModelErrorException": "model_error",
    "ModelStreamErrorException": "model_error",
    "ModelTimeoutException": "timeout",
    "ValidationException": "bad_request",
    "ResourceNotFoundException": "bad_request",
    "AccessDeniedException": "auth",
    "UnrecognizedClientException": "auth",
    "InvalidSignatureException": "auth",
    "ExpiredTokenException": "auth",
    "IncompleteSignature": "auth",
    "MissingAuthenticationTokenException": "auth",
}
_REFUSED_STOPS = frozenset(("guardrail_intervened", "content_filtered"))
# Converse stopReason in the OpenAI vocabulary (Completion.finish_reason).
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
}
_MAX_CLIENTS = 6
# botocore fixes its timeouts per client, so a request's remaining time is rounded
# down to one of these steps (at most ~25% less) to keep the number of clients small.
_TIMEOUT_STEPS = (0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 90, 120)


class BedrockClient(Closing):
    """Bedrock Converse with botocore's connect/read timeouts and ``standard`` retries.

    ``region`` empty or ``None`` means the function's own (``AWS_REGION``, which
    Lambda sets). ``max_retries`` extra attempts are made on throttling, 5xx, timeouts and
    dropped connections. ``endpoint_url`` points boto3 elsewhere (a VPC
    endpoint, or a fake server in tests). A ``timeout_s`` given to
    :meth:`complete` gets its own botocore client (a few are cached), after rounding it
    down to a step of ``_TIMEOUT_STEPS``, so a request's remaining time may be passed.
    """

    def __init__(
        self,
        model_id: str,
        region: str | None,
        endpoint_url: str | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 1,
        *,
        connect_timeout_s: float = 5.0,
        session: boto3.Session | None = None,
    ) -> None:
        if not model_id.strip():
            raise ValueError("model_id must name a Bedrock model or inference profile")
        region = (region or "").strip() or _environment_region()
        if not region:
            raise ValueError("region must be an AWS region, e.g. us-east-1 (or set AWS_REGION)")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        self.name = f"bedrock:{model_id}"
        self.model_id = model_id
        self.region = region
        self.endpoint_url = endpoint_url or None
        self.timeout_s = check_timeout(timeout_s)
        self.connect_timeout_s = check_timeout(connect_timeout_s, "connect_timeout_s")
        self.max_retries = int(max_retries)
        self._session: Any = session
        self._clients: dict[float, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"BedrockClient(name={self.name!r}, region={self.region!r})"

    def close(self) -> None:
        """Close every botocore client this object made."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def _client(self, timeout_s: float) -> Any:
        # botocore fixes timeouts per client: keep one client per timeout (to 0.1 s), a few
        # at most, all from one session so credentials are resolved once.
        key = _timeout_step(timeout_s)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                if self._session is None:
                    self._session = _new_session()
                config = Config(
                    region_name=self.region,
                    connect_timeout=min(self.connect_timeout_s, key),
                    read_timeout=key,
                    retries={"mode": "standard", "total_max_attempts": self.max_retries + 1},
                    user_agent_extra="anchored",
                )
                create = getattr(self._session, "client", None) or self._session.create_client
                client = create("bedrock-runtime", endpoint_url=self.endpoint_url, config=config)
                # botocore has no hook between a response's headers and its body, so its
                # HTTP session is wrapped (the one botocore-private name used here).
                endpoint = client._endpoint
                endpoint.http_session = DeadlineSession(endpoint.http_session)
                if len(self._clients) >= _MAX_CLIENTS:  # forget the oldest; GC closes it
                    del self._clients[next(iter(self._clients))]
                self._clients[key] = client
            return client

    def _secrets(self) -> tuple[str, ...]:
        """The credentials in use, to mask them should a message ever echo one."""
        try:
            creds = self._session.get_credentials() if self._session is not None else None
            frozen = creds.get_frozen_credentials() if creds is not None else None
        except BotoCoreError:
            return ()
        if frozen is None:
            return ()
        return tuple(s for s in (frozen.access_key, frozen.secret_key, frozen.token) if s)

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Completion:
        """Send the chat through Converse and return the answer; raise LLMError on failure.
        The call ends within ``timeout_s`` whatever the server does (:mod:`.deadline`)."""
        request = self._request(messages, max_tokens, temperature)
        per_attempt_s = self.timeout_s if timeout_s is None else check_timeout(timeout_s)
        with (
            AttemptDeadline(per_attempt_s) as deadline,
            self._errors(deadline, "response is not the Converse format"),
            _held_to(deadline, reply_byte_bound(max_tokens)),
        ):
            response = self._client(per_attempt_s).converse(**request)
        return self._text(response)

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Iterator[StreamEvent]:
        """The reply as it is written (ConverseStream: botocore reads the AWS event-stream
        framing), then its Completion; all of it within ``timeout_s`` (:mod:`.deadline`:
        the connection is shut down when the time is up, so a stream that stalls or
        trickles ends then)."""
        request = self._request(messages, max_tokens, temperature)
        per_attempt_s = self.timeout_s if timeout_s is None else check_timeout(timeout_s)
        parts: list[str] = []
        size, limit = 0, reply_byte_bound(max_tokens)
        stop: Any = None
        usage: Any = None
        # An exception event mid-stream is a ClientError too (EventStreamError).
        with (
            AttemptDeadline(per_attempt_s) as deadline,
            self._errors(deadline, "response is not the event stream", reading=True),
        ):
            with _held_to(deadline):
                events = self._client(per_attempt_s).converse_stream(**request)["stream"]
            try:
                for event in events:
                    delta = event.get("contentBlockDelta", {}).get("delta", {})
                    if isinstance(delta.get("text"), str) and delta["text"]:
                        size += len(delta["text"].encode("utf-8", "replace"))
                        if size > limit:
                            raise ReplyTooLarge(limit)
                        parts.append(delta["text"])
                        yield delta["text"]
                    stop = event.get("messageStop", {}).get("stopReason", stop)
                    usage = event.get("metadata", {}).get("usage", usage)
            finally:
                events.close()  # an abandoned stream closes the connection
            if stop is None:
                raise LLMError(
                    "connection",
                    "the stream ended before the reply was complete",
                    provider=self.name,
                )
        content = [{"text": "".join(parts)}] if parts else []
        yield self._text(
            {"output": {"message": {"content": content}}, "stopReason": stop, "usage": usage}
        )

    def _request(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> dict[str, Any]:
        """The Converse (and ConverseStream) request: the chat, its system text apart."""
        check_request(messages, max_tokens, temperature)
        request: dict[str, Any] = {
            "modelId": self.model_id,
            "messages": converse_messages(messages),
            "inferenceConfig": {"maxTokens": max_tokens, "temperature": float(temperature)},
        }
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        if system.strip():
            request["system"] = [{"text": system}]
        return request

    @contextlib.contextmanager
    def _errors(
        self, deadline: AttemptDeadline, malformed: str, reading: bool = False
    ) -> Iterator[None]:
        """botocore's failures of one call as LLMError (``malformed``: what a response that
        does not parse is not); ``reading``: urllib3's too, from reading a stream's body.
        Whatever the call fails with once ``deadline`` has shut its connection is a timeout."""
        try:
            yield
        except Exception as exc:
            if deadline.fired and not (isinstance(exc, LLMError) and exc.category == "timeout"):
                detail = f"reply not complete within {deadline.seconds:g}s"
                raise self._error("timeout", detail, exc) from None
            if isinstance(exc, LLMError):
                raise
            error = self._failure(exc, deadline.seconds, malformed, reading)
            if error is None:
                raise
            raise error from None

    def _failure(
        self, exc: Exception, per_attempt_s: float, malformed: str, reading: bool
    ) -> LLMError | None:
        """The LLMError a botocore (or, ``reading``, urllib3) failure stands for; None for
        anything else."""
        if isinstance(exc, ClientError):
            return self._client_error(exc)
        if isinstance(exc, ReadTimeoutError | ConnectTimeoutError):
            return self._error("timeout", f"no answer within {per_attempt_s:g}s", exc)
        if isinstance(
            exc,
            EndpointConnectionError | ConnectionClosedError | BotoConnectionError | HTTPClientError,
        ):
            return self._error("connection", str(exc), exc)
        if isinstance(exc, NoCredentialsError | PartialCredentialsError | NoRegionError):
            return self._error("auth", str(exc), exc)
        if isinstance(exc, ResponseParserError):
            return self._error("malformed", malformed, exc)
        if isinstance(exc, ReplyTooLarge):
            return self._error("malformed", str(exc), exc)
        if reading and isinstance(exc, urllib3.exceptions.ReadTimeoutError):
            return self._error("timeout", f"no answer within {per_attempt_s:g}s", exc)
        if reading and isinstance(exc, urllib3.exceptions.HTTPError):  # dropped mid-stream
            return self._error("connection", str(exc), exc)
        if isinstance(exc, BotoCoreError):
            return self._error("unexpected", str(exc), exc)
        return None

    def _error(self, category: LLMErrorCategory, detail: str, exc: Exception) -> LLMError:
        detail = redact(f"{type(exc).__name__}: {detail}", *self._secrets())
        return LLMError(category, detail, provider=self.name)

    def _client_error(self, exc: ClientError) -> LLMError:
        error = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        code = str(error.get("Code", ""))
        status = meta.get("HTTPStatusCode")
        status = status if isinstance(status, int) else None
        # A stream's exception events name the code in lower camel case (throttlingException).
        category = _CODE_CATEGORIES.get(code) or _CODE_CATEGORIES.get(code[:1].upper() + code[1:])
        if category is None:
            if status == 429:
                category = "rate_limited"
            elif status in (401, 403):
                category = "auth"
            elif status is not None and status >= 500:
                category = "http_5xx"
            elif status is not None and 400 <= status < 500:
                category = "bad_request"
            else:
                category = "unexpected"
        attempts = int(meta.get("RetryAttempts", 0)) + 1
        detail = f"{code or 'error'}: {error.get('Message', '')} ({attempts} attempt(s))"
        detail = redact(detail, *self._secrets())
        return LLMError(category, detail, provider=self.name, status=status)

    def _text(self, response: Any) -> Completion:
        stop = response.get("stopReason") if isinstance(response, dict) else None
        if stop in _REFUSED_STOPS:
            raise LLMError("refused", f"stopReason={stop}", provider=self.name)
        if stop == "malformed_model_output":
            raise LLMError("malformed", f"stopReason={stop}", provider=self.name)
        try:
            content = response["output"]["message"]["content"]
        except (KeyError, TypeError):
            raise LLMError(
                "malformed", "response has no output.message.content", provider=self.name
            ) from None
        if not isinstance(content, list):
            raise LLMError("malformed", "output.message.content is not a list", provider=self.name)
        texts = [
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        ]
        try:
            text = strip_reasoning("".join(texts)).strip()
        except UnclosedReasoning:
            raise LLMError(
                "truncated",
                f"reasoning block never closed (stopReason={stop!r})",
                provider=self.name,
            ) from None
        if not text:
            raise LLMError("empty", f"no text (stopReason={stop!r})", provider=self.name)
        usage = response.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return Completion(
            text=text,
            input_tokens=usage_int(usage.get("inputTokens")),
            output_tokens=usage_int(usage.get("outputTokens")),
            finish_reason=_FINISH.get(stop, stop) if isinstance(stop, str) else None,
        )


class ReplyTooLarge(Exception):
    """A reply longer than its ``max_tokens`` allows (:func:`.base.reply_byte_bound`)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"reply larger than {limit} bytes")


# The deadline of the call this thread is making (botocore sends in the caller's
# thread), how many requests it sent for it and the most bytes its reply is read to.
_calling = threading.local()


@contextlib.contextmanager
def _held_to(deadline: AttemptDeadline, max_bytes: int | None = None) -> Iterator[None]:
    """Hold the botocore requests this thread sends meanwhile to ``deadline`` (and a body
    read whole to ``max_bytes``)."""
    outer = (
        getattr(_calling, "deadline", None),
        getattr(_calling, "sent", 0),
        getattr(_calling, "max_bytes", None),
    )
    _calling.deadline, _calling.sent, _calling.max_bytes = deadline, 0, max_bytes
    try:
        yield
    finally:
        _calling.deadline, _calling.sent, _calling.max_bytes = outer


class DeadlineSession:
    """botocore's HTTP session, its requests held to the calling thread's deadline
    (:func:`_held_to`): each waits for the headers at most the time left, and the
    connection is shut down when the deadline passes, the body's reading included
    (botocore's own read timeout bounds each read, which a trickle never trips).
    A retry of botocore's own is a new attempt, with ``timeout_s`` of its own."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def send(self, request: Any) -> Any:
        """botocore's ``send``, with the body read (when not streamed) under the watchdog."""
        deadline: AttemptDeadline | None = getattr(_calling, "deadline", None)
        if deadline is None:
            return self._inner.send(request)
        if _calling.sent:  # a retry of botocore's own (max_retries): a new attempt
            deadline.restart()
        _calling.sent += 1
        context = getattr(request, "context", None)
        if isinstance(context, dict):  # botocore's per-request read timeout
            context["read_timeout"] = deadline.wait_s()
        streamed = request.stream_output
        request.stream_output = True  # the body is read here, not in the session
        try:
            response = self._inner.send(request)
        finally:
            request.stream_output = streamed
        deadline.guard(socket_of(response.raw))
        if not streamed:
            try:
                _read_body(response, _calling.max_bytes)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if deadline.fired or isinstance(exc, urllib3.exceptions.ReadTimeoutError):
                    raise ReadTimeoutError(endpoint_url=request.url, error=exc) from None
                raise ConnectionClosedError(
                    error=exc, request=request, endpoint_url=request.url
                ) from None
            deadline.release()  # the body is in; the connection goes back to the pool
            if deadline.fired:  # botocore does not enforce Content-Length: a body cut short
                raise ReadTimeoutError(endpoint_url=request.url, error="deadline passed")
        return response

    def close(self) -> None:
        """Close the wrapped session's connections."""
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _read_body(response: Any, max_bytes: int | None) -> None:
    """Read ``response``'s body into it, at most ``max_bytes`` (then the connection is
    closed and :class:`ReplyTooLarge` raised): a reply is parsed only once it is all in."""
    if max_bytes is None:
        response.content  # noqa: B018 - reads the body
        return
    chunks: list[bytes] = []
    size = 0
    for chunk in response.raw.stream(64 * 1024):
        size += len(chunk)
        if size > max_bytes:
            response.raw.close()
            raise ReplyTooLarge(max_bytes)
        chunks.append(chunk)
    response._content = b"".join(chunks)  # what AWSResponse.content reads the body into


def _timeout_step(timeout_s: float) -> float:
    """``timeout_s`` rounded down to a step of :data:`_TIMEOUT_STEPS` (below the
    first step: to 0.1 s; above the last: to whole minutes)."""
    if timeout_s > _TIMEOUT_STEPS[-1]:
        return float(int(timeout_s // 60) * 60)
    steps = [s for s in _TIMEOUT_STEPS if s <= timeout_s]
    return float(steps[-1]) if steps else max(0.1, round(timeout_s, 1))


def _environment_region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""


@functools.cache
def _loader() -> botocore.loaders.Loader:
    return botocore.loaders.create_loader()


def _new_session() -> botocore.session.Session:
    # A fresh session per client (credentials resolved from the environment as it is now),
    # but one loader per process, so the service model JSON is parsed once.
    session = botocore.session.get_session()
    session.register_component("data_loader", _loader())
    return session


def converse_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Turn chat messages into Converse ``messages``: system messages left out (they go
    in ``system``), blank ones dropped, consecutive same-role messages merged, and any
    assistant messages before the first user message dropped (Converse must start with
    the user and alternate)."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system" or not message.content.strip():
            continue
        if not turns and message.role != "user":
            continue
        if turns and turns[-1]["role"] == message.role:
            turns[-1]["content"][0]["text"] += "\n\n" + message.content
        else:
            turns.append({"role": message.role, "content": [{"text": message.content}]})
    return turns
