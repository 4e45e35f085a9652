"""Scoring the answers of the LLM benchmark (see ``bench_llm_answers``).

Each answer is scored twice from the same reply: as ``/v1/ask`` returned it (the
current verifier, :func:`score_new`) and through the frozen first verifier
(``baseline_citations``, :func:`score_old`); :func:`row` makes one table row.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anchored_query.citations.verify as citations_module
import baseline_citations
from anchored_query.answer.prompt import echoes_instructions
from anchored_query.citations.verify import parse_answer
from llm_judge import Judge, Pair, supported
from llm_replies import Asked


@dataclass
class Scored:
    """One answer, scored."""

    qid: str
    answerable: bool
    lang: str
    abstained: bool
    fell_back: str  # the fallback code when the LLM answer was replaced, else ""
    written: int
    kept: int
    pairs: list[Pair]
    text: str
    fact: bool
    latency_s: float
    input_tokens: int
    output_tokens: int
    supported: list[bool | None] = field(default_factory=list)


def written(sentences: Sequence[Any]) -> int:
    """The model's sentences that say something about the docs: a refusal ("The
    documentation does not cover this.") is not counted as a sentence to keep."""
    refusal = getattr(citations_module, "_NO_COVERAGE", None)
    return sum(1 for s in sentences if refusal is None or not refusal.search(s.text))


def facts_stated(question: dict[str, Any], text: str) -> bool:
    norm = " ".join(text.casefold().split())
    return any(" ".join(f.casefold().split()) in norm for f in question.get("facts", []))


def _tokens(asked: Asked) -> tuple[int, int]:
    done = [c.completion for c in asked.calls if c.completion is not None]
    return (
        sum(c.input_tokens or 0 for c in done),
        sum(c.output_tokens or 0 for c in done),
    )


def score_new(asked: Asked) -> Scored:
    """The answer as /v1/ask returned it (the current verifier)."""
    body = asked.body
    chunks = {p.chunk_ids[0]: p for p in asked.passages}
    cited = {c["n"]: chunks.get(c["chunk_id"]) for c in body.get("citations", [])}
    llm = body.get("mode") == "llm"
    items = body.get("answer", []) if llm else []
    pairs = [
        Pair(item["text"], passage.text)
        for item in items
        for n in item["citations"]
        if (passage := cited.get(n)) is not None
    ]
    n_written = written(parse_answer(asked.reply)) if asked.reply else 0
    tokens = _tokens(asked)
    return Scored(
        asked.qid,
        bool(asked.question.get("answerable", True)),
        asked.question.get("lang", "en"),
        bool(body.get("abstained")) or not llm,
        body.get("fallback", "") if not llm else "",
        n_written,
        len(items),
        pairs,
        " ".join(i["text"] for i in items),
        facts_stated(asked.question, " ".join(i["text"] for i in items)),
        asked.latency_s,
        *tokens,
    )


def score_old(asked: Asked) -> Scored:
    """The same reply through today's verifier (tests/bench/baseline_citations.py), as
    today's engine used it: parse, drop echoed instructions, verify, abstain."""
    by_n = {p.n: p for p in asked.passages}
    reply = asked.reply
    sentences = baseline_citations.parse_answer(reply) if reply else []
    shown = [s for s in sentences if not echoes_instructions(s.text)]
    verified = baseline_citations.verify(shown, by_n)
    kept = [] if verified.abstained else verified.sentences
    pairs = [Pair(s.text, by_n[n].text) for s in kept for n in s.citations if n in by_n]
    text = " ".join(s.text for s in kept)
    llm = bool(reply) and asked.body.get("mode") == "llm"
    tokens = _tokens(asked)
    return Scored(
        asked.qid,
        bool(asked.question.get("answerable", True)),
        asked.question.get("lang", "en"),
        verified.abstained or not llm,
        asked.body.get("fallback", "") if not llm else "",
        written(sentences),
        len(kept) if llm else 0,
        pairs if llm else [],
        text,
        llm and facts_stated(asked.question, text),
        asked.latency_s,
        *tokens,
    )


def judge_all(judge: Judge, scored: Sequence[Scored]) -> None:
    """Fill ``supported`` per pair: the judge's yes and the lexical check."""
    for s in scored:
        s.supported = supported(judge, s.pairs)


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "–"


# What must never reach a shown sentence: reasoning tags, chat tokens, citation
# markers left in the text, a "Sources:" footer.
MARKUP = re.compile(
    r"<\s*/?\s*(?:think|thinking|reasoning)\b|<\|[a-z_]+\|>|\[\s*\^?\d+\s*\]|"
    r"(?m:^\s*(?:sources?|references?)\s*:)",
    re.IGNORECASE,
)
DEADLINE_S = 20.0  # the shipped ANCHORED_DEADLINE_S


def row(name: str, verifier: str, scored: Sequence[Scored]) -> str:
    ans = [s for s in scored if s.answerable]
    unans = [s for s in scored if not s.answerable]
    answered = sum(not s.abstained for s in ans)
    refused = sum(s.abstained for s in unans)
    written = sum(s.written for s in scored)
    kept = sum(s.kept for s in scored)
    judged = [v for s in scored for v in s.supported if v is not None]
    facts = sum(s.fact for s in ans)
    lat = [s.latency_s for s in scored]
    fell = sum(bool(s.fell_back) for s in scored)
    latency = f"{statistics.median(lat):.0f}" if lat else "–"
    tokens_in = f"{statistics.mean(s.input_tokens for s in scored):.0f}" if scored else "–"
    tokens_out = f"{statistics.mean(s.output_tokens for s in scored):.0f}" if scored else "–"
    markup = sum(1 for s in scored if MARKUP.search(s.text))
    in_time = sum(1 for s in lat if s <= DEADLINE_S)
    cells = [
        name,
        verifier,
        str(len(scored)),
        f"{answered}/{len(ans)} ({pct(answered, len(ans))})",
        f"{refused}/{len(unans)} ({pct(refused, len(unans))})",
        f"{kept}/{written} ({pct(kept, written)})",
        f"{pct(sum(judged), len(judged))} ({len(judged)})",
        f"{facts}/{len(ans)} ({pct(facts, len(ans))})",
        str(fell),
        str(markup),
        latency,
        f"{in_time}/{len(lat)}",
        tokens_in,
        tokens_out,
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| set | verifier | n | answered | refused | kept | cit. prec. (pairs) | fact | fell back "
    "| markup | p50 s | ≤20 s | in tok | out tok |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)
BEFORE = (
    "| anchored (issue #9, before) | today | 15 | 5/13 (38%) | – | 5/78 (6%) | – | – | – "
    "| – | – | – | – | – |"
)
