"""A hard cap on LLM spend, counted across every instance in the shared store.

The owner sets tokens and/or US dollars per UTC day and per UTC hour
(``ANCHORED_BUDGET_*``; dollars from ``ANCHORED_LLM_PRICE_*_PER_MTOK``, the
model's price per million input and output tokens). Every LLM call goes
through :class:`BudgetedClient`:

1. **Reserve** an upper bound before the call: the prompt's UTF-8 bytes plus a
   few tokens per message (no tokenizer makes more tokens than bytes, bar the
   chat template's markers) as input, ``max_tokens`` as output. The store adds
   it only if no window then exceeds its cap, in one atomic step
   (:meth:`~anchored_query.guard.shared_state.Counters.add`), so concurrent calls on
   any number of instances can together never pass the cap.
2. **Settle** after the call with what the provider reports (the
   :class:`~anchored_query.llm.Completion`'s token counts): the difference is
   added (usually a refund). A figure the provider did not report stays at the
   reserved bound, and so does a report no tokenizer could make: fewer input
   tokens than the prompt has words, or fewer output tokens than the reply has
   (:func:`input_token_floor`; a provider reporting 0 would otherwise never meet
   the cap). A call that failed before the provider could charge (auth,
   bad request, throttled) is refunded; any other failure keeps its
   reservation, since the provider may have done the work. A stream the reader
   abandoned gets no report: it counts the prompt it sent and the text streamed
   so far, estimated (:func:`abandoned_usage`).

3. **One client's share**: the calls made for one client (the rate limit's
   :func:`~anchored_query.guard.ratelimit.client_key`, which the HTTP app sets in
   :data:`current_client` for each request) are also counted in an item of that
   client's own, whose caps are ``ANCHORED_BUDGET_CLIENT_SHARE`` of each cap. A
   client may start a call while it has used less than its share, so one reader
   cannot spend the whole cap for everyone, and a share smaller than one call's
   reservation still lets each reader ask. The owner's own tools (``anchored ask``,
   stdio MCP) have no client: no share applies.

A call that does not fit raises ``LLMError("budget")`` without calling the
model; the engine then answers extractively and says why. If the store cannot
be reached the cap cannot be checked, and the call is refused the same way
(fail closed: a spend cap that opens when DynamoDB is down is no cap).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from anchored_query.errors import LLMError
from anchored_query.guard.shared_state import Counters, StateUnavailable
from anchored_query.llm.base import ChatMessage, Completion, LLMClient, StreamEvent, stream_reply
from anchored_query.llm.calls import MIN_CALL_S
from anchored_query.settings import Settings

log = logging.getLogger("anchored.query")

# Chat-template tokens around each message and before the reply (OpenAI counts 3-4).
TOKENS_PER_MESSAGE = 8
TOKENS_PER_REPLY = 8
# A day's item is kept two days past its end (to look at), then TTL deletes it; a client's
# item an hour (a call settled after midnight still finds it).
KEEP_S = 2 * 86400
CLIENT_KEEP_S = 3600
# An abandoned stream's estimate: a token for every three bytes of UTF-8, more than English
# prose (about four bytes a token) and code (three to four) take, about what Chinese takes
# (a character, three bytes, is a token or so). Never more than the reservation's bound.
ESTIMATE_BYTES_PER_TOKEN = 3
# Failures after which the provider has not done (or billed) the work.
NOT_CHARGED = frozenset({"auth", "bad_request", "rate_limited"})
# ANCHORED_BUDGET_CLIENT_SHARE's default: one client may use a quarter of each cap (it takes
# four to spend it all; a network address many readers share keeps some answers).
CLIENT_SHARE = 0.25

# The client whose request makes the LLM calls (guard/ratelimit.py's client_key), set by the
# HTTP app for each request; a context variable follows the request into its worker
# thread. "" (the default): no client, no share.
current_client: ContextVar[str] = ContextVar("anchored_budget_client", default="")


@dataclass(frozen=True)
class BudgetLimits:
    """The caps (0 = none) and the model's prices in USD per million tokens."""

    tokens_per_day: int = 0
    tokens_per_hour: int = 0
    usd_per_day: float = 0.0
    usd_per_hour: float = 0.0
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0
    client_share: float = CLIENT_SHARE  # of each cap, for one client (1: no share)

    @classmethod
    def from_settings(cls, settings: Settings) -> BudgetLimits:
        """The limits the ``ANCHORED_BUDGET_*`` and price settings describe."""
        return cls(
            tokens_per_day=settings.budget_tokens_per_day,
            tokens_per_hour=settings.budget_tokens_per_hour,
            usd_per_day=settings.budget_usd_per_day,
            usd_per_hour=settings.budget_usd_per_hour,
            price_input_per_mtok=settings.llm_price_input_per_mtok,
            price_output_per_mtok=settings.llm_price_output_per_mtok,
            client_share=settings.budget_client_share,
        )

    @property
    def active(self) -> bool:
        """Whether any cap is set."""
        return bool(
            self.tokens_per_day or self.tokens_per_hour or self.usd_per_day or self.usd_per_hour
        )

    def micro_usd(self, input_tokens: int, output_tokens: int) -> int:
        """What the tokens cost in millionths of a dollar (the price per 1M tokens is
        the price per token in micro-dollars), rounded up."""
        cost = input_tokens * self.price_input_per_mtok + output_tokens * self.price_output_per_mtok
        return math.ceil(cost - 1e-9) if cost > 0 else 0

    def caps(self, hour: str) -> dict[str, int]:
        """The store's limits for the counters of one day item and hour ``hour``."""
        caps = {
            "tokens": self.tokens_per_day,
            f"tokens_h{hour}": self.tokens_per_hour,
            "usd_micro": round(self.usd_per_day * 1e6),
            f"usd_micro_h{hour}": round(self.usd_per_hour * 1e6),
        }
        return {name: cap for name, cap in caps.items() if cap > 0}

    def client_caps(self, hour: str, amounts: Mapping[str, int]) -> dict[str, int]:
        """The limits of one client's counters for a call adding ``amounts``: the call
        fits while the client has used less than its share of each cap (so one call may
        take it past its share, never two)."""
        return {
            name: max(1, math.ceil(cap * self.client_share)) - 1 + amounts[name]
            for name, cap in self.caps(hour).items()
        }


