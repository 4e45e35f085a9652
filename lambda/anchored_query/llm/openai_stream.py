"""Streamed chat completions (``"stream": true``) for :class:`.OpenAICompatClient`.

The server answers with Server-Sent Events: one ``data: {chunk}`` per piece,
``choices[0].delta.content`` holding the text, the last choice chunk naming the
``finish_reason``, a usage chunk (``choices: []``, asked for with
``stream_options.include_usage``; llama.cpp and Ollama put ``usage`` in the
last choice chunk instead) and ``data: [DONE]``.

The whole call is held to its ``timeout_s`` (:mod:`.deadline`): each wait is
bounded by the time left and the socket is shut down when the time is up, so a
model that stalls before the first event or between two, or trickles, cannot
outlive the request. Closing the iterator early closes the response, and with
it the connection.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx

from anchored_query.errors import LLMError
from anchored_query.llm.base import (
    Completion,
    StreamEvent,
    usage_int,
)
from anchored_query.llm.deadline import AttemptDeadline

if TYPE_CHECKING:
    from anchored_query.llm.openai_compat import OpenAICompatClient


def stream_chat(
    client: OpenAICompatClient, body: dict[str, Any], timeout_s: float
) -> Iterator[StreamEvent]:
    """POST ``body`` and yield the text deltas, then the :class:`Completion`."""
    headers = {**client._headers, "Accept": "text/event-stream"}
    with AttemptDeadline(timeout_s) as deadline:
        try:
            with client._post(body, headers, deadline) as response:
                status = response.status_code
                if not 200 <= status < 300:
                    raw = client._read_body(response)
                    failure = client._status_failure(status, response.headers, raw)
                    raise failure if isinstance(failure, LLMError) else failure.error
                yield from _events(client, response, status, deadline)
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
) -> Iterator[StreamEvent]:
    parts: list[str] = []
    finish: str | None = None
    usage: dict[str, Any] = {}
    size = 0
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
