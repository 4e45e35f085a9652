"""Client for any OpenAI-compatible chat completions endpoint.

One request shape covers OpenAI, vLLM, Ollama (``http://host:11434/v1``) and
the llama.cpp server: ``POST {base_url}/chat/completions`` with ``model``,
``messages``, ``max_tokens`` and ``temperature``; the answer is
``choices[0].message.content``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import ssl
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from anchored_query.errors import LLMError, LLMErrorCategory, redact
from anchored_query.llm.base import (
    ChatMessage,
    Closing,
    Completion,
    StreamEvent,
    UnclosedReasoning,
    backoff_s,
    check_request,
    check_timeout,
    reply_byte_bound,
    retry_after_s,
    strip_reasoning,
    usage_int,
)
from anchored_query.llm.deadline import AttemptDeadline, socket_of

logger = logging.getLogger(__name__)

_RETRYABLE: frozenset[LLMErrorCategory] = frozenset(
    ("timeout", "connection", "http_5xx", "rate_limited")
)


class _RetryableFailure(Exception):
    """One attempt failed in a way another attempt may fix."""

    def __init__(self, error: LLMError, wait_s: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.wait_s = wait_s


class OpenAICompatClient(Closing):
    """Chat completions over HTTP, with one retry on a transient failure by default.

    ``api_key`` may be empty (Ollama, llama.cpp): then no ``Authorization``
    header is sent. The key is never logged and never put in an error.

    Each attempt ends within ``timeout_s`` whatever the server does (headers then
    a stalled body, a trickle: :mod:`.deadline`); on a timeout, connection error,
    5xx or 429 the request is tried again up to ``max_retries`` times, waiting
    the server's ``Retry-After`` when it is at most ``max_retry_after_s`` (a
    longer one fails at once: waiting would outlast the caller), else a short
    jittered back-off.
    Worst case ≈ ``(max_retries + 1) * timeout_s`` plus the waits.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        timeout_s: float = 30.0,
        max_retries: int = 1,
        *,
        connect_timeout_s: float = 5.0,
        max_retry_after_s: float = 2.0,
        backoff_base_s: float = 0.25,
        token_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        max_response_bytes: int = 4_000_000,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("base_url must be an http(s) URL, e.g. https://api.openai.com/v1")
        if not model.strip():
            raise ValueError("model must name the model to call, e.g. gpt-4o-mini")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        self.name = f"openai:{model}"
        self.model = model
        self.url = base_url.strip().rstrip("/") + "/chat/completions"
        self.timeout_s = check_timeout(timeout_s)
        self.connect_timeout_s = check_timeout(connect_timeout_s, "connect_timeout_s")
        self.max_retries = int(max_retries)
        self.max_retry_after_s = max_retry_after_s
        self.backoff_base_s = backoff_base_s
        self.token_param = token_param
        self.max_response_bytes = max_response_bytes
        self._api_key = api_key
        self._headers = {"Accept": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(follow_redirects=False, verify=_ssl_context())

    def __repr__(self) -> str:
        return f"OpenAICompatClient(name={self.name!r})"

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Completion:
        """Send the chat and return the answer; raise LLMError when the provider fails."""
        body = self._body(messages, max_tokens, temperature, stream=False)
        per_attempt_s = self.timeout_s if timeout_s is None else check_timeout(timeout_s)
        limit = self.reply_limit(max_tokens)
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return self._attempt(body, per_attempt_s, limit)
            except _RetryableFailure as failure:
                error, wait = failure.error, failure.wait_s
                if attempt == attempts:
                    raise error from None
                if wait is not None and wait > self.max_retry_after_s:
                    logger.warning(
                        "%s: %s; server asks to wait %.1fs, more than %.1fs: not retrying",
                        self.name,
                        error.category,
                        wait,
                        self.max_retry_after_s,
                    )
                    raise error from None
                delay = backoff_s(attempt, self.backoff_base_s) if wait is None else wait
                logger.warning(
                    "%s: attempt %d/%d failed (%s: %s); retrying in %.2fs",
                    self.name,
                    attempt,
                    attempts,
                    error.category,
                    error.detail,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(
        self, category: LLMErrorCategory, detail: str, status: int | None = None
    ) -> LLMError:
        return LLMError(category, redact(detail, self._api_key), provider=self.name, status=status)

    def reply_limit(self, max_tokens: int) -> int:
        """The most bytes of a reply read for ``max_tokens`` (:func:`.base.reply_byte_bound`),
        never more than ``max_response_bytes``."""
        return min(self.max_response_bytes, reply_byte_bound(max_tokens))

    def _attempt(self, body: dict[str, Any], timeout_s: float, limit: int) -> Completion:
        with AttemptDeadline(timeout_s) as deadline:
            try:
                with self._post(body, self._headers, deadline) as response:
                    raw = self._read_body(response, limit)
                    status, headers = response.status_code, response.headers
            except (httpx.TransportError, httpx.DecodingError) as exc:
                failure = self._transport_failure(exc, deadline)
                if failure.category == "malformed":
                    raise failure from None
                raise _RetryableFailure(failure) from None
        if 200 <= status < 300:
            return self._parse(raw, status)
        raise self._status_failure(status, headers, raw)

    @contextlib.contextmanager
    def _post(
        self, body: dict[str, Any], headers: Mapping[str, str], deadline: AttemptDeadline
    ) -> Iterator[httpx.Response]:
        """POST ``body`` and hand on the response once its headers are in, all of it held
        to ``deadline`` (:mod:`.deadline`): each wait bounded by the time left, and the
        connection shut down when the deadline passes."""
        request = self._http.build_request("POST", self.url, json=body, headers=headers)
        request.extensions["timeout"] = deadline.httpx_timeouts(self.connect_timeout_s)
        response = self._http.send(request, stream=True)
        try:
            deadline.guard(socket_of(response))
            yield response
        finally:
            deadline.release()  # before the connection goes back to the pool
            response.close()

    def _transport_failure(
        self, exc: httpx.TransportError | httpx.DecodingError, deadline: AttemptDeadline
    ) -> LLMError:
        """The LLMError an httpx failure of one attempt stands for: any failure once the
        deadline has shut the connection down is a timeout."""
        if deadline.fired or isinstance(exc, httpx.TimeoutException):
            detail = f"no answer within {deadline.seconds:g}s ({type(exc).__name__})"
            return self._error("timeout", detail)
        if isinstance(exc, httpx.DecodingError):
            return self._error("malformed", f"undecodable body: {type(exc).__name__}")
        return self._error("connection", f"{type(exc).__name__}: {exc}")

    def _status_failure(
        self, status: int, headers: Mapping[str, str], raw: bytes
    ) -> _RetryableFailure | LLMError:
        """The failure an error status stands for (retryable ones wrapped)."""
        detail = _error_detail(raw)
        if status == 429:
            wait = retry_after_s(headers)
            return _RetryableFailure(self._error("rate_limited", detail, status), wait)
        if status >= 500:
            wait = retry_after_s(headers) if status == 503 else None
            return _RetryableFailure(self._error("http_5xx", detail, status), wait)
        if status == 408:
            return _RetryableFailure(self._error("timeout", detail, status))
        if status in (401, 403):
            return self._error("auth", detail, status)
        if 400 <= status < 500:
            return self._error("bad_request", detail, status)
        return self._error("unexpected", detail, status)

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Iterator[StreamEvent]:
        """The reply as it is written (``stream: true``; :mod:`.streaming`), then its
        Completion; one attempt, all of it within ``timeout_s``."""
        body = self._body(messages, max_tokens, temperature, stream=True)
        total_s = self.timeout_s if timeout_s is None else check_timeout(timeout_s)
        return stream_chat(self, body, total_s)

    def _body(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float, *, stream: bool
    ) -> dict[str, Any]:
        """The chat completions request (streamed: with the usage at the end)."""
        check_request(messages, max_tokens, temperature)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            self.token_param: max_tokens,
            "temperature": temperature,
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def _read_body(self, response: httpx.Response, limit: int) -> bytes:
        """The whole body, at most ``limit`` bytes of it: reading stops there, and the
        connection is closed (a body that stalls or trickles is cut off by the attempt's
        deadline, :meth:`_post`)."""
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise self._error("malformed", f"response larger than {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _parse(self, raw: bytes, status: int) -> Completion:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise self._error("malformed", "response is not JSON", status) from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._error("malformed", "response has no choices[0]", status)
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise self._error("malformed", "choices[0] has no message", status)
        finish = choice.get("finish_reason")
        refusal = message.get("refusal")
        if (isinstance(refusal, str) and refusal.strip()) or finish == "content_filter":
            raise self._error("refused", f"finish_reason={finish!r}", status)
        if "content" not in message:
            raise self._error("malformed", "choices[0].message has no content", status)
        content = message["content"]
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
            texts = [p.get("text") for p in content if isinstance(p, dict)]
            if not all(isinstance(t, str) for t in texts):
                raise self._error("malformed", "content part without text", status)
            content = "".join(t for t in texts if isinstance(t, str))
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise self._error("malformed", f"content is a {type(content).__name__}", status)
        text = self._reply_text(content, finish, status)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Completion(
            text=text,
            input_tokens=usage_int(usage.get("prompt_tokens")),
            output_tokens=usage_int(usage.get("completion_tokens")),
            finish_reason=finish if isinstance(finish, str) else None,
        )

    def _reply_text(self, content: str, finish: object, status: int | None) -> str:
        """The reply without its reasoning blocks; LLMError when nothing else is left."""
        try:
            text = strip_reasoning(content).strip()
        except UnclosedReasoning:
            raise self._error(
                "truncated", f"reasoning block never closed (finish_reason={finish!r})", status
            ) from None
        if not text:
            raise self._error("empty", f"no text (finish_reason={finish!r})", status)
        return text


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle takes ~0.1 s; every client in the process shares one context.
    return httpx.create_ssl_context()


def _error_detail(raw: bytes) -> str:
    """A short description of an error body: OpenAI's ``error.{type,code,message}``,
    Ollama's ``{"error": "..."}``, or the start of the text."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return raw[:200].decode("utf-8", "replace")
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        parts = [str(error.get(k)) for k in ("type", "code", "message") if error.get(k)]
        return " / ".join(parts)[:300]
    if isinstance(error, str):
        return error[:300]
    return json.dumps(data)[:200]


# -- streaming ---------------------------------------------------------------
# Streamed chat completions (``"stream": true``) for the client above.
#
# The server answers with Server-Sent Events: one ``data: {chunk}`` per piece,
# ``choices[0].delta.content`` holding the text, the last choice chunk naming the
# ``finish_reason``, a usage chunk (``choices: []``, asked for with
# ``stream_options.include_usage``; llama.cpp and Ollama put ``usage`` in the
# last choice chunk instead) and ``data: [DONE]``.
#
# The whole call is held to its ``timeout_s`` (:mod:`.deadline`): each wait is
# bounded by the time left and the socket is shut down when the time is up, so a
# model that stalls before the first event or between two, or trickles, cannot
# outlive the request. Closing the iterator early closes the response, and with
# it the connection.


def stream_chat(
    client: OpenAICompatClient, body: dict[str, Any], timeout_s: float
) -> Iterator[StreamEvent]:
    """POST ``body`` and yield the text deltas, then the :class:`Completion`."""
    headers = {**client._headers, "Accept": "text/event-stream"}
    max_tokens = int(body[client.token_param])
    with AttemptDeadline(timeout_s) as deadline:
        try:
            with client._post(body, headers, deadline) as response:
                status = response.status_code
                if not 200 <= status < 300:
                    raw = client._read_body(response, client.reply_limit(max_tokens))
                    failure = client._status_failure(status, response.headers, raw)
                    raise failure if isinstance(failure, LLMError) else failure.error
                yield from _events(client, response, status, deadline, max_tokens)
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise client._transport_failure(exc, deadline) from None
        except LLMError as exc:
            # Once the watchdog shut the stream, it ends early or cut off mid-event: a
            # "connection" or "malformed" failure, but for want of time.
            if deadline.fired and exc.category != "timeout":
                detail = f"reply not complete within {timeout_s:g}s"
                raise client._error("timeout", detail) from None
            raise


def _events(
    client: OpenAICompatClient,
    response: httpx.Response,
    status: int,
    deadline: AttemptDeadline | None = None,
    max_tokens: int = 1024,
) -> Iterator[StreamEvent]:
    parts: list[str] = []
    finish: str | None = None
    usage: dict[str, Any] = {}
    size = 0
    # The text is held to what max_tokens allows; the events around it (about 200 bytes a
    # token in OpenAI's framing) only to max_response_bytes.
    text_limit = client.reply_limit(max_tokens)
    text_size = 0
    done = False
    for data in _sse_data(response):
        size += len(data)
        if size > client.max_response_bytes:
            raise client._error(
                "malformed", f"response larger than {client.max_response_bytes} bytes", status
            )
        if data.strip() == "[DONE]":
            done = True
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            raise client._error("malformed", "a stream event is not JSON", status) from None
        if not isinstance(chunk, dict):
            raise client._error("malformed", "a stream event is not an object", status)
        if isinstance(chunk.get("error"), dict | str):
            raise client._error("model_error", f"error in the stream: {chunk['error']}", status)
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            continue
        choice = choices[0] if isinstance(choices[0], dict) else {}
        raw_delta = choice.get("delta")
        delta: dict[str, Any] = raw_delta if isinstance(raw_delta, dict) else {}
        refusal = delta.get("refusal")
        if (isinstance(refusal, str) and refusal.strip()) or (
            choice.get("finish_reason") == "content_filter"
        ):
            raise client._error("refused", "finish_reason='content_filter'", status)
        content = delta.get("content")
        if isinstance(content, str) and content:
            text_size += len(content.encode("utf-8", "replace"))
            if text_size > text_limit:
                raise client._error(
                    "malformed", f"reply larger than {text_limit} bytes for {max_tokens} tokens"
                )
            parts.append(content)
            yield content
        if isinstance(choice.get("finish_reason"), str):
            finish = choice["finish_reason"]
    if not done and finish is None:
        raise client._error("connection", "the stream ended before the reply was complete")
    if deadline is not None:
        # The reply is in: a stream that ended at EOF (no [DONE]) has put its connection
        # back in the pool, where the watchdog must not shut it while the caller holds
        # the Completion.
        deadline.release()
    yield Completion(
        text=client._reply_text("".join(parts), finish, status),
        input_tokens=usage_int(usage.get("prompt_tokens")),
        output_tokens=usage_int(usage.get("completion_tokens")),
        finish_reason=finish,
    )


def _sse_data(response: httpx.Response) -> Iterator[str]:
    """The ``data`` of each event (its ``data:`` lines joined by newlines); comments
    (``: keep-alive``) and other fields are skipped."""
    lines: list[str] = []
    for line in response.iter_lines():
        if not line:
            if lines:
                yield "\n".join(lines)
                lines = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            lines.append(value[1:] if value.startswith(" ") else value)
    if lines:
        yield "\n".join(lines)
