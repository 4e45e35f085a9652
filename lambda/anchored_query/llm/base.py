"""The one contract every language-model client implements, and helpers they share."""

from __future__ import annotations

import email.utils
import math
import random
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Protocol, Self, runtime_checkable

Role = Literal["system", "user", "assistant"]
ROLES: frozenset[str] = frozenset(("system", "user", "assistant"))


@dataclass(frozen=True)
class ChatMessage:
    """One message of a chat: who says it and what."""

    role: Role
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {sorted(ROLES)}, got {self.role!r}")
        if not isinstance(self.content, str):
            raise TypeError(f"content must be a str, got {type(self.content).__name__}")


@dataclass(frozen=True)
class Completion:
    """What a model answered: the text and what the provider reported about it.

    ``text`` is never empty (reasoning blocks removed). ``input_tokens`` and
    ``output_tokens`` are the provider's usage figures (``None`` when it sent
    none); ``finish_reason`` is the provider's own word for why the reply ended,
    normalised to the OpenAI vocabulary where one exists: "stop", "length"
    (cut at ``max_tokens``), "content_filter", "tool_calls"; ``None`` if unknown.
    """

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None

    @property
    def truncated(self) -> bool:
        """Whether the reply was cut at the token limit."""
        return self.finish_reason == "length"


@runtime_checkable
class LLMClient(Protocol):
    """A language model that completes a chat with text.

    ``complete`` blocks (run it in a thread pool from async code), returns a
    :class:`Completion` (its text never empty) and raises
    :class:`anchored_query.errors.LLMError` on any provider failure, after its
    own retries. ``timeout_s`` limits each attempt; ``None`` means the client's
    default.
    """

    name: str

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Completion:
        """Answer the chat ``messages``."""
        ...


class Closing:
    """A client that holds connections: ``with client:`` closes them at the end."""

    def close(self) -> None:
        """Release the client's connections."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# What a streaming call yields: text deltas as the model writes them, then one Completion.
StreamEvent = str | Completion


@runtime_checkable
class StreamingLLMClient(LLMClient, Protocol):
    """A client that can also hand on the reply as it is written.

    ``stream`` yields the reply's text deltas (raw: reasoning blocks included)
    and, last, the :class:`Completion` that :meth:`complete` would have
    returned for the same reply (reasoning removed, usage, finish reason). It
    raises :class:`~anchored_query.errors.LLMError` like ``complete``, makes no
    retries of its own, and keeps the whole call within ``timeout_s``. Closing
    the iterator early (the reader went away) closes the provider connection.
    """

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Iterator[StreamEvent]:
        """Answer the chat ``messages``, piece by piece."""
        ...


def stream_reply(
    client: LLMClient,
    messages: Sequence[ChatMessage],
    *,
    max_tokens: int = 1024,
    temperature: float = 0.0,
    timeout_s: float | None = None,
) -> Iterator[StreamEvent]:
    """``client.stream(...)``, or for a client without one its whole completion as one
    delta followed by the completion itself."""
    if isinstance(client, StreamingLLMClient):
        yield from client.stream(
            messages, max_tokens=max_tokens, temperature=temperature, timeout_s=timeout_s
        )
        return
    completion = client.complete(
        messages, max_tokens=max_tokens, temperature=temperature, timeout_s=timeout_s
    )
    yield completion.text
    yield completion


def check_request(messages: Sequence[ChatMessage], max_tokens: int, temperature: float) -> None:
    """Raise ValueError for a request no provider would accept (a caller's bug, not an outage)."""
    if not any(m.role == "user" and m.content.strip() for m in messages):
        raise ValueError("messages need at least one non-empty user message")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
    if not (isinstance(temperature, int | float) and 0.0 <= temperature <= 2.0):
        raise ValueError(f"temperature must be between 0 and 2, got {temperature!r}")


# How many bytes a reply of ``max_tokens`` tokens can take on the wire, generously: a token
# is about 4 bytes of English, a CJK character 3 bytes of UTF-8 or 6 as a JSON ``\uXXXX``
# escape (12 for a surrogate pair), and the longest tokens (runs of spaces, ``=====``) are
# some 16 to 32 characters; the envelope holds the rest of the body (JSON fields, usage,
# ids). At the default 600 tokens: 84,736 bytes, against the 4 MB a misbehaving server
# could otherwise send, all of which would then be parsed and checked.
REPLY_BYTES_PER_TOKEN = 32
REPLY_ENVELOPE_BYTES = 64 * 1024


def reply_byte_bound(max_tokens: int) -> int:
    """The most bytes a reply of at most ``max_tokens`` tokens is read to; a longer one
    is cut there and refused (``malformed``): no model keeps to ``max_tokens`` that way."""
    return REPLY_ENVELOPE_BYTES + REPLY_BYTES_PER_TOKEN * max(1, max_tokens)


def check_timeout(timeout_s: float, what: str = "timeout_s") -> float:
    """Return ``timeout_s`` as a float after checking it is a positive, finite number."""
    value = float(timeout_s)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} must be a positive number of seconds, got {timeout_s!r}")
    return value