@dataclass(frozen=True)
class Reservation:
    """What one call holds of the budget until it is settled."""

    key: str
    hour: str
    input_tokens: int
    output_tokens: int
    micro_usd: int
    client_key: str = ""  # the client's own item, when its share is counted


class BudgetExceeded(Exception):
    """The call does not fit in what is left of a window's cap."""


class ClientShareExceeded(BudgetExceeded):
    """The call does not fit in what is left of its client's share of a cap."""


class Budget:
    """Reserves and settles token and dollar amounts in the shared counters."""

    def __init__(
        self,
        counters: Counters,
        limits: BudgetLimits,
        *,
        clock: Callable[[], float] = time.time,
        prefix: str = "budget",
    ) -> None:
        self.counters = counters
        self.limits = limits
        self.clock = clock
        self.prefix = prefix

    def _window(self) -> tuple[str, str, float]:
        """The day (``YYYY-MM-DD``), the hour (``HH``) and the day's end, in UTC."""
        now = datetime.fromtimestamp(self.clock(), UTC)
        day_end = datetime(now.year, now.month, now.day, tzinfo=UTC).timestamp() + 86400
        return f"{now:%Y-%m-%d}", f"{now:%H}", day_end

    def reserve(self, input_tokens: int, output_tokens: int, client: str = "") -> Reservation:
        """Hold an upper bound of one call (made for ``client``, "" for none); raises
        BudgetExceeded (ClientShareExceeded for the client's share) or StateUnavailable."""
        day, hour, day_end = self._window()
        key = f"{self.prefix}#{day}"
        cost = self.limits.micro_usd(input_tokens, output_tokens)
        tokens = input_tokens + output_tokens
        amounts = _amounts(hour, tokens, cost)
        client_key = ""
        if client and self.limits.client_share < 1:
            # The client's item first: a client past its share costs the cap nothing.
            client_key = f"{self.prefix}-client#{client}#{day}"
            limits = self.limits.client_caps(hour, amounts)
            kept = day_end + CLIENT_KEEP_S
            if self.counters.add(client_key, amounts, limits=limits, expires_at=kept) is None:
                raise ClientShareExceeded(f"{day} hour {hour}: a client's share is used")
        try:
            added = self.counters.add(
                key, amounts, limits=self.limits.caps(hour), expires_at=day_end + KEEP_S
            )
        except StateUnavailable:
            self._take_back(client_key, amounts, day_end)
            raise
        if added is None:
            self._take_back(client_key, amounts, day_end)
            raise BudgetExceeded(
                f"{key} hour {hour}: {tokens} tokens / {cost} micro-USD do not fit"
            )
        return Reservation(key, hour, input_tokens, output_tokens, cost, client_key)

    def _take_back(self, client_key: str, amounts: Mapping[str, int], day_end: float) -> None:
        """Undo a client's share of a call the cap refused (if the store fails, the
        client's count stays high: it errs on the side of spending less)."""
        if client_key:
            try:
                back = {name: -amount for name, amount in amounts.items()}
                self.counters.add(client_key, back, expires_at=day_end + CLIENT_KEEP_S)
            except StateUnavailable as exc:
                log.error("a client's share not given back, it stays counted (%s)", exc)

    def settle(self, reservation: Reservation, input_tokens: int, output_tokens: int) -> None:
        """Replace a reservation by what the call used (to the window it was made in)."""
        tokens = input_tokens + output_tokens - reservation.input_tokens - reservation.output_tokens
        cost = self.limits.micro_usd(input_tokens, output_tokens) - reservation.micro_usd
        if not tokens and not cost:
            return
        _, _, day_end = self._window()
        amounts = _amounts(reservation.hour, tokens, cost)
        self.counters.add(reservation.key, amounts, expires_at=day_end + KEEP_S)
        if reservation.client_key:
            self.counters.add(reservation.client_key, amounts, expires_at=day_end + CLIENT_KEEP_S)


