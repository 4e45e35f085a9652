"""``anchored eval``: retrieval and citation metrics for a question set.

Question lines: ``{"qid", "question", "gold_refs": ["page/#anchor", …], "answerable"}``.
Run lines (``--out``): ``{"qid", "ranked": [...up to 100], "cited": [...], "abstained"}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from anchored_query.validation import AskRequest

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
