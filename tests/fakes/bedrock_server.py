"""A fake Amazon Bedrock Runtime: ``POST /model/{modelId}/converse`` (rest-json) and
``/converse-stream`` (the reply as AWS event-stream messages, paced by the server's
:class:`~fakes.StreamRate`: messageStart, contentBlockDelta per piece, contentBlockStop,
messageStop, metadata).

Point boto3 at ``srv.url`` (``endpoint_url``) with any credentials, e.g.
``monkeypatch.setenv`` each of :meth:`FakeBedrockServer.aws_env`; SigV4 is
recorded (redacted), not checked. Requests are validated like Converse does
(user first, roles alternate, non-empty text blocks, inferenceConfig keys): a
broken one gets a ``ValidationException`` and is still recorded.
"""

from __future__ import annotations

import binascii
import contextlib
import json
import re
import socket
import struct
import uuid
from typing import Any, ClassVar
from urllib.parse import unquote

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
    json_body,
    stream_pieces,
)

_CONVERSE_PATH = re.compile(r"^/model/(?P<model>[^/]+)/converse(?P<stream>-stream)?$")
_SIGV4_KEY_ID = re.compile(r"Credential=([^/,\s]+)/")
_INFERENCE_KEYS = {"maxTokens", "temperature", "topP", "stopSequences"}
_ERROR_TYPES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


