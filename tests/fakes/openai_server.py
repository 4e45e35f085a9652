"""A fake OpenAI-compatible server: ``POST /v1/chat/completions``, buffered or
streamed (``"stream": true``: Server-Sent Events of ``chat.completion.chunk``
objects at the server's :class:`~fakes.StreamRate`, the usage chunk when
``stream_options.include_usage`` asks for it, then ``data: [DONE]``).

Requests are checked like a real server would (JSON, ``model``, ``messages``
with known roles): a broken one gets a 400 in OpenAI's error shape and is
still recorded.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import time
from typing import Any

from . import (
    Behaviour,
    ChunkedWriter,
    Empty,
    FakeServer,
    Malformed,
    Partial,
    RecordedRequest,
    Refuse,
    Reply,
    Status,
    _Handler,
    iter_text,
    json_body,
    stream_pieces,
)

_ROLES = {"system", "developer", "user", "assistant", "tool"}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}


class FakeOpenAIServer(FakeServer):
    """Speaks OpenAI chat completions; ``url`` is the ``base_url`` to give a client.

    >>> with FakeOpenAIServer() as srv:                       # doctest: +SKIP
    ...     srv.script(Reply("Hi [1]."), Status(503), Sleep(2, Reply("late")))
    ...     OpenAICompatClient(srv.url, "sk-x", "m").complete(msgs)
    """

    path = "/v1/chat/completions"
    _ids = itertools.count(1)

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:<port>/v1``)."""
        return f"{self.root}/v1"

    def parse(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> RecordedRequest:
        """Record the chat in the normalised shape."""
        body = json_body(raw)
        data = body if isinstance(body, dict) else {}
        messages: list[dict[str, str]] = []
        for m in data.get("messages") or []:
            if isinstance(m, dict):
                role = "system" if m.get("role") == "developer" else str(m.get("role"))
                messages.append({"role": role, "content": "".join(iter_text(m.get("content")))})
        auth = headers.get("authorization", "")
        credential = auth[7:] if auth.lower().startswith("bearer ") else (auth or None)
        max_tokens = data.get("max_tokens", data.get("max_completion_tokens"))
        temperature = data.get("temperature")
        return self.record(
            method,
            path.split("?", 1)[0],
            headers,
            raw,
            model=str(data.get("model", "")),
            messages=messages,
            max_tokens=max_tokens if isinstance(max_tokens, int) else None,
            temperature=float(temperature) if isinstance(temperature, int | float) else None,
            body=body,
            credential=credential,
        )

    def validate(self, request: RecordedRequest) -> Status | None:
        """400/404 for what a real server rejects."""
        if request.method != "POST" or request.path != self.path:
            return Status(404, f"Unknown request URL: {request.method} {request.path}")
        body = request.body
        if not isinstance(body, dict):
            return Status(400, "We could not parse the JSON body of your request.")
        if not isinstance(body.get("model"), str) or not body["model"]:
            return Status(400, "you must provide a model parameter")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return Status(400, "'messages' must be a non-empty array")
        for m in messages:
            if not isinstance(m, dict) or m.get("role") not in _ROLES:
                return Status(400, "Invalid value for 'messages[].role'")
            if not isinstance(m.get("content"), str | list):
                return Status(400, "Invalid type for 'messages[].content'")
        if "stream" in body and not isinstance(body["stream"], bool):
            return Status(400, "Invalid type for 'stream'")
        return None

    def respond(self, handler: _Handler, request: RecordedRequest, behaviour: Behaviour) -> None:
        """Write the OpenAI response for ``behaviour``."""
        streaming = isinstance(request.body, dict) and request.body.get("stream") is True
        if streaming and isinstance(behaviour, Reply | Partial | Empty | Refuse):
            self._stream(handler, request, behaviour)
        elif isinstance(behaviour, Partial):
            handler.close_connection = True
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)
        elif isinstance(behaviour, Status):
            headers = {}
            if behaviour.retry_after is not None:
                headers["Retry-After"] = f"{behaviour.retry_after:g}"
            kind = behaviour.error_type or _ERROR_TYPES.get(behaviour.code, "server_error")
            error = {"message": behaviour.message, "type": kind, "param": None, "code": None}
            handler.send_body(behaviour.code, _dump({"error": error}), headers)
        elif isinstance(behaviour, Malformed):
            handler.send_body(200, behaviour.body.encode())
        elif isinstance(behaviour, Empty):
            handler.send_body(200, _dump(self._completion(request, "")))
        elif isinstance(behaviour, Refuse):
            body = self._completion(request, None, finish_reason="content_filter")
            body["choices"][0]["message"]["refusal"] = behaviour.text
            handler.send_body(200, _dump(body))
        elif isinstance(behaviour, Reply):
            # A model takes as long to write a reply it sends whole (the server's rate).
            text = behaviour.render(request)
            rate = self.rate
            if rate.buffered and (rate.first_token_s or rate.tokens_per_s):
                pieces = len(stream_pieces(text))
                writing = pieces / rate.tokens_per_s if rate.tokens_per_s else 0.0
                if not self._wait(handler, request, rate.first_token_s + writing):
                    return
            body = self._completion(request, text, finish_reason=behaviour.finish_reason)
            if behaviour.usage is not None:
                prompt_tokens, completion_tokens = behaviour.usage
                body["usage"] = {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                }
            handler.send_body(200, _dump(body))
        else:  # pragma: no cover - Sleep and Disconnect are handled by the base
            raise TypeError(f"unexpected behaviour {behaviour!r}")

    def _stream(
        self,
        handler: _Handler,
        request: RecordedRequest,
        behaviour: Reply | Partial | Empty | Refuse,
    ) -> None:
        """Server-Sent Events: a role chunk, content chunks paced by ``self.rate``, the
        finish chunk, the usage chunk (when asked for) and ``[DONE]``."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        out = ChunkedWriter(self, handler, request)
        base = {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": request.model,
        }

        def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return b"data: " + _dump({**base, "choices": [choice]}) + b"\n\n"

        if not out.write(event({"role": "assistant", "content": ""})):
            return
        text = behaviour.render(request) if isinstance(behaviour, Reply | Partial) else ""
        pieces = stream_pieces(text)
        if isinstance(behaviour, Partial):
            pieces = pieces[: behaviour.tokens]
        for piece in pieces:
            if not out.pace() or not out.write(event({"content": piece})):
                return
        if isinstance(behaviour, Partial):
            if behaviour.then == "hang":
                self._wait(handler, request, float("inf"))
            handler.close_connection = True
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if isinstance(behaviour, Refuse):
            out.write(event({"refusal": behaviour.text}, "content_filter"))
        else:
            finish = behaviour.finish_reason if isinstance(behaviour, Reply) else "stop"
            if not out.write(event({}, finish)):
                return
        options = request.body.get("stream_options") if isinstance(request.body, dict) else None
        if isinstance(options, dict) and options.get("include_usage"):
            prompt_tokens = len(request.prompt.split())
            completion_tokens = len(pieces)
            if isinstance(behaviour, Reply) and behaviour.usage is not None:
                prompt_tokens, completion_tokens = behaviour.usage
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
            out.write(b"data: " + _dump({**base, "choices": [], "usage": usage}) + b"\n\n")
        out.write(b"data: [DONE]\n\n")
        out.end()

    def _completion(
        self, request: RecordedRequest, text: str | None, finish_reason: str = "stop"
    ) -> dict[str, Any]:
        prompt_tokens = len(request.prompt.split())
        completion_tokens = len((text or "").split())
        return {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _dump(data: Any) -> bytes:
    return json.dumps(data).encode()
