"""The citation-precision judge of the LLM benchmark, and its validation.

A *pair* is a sentence shown to the reader and one passage it cites. A pair is
counted as supported when the local model, asked with a fixed rubric, says the
passage states the sentence **and** the lexical check passes (every checkable
token of the sentence — inline code, numbers, dotted or underscored identifiers —
occurs in the passage). Two judges:

- ``pair`` (the default, since 2026-12-01): one call per pair, the rubric in
  :data:`PAIR_RUBRIC` (instructions first: the server reuses their cached prefix),
  the passage cut to the :data:`EXCERPT_CHARS` characters of its lines that share
  most words with the sentence (in page order), reply "yes"/"no" (temperature 0,
  3 tokens).
- ``batch`` (the first judge): one call per answer, all its pairs at once with
  lettered passages cut to their first 600 characters (:data:`BATCH_RUBRIC`).

:func:`agreement` scores a judge against hand labels, so its own error is known
(precision figures are only as good as that agreement):
``tests/bench/data/llm-judge-labels.jsonl`` holds pairs shown by real answers,
labelled by reading the passage (see its ``note`` fields);
``tests/fixtures/support-labels.jsonl`` holds the support checks' pairs, half of
them plausible unsupported claims.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchored_query.errors import LLMError
from anchored_query.llm import ChatMessage
from llm_replies import CachingClient

__all__ = ["LABELS", "BatchJudge", "Judge", "Pair", "PairJudge", "agreement", "lexical_ok"]

LABELS = Path(__file__).resolve().parent / "data" / "llm-judge-labels.jsonl"
# The support checks' own labelled pairs (plausible unsupported claims on the passage's topic).
SUPPORT_LABELS = Path(__file__).resolve().parents[1] / "fixtures" / "support-labels.jsonl"

_CHECKABLE = re.compile(r"`([^`]+)`|(\d[\d.,:]*\d|\d)|\b([A-Za-z_][\w]*[_.][\w.]*\w)\b")


@dataclass(frozen=True)
class Pair:
    """A shown sentence and one passage it cites."""

    sentence: str
    passage: str


def lexical_ok(pair: Pair) -> bool:
    """Every checkable token of the sentence (inline code, numbers, dotted or
    underscored identifiers) occurs in the passage (case and spacing aside)."""
    haystack = " ".join(pair.passage.casefold().split())
    for match in _CHECKABLE.finditer(pair.sentence):
        token = " ".join((match.group(1) or match.group(2) or match.group(3)).casefold().split())
        if token and token not in haystack:
            return False
    return True


class Judge:
    """yes/no per pair (None: the judge gave no verdict for it)."""

    name = "judge"

    def __init__(self, base_url: str, *, offline: bool, model: str) -> None:
        self.client = CachingClient(base_url, model, offline=offline)

    def verdicts(self, pairs: Sequence[Pair]) -> dict[Pair, bool | None]:
        raise NotImplementedError


SYSTEM = "You check whether documentation passages support statements. You answer tersely."

# ---------------------------------------------------------------- one call per pair

PAIR_RUBRIC = """\
Decide whether the passage below states what the statement says. Answer "yes" only if \
every fact of the statement (names, values, numbers, options, what is paired with what) \
is in the passage; rewording is fine. Answer "no" if the statement adds something the \
passage does not say, contradicts it, or pairs a value with the wrong thing. Judge only \
by the passage, not by what you know.

Passage:
\"\"\"
{passage}
\"\"\"

Statement: {sentence}

Answer with one word, yes or no:"""
EXCERPT_CHARS = 900
_WORD = re.compile(r"[A-Za-z0-9_\-.]{2,}|[\u3400-\u9fff]")
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def excerpt(passage: str, sentence: str, limit: int = EXCERPT_CHARS) -> str:
    """The passage, or when longer than ``limit`` its lines sharing most words with
    the sentence (whole lines, kept in page order, with "…" where lines were left out)."""
    text = passage.strip()
    if len(text) <= limit:
        return text
    words = {w.casefold().strip(".-") for w in _WORD.findall(sentence)}
    lines = [line for line in text.split("\n") if line.strip()]
    ranked = sorted(
        range(len(lines)),
        key=lambda i: (
            -len(words & {w.casefold().strip(".-") for w in _WORD.findall(lines[i])}),
            i,
        ),
    )
    chosen: set[int] = set()
    used = 0
    for i in ranked:
        size = min(len(lines[i]), limit) + 1
        if used + size > limit and chosen:
            continue
        chosen.add(i)
        used += size
    out: list[str] = []
    previous = -1
    for i in sorted(chosen):
        if i != previous + 1:
            out.append("…")
        out.append(lines[i][:limit])
        previous = i
    if previous != len(lines) - 1:
        out.append("…")
    return "\n".join(out)


class PairJudge(Judge):
    """One call per pair (:data:`PAIR_RUBRIC`)."""

    name = "pair"

    def verdicts(self, pairs: Sequence[Pair]) -> dict[Pair, bool | None]:
        return {pair: self._judge(pair) for pair in dict.fromkeys(pairs)}

    def _judge(self, pair: Pair) -> bool | None:
        prompt = PAIR_RUBRIC.format(
            passage=excerpt(pair.passage, pair.sentence), sentence=" ".join(pair.sentence.split())
        )
        messages = [ChatMessage("system", SYSTEM), ChatMessage("user", prompt)]
        try:
            text = self.client.complete(messages, max_tokens=3, temperature=0.0).text
        except LLMError as exc:
            print(f"[judge] failed: {exc.category}", flush=True)
            return None
        m = _YES_NO.search(text)
        return None if m is None else m.group(1).lower() == "yes"


# ---------------------------------------------------------------- one call per answer

BATCH_RUBRIC = """\
For each numbered statement below, decide whether the passage named in brackets \
supports it. "yes" means the passage states what the statement says: the same facts, \
names, numbers and values, with the same things paired (paraphrase is fine). "no" means \
the passage does not say it, says something different, or the statement adds a fact the \
passage lacks. Judge only against the named passage, not against what you know.