class FakeBedrockServer(FakeServer):
    """Speaks the Bedrock Runtime Converse API; ``url`` is the boto3 ``endpoint_url``."""

    access_key_id: ClassVar[str] = "AKIAFAKEFAKEFAKE0000"

    @property
    def url(self) -> str:
        """The endpoint URL (``http://127.0.0.1:<port>``)."""
        return self.root

    @classmethod
    def aws_env(cls, region: str = "us-east-1") -> dict[str, str]:
        """Environment variables that give boto3 fake credentials and a region."""
        return {
            "AWS_ACCESS_KEY_ID": cls.access_key_id,
            "AWS_SECRET_ACCESS_KEY": "fake-secret-key",
            "AWS_SESSION_TOKEN": "fake-session-token",
            "AWS_DEFAULT_REGION": region,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": "/nonexistent/anchored-fake-aws-config",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/anchored-fake-aws-credentials",
        }

    def parse(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> RecordedRequest:
        """Record the conversation in the normalised shape."""
        body = json_body(raw)
        data = body if isinstance(body, dict) else {}
        route = _CONVERSE_PATH.match(path.split("?", 1)[0])
        messages: list[dict[str, str]] = []
        system = data.get("system")
        if isinstance(system, list):
            text = "".join(b["text"] for b in system if _is_text_block(b))
            if text:
                messages.append({"role": "system", "content": text})
        for m in data.get("messages") or []:
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                text = "".join(b["text"] for b in m["content"] if _is_text_block(b))
                messages.append({"role": str(m.get("role")), "content": text})
        config = data.get("inferenceConfig")
        config = config if isinstance(config, dict) else {}
        max_tokens, temperature = config.get("maxTokens"), config.get("temperature")
        key_id = _SIGV4_KEY_ID.search(headers.get("authorization", ""))
        return self.record(
            method,
            path.split("?", 1)[0],
            headers,
            raw,
            model=unquote(route.group("model")) if route else "",
            messages=messages,
            max_tokens=max_tokens if isinstance(max_tokens, int) else None,
            temperature=float(temperature) if isinstance(temperature, int | float) else None,
            body=body,
            credential=key_id.group(1) if key_id else None,
        )

    def validate(self, request: RecordedRequest) -> Status | None:
        """What Converse rejects, with the error type it uses."""
        if request.method != "POST" or not _CONVERSE_PATH.match(request.path):
            return Status(
                404,
                f"no route {request.method} {request.path}",
                error_type="UnknownOperationException",
            )
        if "authorization" not in request.headers:
            return Status(
                403,
                "Missing Authentication Token",
                error_type="MissingAuthenticationTokenException",
            )
        body = request.body
        if not isinstance(body, dict):
            return Status(400, "Malformed input request, please reformat your input and try again.")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return Status(400, "A conversation must start with a user message.")
        expected = "user"
        for m in messages:
            if not isinstance(m, dict) or m.get("role") != expected:
                return Status(
                    400,
                    "A conversation must start with a user message and alternate "
                    "between user and assistant roles.",
                )
            content = m.get("content")
            if not isinstance(content, list) or not content:
                return Status(400, "The content field in the Message object is empty.")
            if not all(_is_text_block(b) and b["text"] for b in content):
                return Status(400, "The text field in the ContentBlock object is blank.")
            expected = "assistant" if expected == "user" else "user"
        system = body.get("system", [])
        if not isinstance(system, list) or not all(_is_text_block(b) for b in system):
            return Status(400, "system must be a list of {text} blocks")
        config = body.get("inferenceConfig", {})
        if not isinstance(config, dict) or set(config) - _INFERENCE_KEYS:
            return Status(400, f"inferenceConfig may only hold {sorted(_INFERENCE_KEYS)}")
        max_tokens = config.get("maxTokens", 1)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return Status(400, "maxTokens must be at least 1")
        temperature = config.get("temperature", 0)
        if not isinstance(temperature, int | float) or not 0 <= temperature <= 1:
            return Status(400, "temperature must be between 0 and 1")
        return None

    def respond(self, handler: _Handler, request: RecordedRequest, behaviour: Behaviour) -> None:
        """Write the Converse response for ``behaviour``."""
        headers = {"x-amzn-RequestId": str(uuid.uuid4())}
        route = _CONVERSE_PATH.match(request.path)
        if route and route.group("stream") and isinstance(behaviour, Reply | Partial):
            self._stream(handler, request, behaviour, headers)
        elif isinstance(behaviour, Partial):
            handler.close_connection = True
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)
        elif isinstance(behaviour, Status):
            error_type = behaviour.error_type or _ERROR_TYPES.get(
                behaviour.code, "InternalServerException"
            )
            headers["x-amzn-ErrorType"] = error_type
            if behaviour.retry_after is not None:
                headers["Retry-After"] = f"{behaviour.retry_after:g}"
                headers["x-amz-retry-after"] = str(int(behaviour.retry_after * 1000))
            handler.send_body(behaviour.code, _dump({"message": behaviour.message}), headers)
        elif isinstance(behaviour, Malformed):
            handler.send_body(200, behaviour.body.encode(), headers)
        elif isinstance(behaviour, Empty):
            handler.send_body(200, _dump(_converse(request, [], "end_turn")), headers)
        elif isinstance(behaviour, Refuse):
            body = _converse(request, [{"text": behaviour.text}], "guardrail_intervened")
            handler.send_body(200, _dump(body), headers)
        elif isinstance(behaviour, Reply):
            blocks = [{"text": behaviour.render(request)}]
            stop = _STOP_REASONS.get(behaviour.finish_reason, behaviour.finish_reason)
            body = _converse(request, blocks, stop)
            if behaviour.usage is not None:
                inputs, outputs = behaviour.usage
                body["usage"] = {
                    "inputTokens": inputs,
                    "outputTokens": outputs,
                    "totalTokens": inputs + outputs,
                }
            handler.send_body(200, _dump(body), headers)
        else:  # pragma: no cover - Sleep and Disconnect are handled by the base
            raise TypeError(f"unexpected behaviour {behaviour!r}")

    def _stream(
        self,
        handler: _Handler,
        request: RecordedRequest,
        behaviour: Reply | Partial,
        headers: dict[str, str],
    ) -> None:
        handler.send_response(200)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Type", "application/vnd.amazon.eventstream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        out = ChunkedWriter(self, handler, request)
        if not out.write(event_message("messageStart", {"role": "assistant"})):
            return
        pieces = stream_pieces(behaviour.render(request))
        if isinstance(behaviour, Partial):
            pieces = pieces[: behaviour.tokens]
        for piece in pieces:
            delta = {"contentBlockIndex": 0, "delta": {"text": piece}}
            if not out.pace() or not out.write(event_message("contentBlockDelta", delta)):
                return
        if isinstance(behaviour, Partial):
            if behaviour.then == "hang":
                self._wait(handler, request, float("inf"))
            handler.close_connection = True
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)
            return
        stop = _STOP_REASONS.get(behaviour.finish_reason, behaviour.finish_reason)
        inputs, outputs = behaviour.usage or (len(request.prompt.split()), len(pieces))
        for name, payload in (
            ("contentBlockStop", {"contentBlockIndex": 0}),
            ("messageStop", {"stopReason": stop}),
            (
                "metadata",
                {
                    "usage": {
                        "inputTokens": inputs,
                        "outputTokens": outputs,
                        "totalTokens": inputs + outputs,
                    },
                    "metrics": {"latencyMs": 1},
                },
            ),
        ):
            if not out.write(event_message(name, payload)):
                return
        out.end()


def event_message(event_type: str, payload: dict[str, Any]) -> bytes:
    """One AWS event-stream message: prelude (total and headers length, CRC32), string
    headers (``:event-type``, ``:content-type``, ``:message-type``), JSON payload, CRC32."""
    fields = {":event-type": event_type, ":content-type": "application/json"}
    fields[":message-type"] = "event"
    header_bytes = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v)) + v.encode()
        for k, v in fields.items()
    )
    body = json.dumps(payload).encode()
    prelude = struct.pack(">II", 12 + len(header_bytes) + len(body) + 4, len(header_bytes))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + header_bytes + body
    return message + struct.pack(">I", binascii.crc32(message))


# Reply.finish_reason (OpenAI words) as Converse stopReason.
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}


def _is_text_block(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("text"), str)


def _converse(request: RecordedRequest, content: list[dict[str, str]], stop: str) -> dict[str, Any]:
    input_tokens = len(request.prompt.split())
    output_tokens = sum(len(b["text"].split()) for b in content)
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "totalTokens": input_tokens + output_tokens,
        },
        "metrics": {"latencyMs": 1},
    }


def _dump(data: Any) -> bytes:
    return json.dumps(data).encode()