def usage_int(value: object) -> int | None:
    """A token count from a provider's usage object, or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


# Reasoning blocks that models served by Ollama / vLLM / llama.cpp / gpt-oss put in
# the text: <think>…</think>, <thinking>…</thinking>, <reasoning>…</reasoning> and the
# harmony format's <|channel|>analysis<|message|>…<|end|>.
_REASONING_BLOCK = re.compile(
    r"<(think|thinking|reasoning)>.*?</\1>"
    r"|<\|channel\|>\s*(?:analysis|commentary)\b.*?(?:<\|end\|>|(?=<\|channel\|>))",
    re.DOTALL | re.IGNORECASE,
)
# A closing tag with no opening one: the chat template pre-filled "<think>".
_PREFILLED_CLOSE = re.compile(r"^.*?</(think|thinking|reasoning)>", re.DOTALL | re.IGNORECASE)
_UNCLOSED_OPEN = re.compile(
    r"<(think|thinking|reasoning)>|<\|channel\|>\s*(?:analysis|commentary)\b", re.IGNORECASE
)
_HARMONY_FINAL = re.compile(r"<\|channel\|>\s*final\s*<\|message\|>", re.IGNORECASE)
_HARMONY_TOKEN = re.compile(r"<\|(?:start|end|return|message|channel|constrain)\|>")


class UnclosedReasoning(ValueError):
    """The reply opens a reasoning block and never closes it (cut at the token limit)."""


def strip_reasoning(text: str) -> str:
    """The reply without its reasoning blocks, wherever they appear.

    Removes every closed ``<think>``/``<thinking>``/``<reasoning>`` block and
    harmony ``analysis``/``commentary`` channels, a leading run that ends in a
    closing tag (a template that pre-filled ``<think>``), and the harmony
    tokens around a ``final`` channel. Raises :class:`UnclosedReasoning` when a
    block is opened and never closed: what follows the opening is reasoning, and
    there is no answer to show.
    """
    text = _PREFILLED_CLOSE.sub("", text, count=1) if _starts_inside(text) else text
    text = _REASONING_BLOCK.sub("", text)
    if _UNCLOSED_OPEN.search(text):
        raise UnclosedReasoning("a reasoning block is never closed")
    final = _HARMONY_FINAL.search(text)
    if final is not None:
        text = text[final.end() :]
    return _HARMONY_TOKEN.sub("", text)


def _starts_inside(text: str) -> bool:
    """Whether a closing reasoning tag comes before any opening one."""
    close = re.search(r"</(think|thinking|reasoning)>", text, re.IGNORECASE)
    if close is None:
        return False
    opened = re.search(r"<(think|thinking|reasoning)>", text[: close.start()], re.IGNORECASE)
    return opened is None


def retry_after_s(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be seconds or an HTTP date; anything unreadable is ``None``.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        value = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, value)
    return value if math.isfinite(value) and value >= 0 else None


def backoff_s(attempt: int, base_s: float) -> float:
    """Jittered exponential back-off before retry number ``attempt`` (1-based)."""
    if base_s <= 0:
        return 0.0
    return base_s * (2.0 ** (attempt - 1)) * (0.5 + random.random() / 2)
