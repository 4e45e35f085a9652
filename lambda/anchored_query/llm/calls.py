"""Model calls inside one request's deadline: the time left, retries, context overflow.

A request has one :class:`Deadline`. Every call and every retry gets only what
is left of it, less a reserve kept for the extractive answer that is returned if
the model gives up; when too little is left, no call is made. Clients are built
without retries of their own (``max_retries=0``): retrying here is what keeps a
second attempt from outliving the request.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Sequence

from anchored_query.errors import LLMError, LLMErrorCategory
from anchored_query.llm.base import ChatMessage, Completion, LLMClient

log = logging.getLogger("anchored.query")

# Failures another attempt may fix. A timeout is not among them: against a server
# that reads one prompt at a time, a second attempt reads the whole prompt again.
RETRYABLE: frozenset[LLMErrorCategory] = frozenset(("connection", "http_5xx", "rate_limited"))
# No call is started with less time than this: it could not finish.
MIN_CALL_S = 1.0
BACKOFF_S = 0.25

# How providers word "the prompt does not fit the model's context window": OpenAI
# (context_length_exceeded), vLLM, llama.cpp ("exceed context window"), Ollama,
# Bedrock ("Input is too long", "prompt is too long").
_OVERFLOW = re.compile(
    r"context[_ ]length|context window|maximum context|context size|n_ctx|"
    r"too many (?:input )?tokens|(?:input|prompt)(?: is)? too long|too long for (?:the )?model|"
    r"exceeds? (?:the )?(?:max(?:imum)?|context)|token limit",
    re.IGNORECASE,
)


class Deadline:
    """The time a request may take, counted from its creation on a monotonic clock."""

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = float(seconds)
        self._clock = clock
        self.end = clock() + self.seconds

    def left(self) -> float:
        """Seconds until the deadline (negative once it has passed)."""
        return self.end - self._clock()


def is_context_overflow(error: LLMError) -> bool:
    """Whether ``error`` is the provider refusing a prompt longer than the model's window."""
    return error.category == "bad_request" and bool(_OVERFLOW.search(error.detail))


def complete_within(
    client: LLMClient,
    messages: Sequence[ChatMessage],
    *,
    deadline: Deadline,
    reserve_s: float,
    max_tokens: int,
    attempt_timeout_s: float,
    retries: int,
    what: str = "answer",
    temperature: float = 0.0,
) -> Completion:
    """``client.complete(messages)`` within ``deadline`` less ``reserve_s``.

    Each attempt's timeout is the smaller of ``attempt_timeout_s`` and the time
    left; up to ``retries`` more attempts follow a connection failure, a 5xx or a
    429 while time is left. Raises the last :class:`LLMError`, or
    ``LLMError("timeout")`` when no time is left for a call.
    """
    attempt = 0
    while True:
        left = deadline.left() - reserve_s
        if left < MIN_CALL_S:
            raise LLMError(
                "timeout",
                f"no time left for the {what} call within the request deadline "
                f"({deadline.seconds:g}s, ANCHORED_DEADLINE_S)",
                provider=client.name,
            )
        try:
            return client.complete(
                messages,
                max_tokens=max_tokens,
                temperature=temperature,
                timeout_s=min(attempt_timeout_s, left),
            )
        except LLMError as exc:
            attempt += 1
            if exc.category not in RETRYABLE or attempt > retries:
                raise
            wait = BACKOFF_S * (2 ** (attempt - 1)) * (0.5 + random.random() / 2)
            if deadline.left() - reserve_s - wait < MIN_CALL_S:
                raise
            log.warning(
                "%s call failed (%s), retry %d/%d in %.2fs",
                what,
                exc.category,
                attempt,
                retries,
                wait,
            )
            time.sleep(wait)
