"""``anchored eval``: retrieval and citation metrics for a question set.

Question lines: ``{"qid", "question", "gold_refs": ["page/#anchor", …], "answerable"}``.
Run lines (``--out``): ``{"qid", "ranked": [...up to 100], "cited": [...], "abstained"}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from anchored_query.question.validation import AskRequest

RANK_DEPTH = 100


@dataclass(frozen=True)
class Question:
    qid: str
    question: str
    gold_refs: tuple[str, ...]
    answerable: bool


class _Engine(Protocol):
    def current(self) -> Any: ...
    def ask(self, request: AskRequest) -> dict[str, Any]: ...


def load_questions(path: Path) -> list[Question]:
    """Read a question set; a bad line stops with its line number."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                out.append(
                    Question(
                        qid=str(row["qid"]),
                        question=str(row["question"]),
                        gold_refs=tuple(normalise_ref(r) for r in row.get("gold_refs", [])),
                        answerable=bool(row.get("answerable", True)),
                    )
                )
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a question line ({exc})") from None
    return out


def normalise_ref(ref: str) -> str:
    """``/page/#a`` and ``page/#a`` name the same place."""
    return ref.lstrip("/")


def ndcg_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, r in enumerate(ranked[:k]) if r in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal if ideal else 0.0


def recall_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def mrr_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    for i, r in enumerate(ranked[:k]):
        if r in gold:
            return 1.0 / (i + 1)
    return 0.0


def ranked_refs(engine: _Engine, question: str, depth: int = RANK_DEPTH) -> list[str]:
    """Section refs (``page#anchor``) in fused-rank order, each once."""
    loaded = engine.current()
    chunks = loaded.index.chunks
    refs: list[str] = []
    seen: set[str] = set()
    for hit in loaded.retriever.rank([question], depth=depth * 4):
        c = chunks[hit.row]
        ref = f"{c['page']}#{c['anchor']}" if c["anchor"] else c["page"]
        if ref not in seen:
            seen.add(ref)
            refs.append(ref)
            if len(refs) >= depth:
                break
    return refs


def evaluate(
    engine: _Engine,
    questions: Sequence[Question],
    *,
    out: Path | None = None,
    answers: bool = False,
) -> dict[str, float | int]:
    """Run every question; return the averaged metrics (and write a run file)."""
    sums = {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    judged = cited_ok = answered = 0
    unanswerable = abstained_right = false_abstain = 0
    lines = []
    for q in questions:
        ranked = ranked_refs(engine, q.question)
        gold = set(q.gold_refs)
        if q.answerable and gold:
            judged += 1
            sums["ndcg@10"] += ndcg_at(ranked, gold, 10)
            sums["recall@10"] += recall_at(ranked, gold, 10)
            sums["recall@100"] += recall_at(ranked, gold, 100)
            sums["mrr@10"] += mrr_at(ranked, gold, 10)
        cited: list[str] = []
        abstained = False
        if answers:
            result = engine.ask(AskRequest(question=q.question[:2000], mode="auto"))
            abstained = bool(result["abstained"])
            cited = [normalise_ref(c["url"]) for c in result["citations"]] if not abstained else []
            if q.answerable:
                answered += 1
                false_abstain += abstained
                cited_ok += bool(gold & set(cited))
            else:
                unanswerable += 1
                abstained_right += abstained
        lines.append({"qid": q.qid, "ranked": ranked, "cited": cited, "abstained": abstained})
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
    summary: dict[str, float | int] = {"questions": len(questions), "judged": judged}
    summary.update({k: (v / judged if judged else 0.0) for k, v in sums.items()})
    if answers:
        summary["citation_hit"] = cited_ok / answered if answered else 0.0
        summary["false_abstention"] = false_abstain / answered if answered else 0.0
        summary["abstention_unanswerable"] = abstained_right / unanswerable if unanswerable else 0.0
    return summary


# ------------------------------------------------------------------ the quality gate

# Threshold name -> (summary key, direction, needs answers). Shares are fractions 0-1.
GATES: dict[str, tuple[str, str, bool]] = {
    "min_recall_at_10": ("recall@10", "min", False),
    "min_recall_at_100": ("recall@100", "min", False),
    "min_ndcg": ("ndcg@10", "min", False),
    "min_mrr": ("mrr@10", "min", False),
    "max_false_refusals": ("false_abstention", "max", True),
    "min_answered": ("citation_hit", "min", True),
    "min_refusals_unanswerable": ("abstention_unanswerable", "min", True),
}


def gate_failures(summary: dict[str, float | int], thresholds: dict[str, float]) -> list[str]:
    """One line per threshold the summary misses ("" list: the gate passes)."""
    failures = []
    for name, limit in thresholds.items():
        key, direction, _ = GATES[name]
        value = float(summary.get(key, 0.0))
        if (direction == "min" and value < limit) or (direction == "max" and value > limit):
            word = "below" if direction == "min" else "above"
            failures.append(
                f"{key} {value:.4f} is {word} the {direction}imum {limit:g} "
                f"(--{name.replace('_', '-')})"
            )
    return failures


def golden_from_log(
    asks: Iterable[dict[str, Any]], labels: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Golden questions from logged asks an owner labelled.

    A label line names an ask by ``answer_id`` (or by the exact ``question``) and
    sets ``answerable`` (true/false) and, when true, ``gold_refs`` (the sections that
    answer it). A label whose ``answerable`` is unset or null (the labelling sheet's
    default) is not a label yet; unlabelled asks are left out.
    """
    by_id: dict[str, dict[str, Any]] = {}
    by_question: dict[str, dict[str, Any]] = {}
    for label in labels:
        if not isinstance(label.get("answerable"), bool):
            continue
        if label.get("answer_id"):
            by_id[str(label["answer_id"])] = label
        elif label.get("question"):
            by_question[str(label["question"]).strip()] = label
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for ask in asks:
        question = str(ask.get("question", "")).strip()
        found = by_id.get(str(ask.get("answer_id", ""))) or by_question.get(question)
        if found is None or question in seen:
            continue
        seen.add(question)
        refs = [normalise_ref(str(r)) for r in found.get("gold_refs", [])]
        answerable = bool(found["answerable"])
        out.append(
            {
                "qid": f"log-{str(ask.get('answer_id', ''))[:16] or len(out)}",
                "question": question,
                "gold_refs": refs if answerable else [],
                "answerable": answerable,
                "source": "question-log",
            }
        )
    return out


def labelling_sheet(asks: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Each logged question once, with its closest sections as suggested ``gold_refs`` and
    ``answerable`` left for the owner to fill in (``null``)."""
    seen: set[str] = set()
    for ask in asks:
        question = str(ask.get("question", "")).strip()
        if not question or question in seen:
            continue
        seen.add(question)
        yield {
            "answer_id": ask.get("answer_id", ""),
            "question": question,
            "abstained": bool(ask.get("abstained")),
            "gold_refs": [normalise_ref(str(r)) for r in ask.get("closest", [])][:3],
            "answerable": None,
        }
