"""The errors the query function raises on purpose.

``QueryError`` is what the HTTP API answers with (status + code + a message the
user may read). ``LLMError`` is a provider failure: its text is for logs only,
never for the client, and never holds a credential.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

LLMErrorCategory = Literal[
    "timeout",  # no answer within the per-attempt time limit
    "connection",  # could not connect, or the connection dropped mid-answer
    "rate_limited",  # 429 / throttled, still after the retries (or Retry-After too long)
    "http_5xx",  # the provider failed (5xx), still after the retries
    "auth",  # credentials missing, wrong or not allowed (401/403)
    "bad_request",  # the provider rejected the request (other 4xx: model name, too long, ...)
    "model_error",  # the model itself failed (Bedrock ModelErrorException)
    "malformed",  # the answer is not the wire format (bad JSON, missing fields, too large)
    "empty",  # a well-formed answer with no text in it
    "refused",  # the model or a content filter / guardrail declined to answer
    "truncated",  # the reply was cut at the token limit, or a reasoning block never closed
    "budget",  # the owner's spend cap is reached (no call was made)
    "unexpected",  # anything else the SDK raised
]
LLM_ERROR_CATEGORIES: frozenset[str] = frozenset(get_args(LLMErrorCategory))

_DETAIL_MAX_CHARS = 300
_SECRET_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[^\s,;\"']+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}"),
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{12,}"),
    re.compile(
        r"(?i)(api[_-]?key|x-api-key|token|secret|password)([\"']?\s*[:=]\s*[\"']?)[^\s,;\"'&]+"
    ),
)


def redact(text: str, *secrets: str) -> str:
    """Return ``text`` with the given secrets and anything that looks like a credential masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[REDACTED]")
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(_mask, text)
    return text


def _mask(match: re.Match[str]) -> str:
    if match.re.groups >= 2:  # key = value: keep the key's name, mask the value
        return f"{match.group(1)}{match.group(2)}[REDACTED]"
    if match.re.groups == 1:  # "Bearer xyz": keep the scheme
        return f"{match.group(1)} [REDACTED]"
    return "[REDACTED]"


class QueryError(Exception):
    """An error the HTTP API returns as ``{"error": {"code", "message"}}`` with ``status``.

    ``message`` is shown to the user: say what to do, never include provider
    text or internals.
    """

    def __init__(
        self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(status, code, message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class LLMError(Exception):
    """The language model provider failed; ``category`` says how.

    ``detail`` is for logs: it is shortened and passed through :func:`redact`
    here, and clients also mask their own key before building it, so neither
    ``str()`` nor ``repr()`` ever shows a credential.
    """

    def __init__(
        self,
        category: LLMErrorCategory,
        detail: str = "",
        *,
        provider: str = "",
        status: int | None = None,
    ) -> None:
        if category not in LLM_ERROR_CATEGORIES:
            raise ValueError(f"unknown LLM error category {category!r}")
        detail = redact(detail)
        if len(detail) > _DETAIL_MAX_CHARS:
            detail = detail[: _DETAIL_MAX_CHARS - 1] + "…"
        self.category: LLMErrorCategory = category
        self.detail = detail
        self.provider = provider
        self.status = status
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.provider}: " if self.provider else ""
        code = f" (HTTP {self.status})" if self.status is not None else ""
        tail = f": {self.detail}" if self.detail else ""
        return f"{where}{self.category}{code}{tail}"

    def __repr__(self) -> str:
        return f"LLMError({self.category!r}, {self.detail!r}, provider={self.provider!r})"

    def __reduce__(self) -> tuple[object, ...]:
        # Exceptions are re-created from ``args`` when copied; keep the keywords.
        return (_rebuild_llm_error, (self.category, self.detail, self.provider, self.status))

    @property
    def http_status(self) -> int:
        """The status the API answers with when no fallback is allowed: 504, 503 or 502."""
        if self.category == "timeout":
            return 504
        return 503 if self.category == "budget" else 502


def _rebuild_llm_error(
    category: LLMErrorCategory, detail: str, provider: str, status: int | None
) -> LLMError:
    return LLMError(category, detail, provider=provider, status=status)
