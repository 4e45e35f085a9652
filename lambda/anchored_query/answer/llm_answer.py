"""The LLM answer step of ``/v1/ask``: the prompt sized to the model's window, the
call within the request's deadline, the reply parsed and verified against the
passages it was shown. Also the model's search rewrites (the optional second call).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from anchored_query.answer.prompt import (
    MAX_HISTORY_CHARS,
    build_messages,
    build_rewrite_messages,
    echoes_instructions,
    estimate_tokens,
    parse_rewrites,
)
from anchored_query.answer.response import covered
from anchored_query.citations.checking import Checker
from anchored_query.citations.pasted import is_pasted
from anchored_query.citations.support import foreign_terms, make_support
from anchored_query.citations.verify import parse_answer, renumber, verify
from anchored_query.errors import LLMError
from anchored_query.guard import logsafe
from anchored_query.llm import ChatMessage, Completion, LLMClient
from anchored_query.llm.calls import Deadline, complete_within, is_context_overflow
from anchored_query.question.validation import AskRequest
from anchored_query.question.word_prior import word_prior
from anchored_query.retrieval.evidence import WITH_PRIOR
from anchored_query.settings import Settings
from anchored_query.types import Passage, Scope

if TYPE_CHECKING:
    from anchored_query.retrieval.loaded import Loaded

log = logging.getLogger("anchored.query")

# Time kept back from the request deadline for the extractive answer that replaces
# an LLM answer that did not come (retrieval is done by then; the answerer is fast).
EXTRACTIVE_RESERVE_S = 2.0
# The prompt is sized with a cheap token estimate (prompt.estimate_tokens); this share
# of the model's window is kept free in case the model's tokenizer counts more.
CONTEXT_SAFETY = 0.10
MESSAGE_OVERHEAD_TOKENS = 8  # chat template tokens around each message
HISTORY_SHARE = 0.2  # earlier turns take at most this share of the window (4 chars a token)
PASSAGE_OVERHEAD_TOKENS = 16  # "[n] Section: …" line and page wrapper per passage
# What the reader is told when the LLM answer is replaced by the extractive one.
FALLBACK_REASONS = {
    "timeout": "the language model did not answer in time, so this answer quotes the docs",
    "budget": "the site's spending limit for the language model is reached for now, "
    "so this answer quotes the docs",
    "truncated": "the language model's reply was cut off, so this answer quotes the docs",
    "rate_limited": "the language model is busy, so this answer quotes the docs",
    "overflow": "the question and its context were too long for the language model, "
    "so this answer quotes the docs",
}
FALLBACK_REASON = "the language model did not answer, so this answer quotes the docs"


def fallback_of(exc: LLMError) -> tuple[str, str]:
    """``(fallback, reason)`` for an LLM failure the extractive answer replaces: the
    failure's category and what the reader is told."""
    fallback = "overflow" if is_context_overflow(exc) else exc.category
    return fallback, FALLBACK_REASONS.get(fallback, FALLBACK_REASON)


def rewrites(
    llm: LLMClient, settings: Settings, request: AskRequest, deadline: Deadline
) -> list[str]:
    """Search rewrites by the model: at most ANCHORED_LLM_REWRITE_TIMEOUT_S and a
    third of the time left, so the answer call keeps the rest; no retry."""
    share = (deadline.left() - EXTRACTIVE_RESERVE_S) / 3
    try:
        reply = complete_within(
            llm,
            [
                ChatMessage(m.role, m.content)
                for m in build_rewrite_messages(request.question, request.history)
            ],
            deadline=deadline,
            reserve_s=EXTRACTIVE_RESERVE_S,
            max_tokens=200,
            attempt_timeout_s=max(0.1, min(settings.llm_rewrite_timeout_s, share)),
            retries=0,
            what="rewrite",
        )
    except LLMError as exc:
        log.info("query rewrite skipped: %s", exc.category)
        return []
    return parse_rewrites(reply.text)[:4]