def _amounts(hour: str, tokens: int, cost: int) -> dict[str, int]:
    """The counters one call adds to, in a day item and its hour ``hour``."""
    return {
        "tokens": tokens,
        f"tokens_h{hour}": tokens,
        "usd_micro": cost,
        f"usd_micro_h{hour}": cost,
    }


def input_token_bound(messages: Sequence[ChatMessage]) -> int:
    """At most how many input tokens ``messages`` can be, whatever the tokenizer."""
    return TOKENS_PER_REPLY + sum(
        TOKENS_PER_MESSAGE + len(m.content.encode("utf-8", "surrogatepass")) for m in messages
    )


def _estimate(text: str) -> int:
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / ESTIMATE_BYTES_PER_TOKEN)


def abandoned_usage(
    messages: Sequence[ChatMessage], streamed: Sequence[str], max_tokens: int
) -> tuple[int, int]:
    """What a stream abandoned before its end counts for, no usage report coming: the
    prompt the provider was sent and the reply as far as it was streamed (at least a token
    a piece), each at a token per ``ESTIMATE_BYTES_PER_TOKEN`` bytes."""
    sent = TOKENS_PER_REPLY + sum(TOKENS_PER_MESSAGE + _estimate(m.content) for m in messages)
    written = max(sum(1 for piece in streamed if piece), _estimate("".join(streamed)))
    return sent, min(max_tokens, written)


def input_token_floor(messages: Sequence[ChatMessage]) -> int:
    """At least how many input tokens ``messages`` are: their words. Tokenizers cut text
    at white space before they merge it into tokens, so no token spans two words; a
    provider reporting fewer is not counting (the bound above is the other side)."""
    return sum(len(m.content.split()) for m in messages)


def reported_usage(
    completion: Completion, bound: int, max_tokens: int, floor: int
) -> tuple[int, int]:
    """The input and output tokens a call counts for: the provider's report, a figure it
    left out at the reserved bound (``bound`` in, ``max_tokens`` out). A report below the
    prompt's ``floor`` (:func:`input_token_floor`) or the reply's words is treated as no
    report: both sides count at the bound."""
    used_in, used_out = completion.input_tokens, completion.output_tokens
    words_out = len(completion.text.split())
    if (used_in is not None and used_in < floor) or (
        used_out is not None and used_out < min(words_out, max_tokens)
    ):
        log.warning(
            "the provider reported %s input / %s output tokens for a prompt of %d words and "
            "a reply of %d: counted as unreported (%d / %d)",
            used_in,
            used_out,
            floor,
            words_out,
            bound,
            max_tokens,
        )
        return bound, max_tokens
    return (bound if used_in is None else used_in, max_tokens if used_out is None else used_out)