{passages}

Statements:
{claims}

Reply with one line per statement, "<number>: yes" or "<number>: no", and nothing else."""
BATCH_PASSAGE_CHARS = 600
BATCH_MAX_PASSAGES = 4
_BATCH_LINE = re.compile(r"(?m)^\s*\**\s*(\d+)\s*\**\s*[:.)\-]\s*\**\s*(yes|no)\b", re.IGNORECASE)


class BatchJudge(Judge):
    """The first judge: one call per answer, all its pairs at once (:data:`BATCH_RUBRIC`)."""

    name = "batch"

    def verdicts(self, pairs: Sequence[Pair]) -> dict[Pair, bool | None]:
        unique = list(dict.fromkeys(pairs))
        out: dict[Pair, bool | None] = {}
        # Passages in a call are capped (prompt length on 2 cores): split when needed.
        batches: list[list[Pair]] = [[]]
        for pair in unique:
            names = {p.passage for p in batches[-1]}
            if pair.passage not in names and len(names) >= BATCH_MAX_PASSAGES:
                batches.append([])
            batches[-1].append(pair)
        for batch in batches:
            if batch:
                out.update(self._judge(batch))
        return out

    def _judge(self, batch: list[Pair]) -> dict[Pair, bool | None]:
        letters: dict[str, str] = {}
        for pair in batch:
            letters.setdefault(pair.passage, chr(ord("A") + len(letters)))
        passages = "\n\n".join(
            f"Passage {letter}:\n{' '.join(text.split())[:BATCH_PASSAGE_CHARS]}"
            for text, letter in letters.items()
        )
        claims = "\n".join(
            f"{i}. [{letters[p.passage]}] {' '.join(p.sentence.split())}"
            for i, p in enumerate(batch, start=1)
        )
        prompt = BATCH_RUBRIC.format(passages=passages, claims=claims)
        messages = [ChatMessage("system", SYSTEM), ChatMessage("user", prompt)]
        try:
            text = self.client.complete(messages, max_tokens=8 * len(batch) + 16).text
        except LLMError as exc:
            print(f"[judge] failed: {exc.category}", flush=True)
            return dict.fromkeys(batch)
        said = {int(m.group(1)): m.group(2).lower() == "yes" for m in _BATCH_LINE.finditer(text)}
        return {p: said.get(i) for i, p in enumerate(batch, start=1)}


JUDGES: dict[str, type[Judge]] = {"pair": PairJudge, "batch": BatchJudge}


def supported(judge: Judge, pairs: Sequence[Pair]) -> list[bool | None]:
    """Per pair: the judge's yes and the lexical check (None: no verdict)."""
    verdicts = judge.verdicts(pairs)
    return [None if verdicts.get(p) is None else bool(verdicts[p]) and lexical_ok(p) for p in pairs]


def load_labels(path: Path = LABELS) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def agreement(judge: Judge, path: Path = LABELS) -> str:
    """How often the judge (with the lexical check) agrees with the hand labels of ``path``."""
    rows = load_labels(path)
    if not rows:
        return f"judge: no hand labels in {path.name}"
    said = supported(judge, [Pair(r["sentence"], r["passage"]) for r in rows])
    agree = tp = fp = fn = tn = none = 0
    for r, s in zip(rows, said, strict=True):
        truth = bool(r["supported"])
        none += s is None
        yes = bool(s)
        agree += yes == truth
        tp += yes and truth
        fp += yes and not truth
        fn += not yes and truth
        tn += not yes and not truth
    precision = f"{tp / (tp + fp):.2f}" if tp + fp else "–"
    return (
        f"{judge.name} judge vs {len(rows)} hand-labelled pairs ({path.name}): agreement "
        f"{100 * agree / len(rows):.0f}% (judge yes/label yes {tp}, yes/no {fp}, no/yes {fn}, "
        f"no/no {tn}; no verdict {none}); a yes is right {precision} of the time"
    )