def passage_budget(settings: Settings, request: AskRequest) -> int:
    """Tokens the passages may take so that the whole prompt — instructions,
    history, question, passages — and the reply reserve fit the model's window
    (ANCHORED_LLM_CONTEXT_TOKENS, less CONTEXT_SAFETY), capped by
    ANCHORED_CONTEXT_TOKENS."""
    s = settings
    overhead = prompt_tokens(messages(s, request, []))  # history cut to fit, see there
    window = int(s.llm_context_tokens * (1 - CONTEXT_SAFETY))
    available = window - overhead - s.llm_max_output_tokens
    if available < 200:
        log.warning(
            "the prompt leaves %d tokens for passages: ANCHORED_LLM_CONTEXT_TOKENS=%d "
            "less ~%d of instructions, history and question, less "
            "ANCHORED_LLM_MAX_OUTPUT_TOKENS=%d",
            max(0, available),
            s.llm_context_tokens,
            overhead,
            s.llm_max_output_tokens,
        )
    return max(0, min(s.context_tokens, available))


def messages(settings: Settings, request: AskRequest, passages: list[Passage]) -> list[ChatMessage]:
    """The answer prompt; earlier turns take at most HISTORY_SHARE of the window."""
    history_chars = int(settings.llm_context_tokens * HISTORY_SHARE * 4)
    built = build_messages(
        request.question,
        passages,
        history=request.history,
        site_name=settings.site_name,
        scope_note=_scope_note(request.scope),
        max_history_chars=min(MAX_HISTORY_CHARS, history_chars),
    )
    return [ChatMessage(m.role, m.content) for m in built]