class BudgetedClient:
    """An :class:`~anchored_query.llm.LLMClient` that spends only what the budget allows."""

    def __init__(self, inner: LLMClient, budget: Budget) -> None:
        self.inner = inner
        self.budget = budget
        self.name = inner.name

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Completion:
        """The inner client's answer, or ``LLMError("budget")`` when it would pass a cap."""
        bound = input_token_bound(messages)
        started = time.monotonic()
        reservation = self._reserve(bound, max_tokens)
        timeout_s = self._time_left(timeout_s, started, reservation)
        try:
            completion = self.inner.complete(
                messages, max_tokens=max_tokens, temperature=temperature, timeout_s=timeout_s
            )
        except LLMError as exc:
            if exc.category in NOT_CHARGED:
                self._settle(reservation, 0, 0)
            raise
        floor = input_token_floor(messages)
        self._settle(reservation, *reported_usage(completion, bound, max_tokens, floor))
        return completion

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Iterator[StreamEvent]:
        """The inner client's reply as it is written (:func:`~anchored_query.llm.base.
        stream_reply`), reserved and settled like :meth:`complete`.

        A stream closed before its end (the reader went away) is settled at what the
        provider was sent and what it streamed (:func:`abandoned_usage`): no report of
        usage comes. Not counted then: reasoning tokens a provider bills but never sends,
        and what it generates after the connection closed. A stream that failed in a way
        not mapped (a timeout) keeps its whole reservation, as a call that timed out does.
        """
        bound = input_token_bound(messages)
        started = time.monotonic()
        reservation = self._reserve(bound, max_tokens)
        timeout_s = self._time_left(timeout_s, started, reservation)
        streamed: list[str] = []
        settled = False
        events = stream_reply(
            self.inner,
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout_s=timeout_s,
        )
        try:
            for event in events:
                if isinstance(event, Completion):
                    floor = input_token_floor(messages)
                    self._settle(reservation, *reported_usage(event, bound, max_tokens, floor))
                    settled = True
                else:
                    streamed.append(event)
                yield event
        except GeneratorExit:  # closed early: the reader went away
            if not settled:
                self._settle(reservation, *abandoned_usage(messages, streamed, max_tokens))
            raise
        except LLMError as exc:
            if exc.category in NOT_CHARGED and not streamed:
                self._settle(reservation, 0, 0)
            raise
        finally:
            close = getattr(events, "close", None)
            if callable(close):
                close()  # the provider's connection with it

    def _time_left(
        self, timeout_s: float | None, started: float, reservation: Reservation
    ) -> float | None:
        """``timeout_s`` less the time the reservation took (a round trip to the shared
        store, slow at times): the call may not run past the time its caller had left. A
        call that could no longer finish is not made, and its reservation is refunded."""
        if timeout_s is None:
            return None
        left = timeout_s - (time.monotonic() - started)
        if left < MIN_CALL_S:
            self._settle(reservation, 0, 0)
            raise LLMError(
                "timeout",
                f"no time left for the call after reserving its budget ({left:.1f}s; the "
                "spend counter was slow)",
                provider=self.name,
            )
        return left

    def _reserve(self, bound: int, max_tokens: int) -> Reservation:
        try:
            return self.budget.reserve(bound, max_tokens, current_client.get())
        except ClientShareExceeded as exc:
            # Not "LLM call refused": template.yaml's alarm on the whole cap counts those.
            log.warning(
                "a client's LLM call not made: its share of the spend cap is used (%s)", exc
            )
            raise LLMError(
                "budget", "this client's share of the spend cap is used", provider=self.name
            ) from None
        except BudgetExceeded as exc:
            log.warning("LLM call refused: the spend cap is reached (%s)", exc)
            raise LLMError("budget", "the spend cap is reached", provider=self.name) from None
        except StateUnavailable as exc:
            log.error("LLM call refused: the spend counter cannot be checked (%s)", exc)
            raise LLMError(
                "budget", "the spend counter cannot be checked", provider=self.name
            ) from None

    def _settle(self, reservation: Reservation, input_tokens: int, output_tokens: int) -> None:
        try:
            self.budget.settle(reservation, input_tokens, output_tokens)
        except StateUnavailable as exc:
            # The reservation stays counted: the cap errs on the side of spending less.
            log.error("spend counter not settled, the reservation stays counted (%s)", exc)
        if input_tokens > reservation.input_tokens or output_tokens > reservation.output_tokens:
            log.warning(
                "LLM call used more than reserved (%d/%d tokens in, %d/%d out)",
                input_tokens,
                reservation.input_tokens,
                output_tokens,
                reservation.output_tokens,
            )

    def close(self) -> None:
        """Close the inner client, if it can be."""
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def __getattr__(self, name: str) -> Any:
        # Anything else the engine asks of a client (its model, its timeout) is the inner one's.
        return getattr(self.inner, name)


def with_budget(client: LLMClient, settings: Settings) -> LLMClient:
    """``client`` behind the spend cap the settings describe (as is when there is none)."""
    limits = BudgetLimits.from_settings(settings)
    if not limits.active:
        return client
    from anchored_query.guard.shared_state import shared_counters

    budget = Budget(shared_counters(settings.shared_state), limits)
    log.info(
        "spend cap: %s tokens/day, %s tokens/hour, $%s/day, $%s/hour, a client %s of each, "
        "counted in %s",
        limits.tokens_per_day or "no cap",
        limits.tokens_per_hour or "no cap",
        limits.usd_per_day or "no cap",
        limits.usd_per_hour or "no cap",
        f"{limits.client_share:g}" if limits.client_share < 1 else "all",
        budget.counters.name,
    )
    return BudgetedClient(client, budget)