def complete_answer(
    llm: LLMClient,
    settings: Settings,
    request: AskRequest,
    passages: list[Passage],
    deadline: Deadline,
) -> tuple[Completion, list[Passage]]:
    """The model's reply within the deadline, and the passages it was shown.

    A prompt the provider refuses as longer than the model's window is logged
    naming ANCHORED_LLM_CONTEXT_TOKENS and tried once more with the better half
    of the passages, if time is left. A reply cut at the token limit is no answer.
    """
    s = settings
    # With mode "llm" there is no extractive answer to keep time for.
    reserve = 0.0 if request.mode == "llm" else EXTRACTIVE_RESERVE_S

    def call(prompt: list[ChatMessage], retries: int) -> Completion:
        return complete_within(
            llm,
            prompt,
            deadline=deadline,
            reserve_s=reserve,
            max_tokens=s.llm_max_output_tokens,
            attempt_timeout_s=s.llm_timeout_s,
            retries=retries,
        )

    prompt = messages(s, request, passages)
    try:
        completion = call(prompt, s.llm_retries)
    except LLMError as exc:
        if not is_context_overflow(exc) or len(passages) < 2:
            raise
        log.warning(
            "%s refused a prompt of about %d tokens (%s) as longer than its context "
            "window: ANCHORED_LLM_CONTEXT_TOKENS=%d is more than the window the model "
            "is served with; set it to that window. Retrying with half the passages.",
            llm.name,
            prompt_tokens(prompt),
            exc.detail,
            s.llm_context_tokens,
        )
        best = sorted(passages, key=lambda p: -p.score)[: len(passages) // 2]
        passages = sorted(best, key=lambda p: p.n)
        prompt = messages(s, request, passages)
        completion = call(prompt, 0)
    log.info(
        "LLM answer: %s input tokens, %s output tokens, finish %s",
        completion.input_tokens,
        completion.output_tokens,
        completion.finish_reason,
    )
    if completion.truncated:
        raise LLMError(
            "truncated",
            f"reply cut at ANCHORED_LLM_MAX_OUTPUT_TOKENS={s.llm_max_output_tokens}",
            provider=llm.name,
        )
    return completion, passages


def answer_llm(
    llm: LLMClient,
    settings: Settings,
    request: AskRequest,
    passages: list[Passage],
    loaded: Loaded,
    deadline: Deadline,
    checkers: dict[tuple[int, ...], Checker] | None = None,
) -> dict[str, Any]:
    """The LLM's answer as ``/v1/ask`` returns it (without ids, timings): the reply's
    sentences that the passages support, citations renumbered; raises LLMError.

    ``checkers``: the checks made for earlier versions of this reply, by context (the
    streamed answer verifies the reply at each paragraph: each sentence is then
    checked once, and the final verification reuses them all)."""
    completion, passages = complete_answer(llm, settings, request, passages, deadline)
    reply = completion.text
    # A proxy that echoes the request into its answer must not hand the key to readers.
    reply = logsafe.without_secrets(reply)
    by_n = {p.n: p for p in passages}
    sentences = parse_answer(reply, known=[n for n, p in by_n.items() if not p.excluded])
    # A reply that repeats its instructions shows none of them (rule 2's example
    # markers [3, 7] would otherwise pass the citation check).
    shown = [s for s in sentences if not echoes_instructions(s.text)]
    context = tuple(sorted(by_n))
    checker = checkers.get(context) if checkers is not None else None
    if checker is None:
        asked = " ".join(
            [*(t.content for t in request.history if t.role == "user"), request.question]
        )
        checker = make_checker(loaded, by_n, asked)
        if checkers is not None:
            checkers[context] = checker
    verified = verify(shown, by_n, checker=checker)
    answer, citations = renumber(verified, by_n)
    abstained = verified.abstained
    if abstained and not citations:
        # Nothing asked is answered: what the model said the docs do not cover stays
        # (with the closest passage it named, when it named one), or the closest sections.
        citations = covered(passages[:5])
    echoed = len(sentences) - len(shown)
    decisions = [
        {"index": d.index, "check": d.check, "action": d.action} for d in verified.decisions
    ]
    checks: dict[str, dict[str, int]] = {}
    for d in verified.decisions:
        checks.setdefault(d.check, {"removed": 0, "unverified": 0})[d.action] += 1
    if echoed:
        checks["echoes_instructions"] = {"removed": echoed, "unverified": 0}
    if verified.reasons or echoed:  # why, for the owner (the server's log)
        log.info("verification: %s", " | ".join(verified.reasons) or f"{echoed} echoed")
    return {
        "answer": answer,
        "citations": citations,
        "abstained": abstained,
        "mode": "llm",
        "coverage": verified.coverage,
        "removed_sentences": verified.removed + echoed,
        "unverified_sentences": verified.unverified,
        "verification": {
            "sentences": len(sentences),
            "checks": checks,
            "decisions": decisions,
            # Only copies of its passages: the engine judges it as the quote (pasted.py).
            "pasted": is_pasted((s.text for s in shown), passages),
        },
    }


def make_checker(loaded: Loaded, by_n: dict[int, Passage], asked: str = "") -> Checker:
    """The support checks of a context: semantic support by the index's own embedder
    (none for an uncalibrated model), and words the site never uses, specific in the
    language at large ("NTLM" on a site that never names it), which no passage can
    support."""
    index = loaded.index
    model = index.manifest["model"]["name"]
    support = make_support(loaded.retriever.embedder, model, index)
    prior = word_prior(index.model_dir) if model in WITH_PRIOR else None

    def foreign(text: str) -> list[str]:
        return foreign_terms(text, index.bm25.vocab, prior)

    return Checker(by_n, support, foreign, asked)


def passage_tokens(text: str) -> int:
    """A passage's share of the prompt, its wrapper included (retrieval's estimate)."""
    return estimate_tokens(text) + PASSAGE_OVERHEAD_TOKENS


def prompt_tokens(prompt: list[ChatMessage]) -> int:
    """The estimated tokens of a whole prompt, the chat template's included."""
    return sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in prompt)


def _scope_note(scope: Scope) -> str:
    if scope.is_whole_site():
        return "All sections of the site are in scope."
    parts = []
    if scope.include:
        parts.append("Only these sections are in scope: " + _quoted(scope.include))
    if scope.exclude:
        parts.append("The reader excluded these sections: " + _quoted(scope.exclude))
    return ". ".join(parts) + "."


def _quoted(prefixes: tuple[str, ...]) -> str:
    """Scope prefixes as data: each one quoted (they are page URL prefixes, checked)."""
    return ", ".join(json.dumps(p, ensure_ascii=False) for p in prefixes)
