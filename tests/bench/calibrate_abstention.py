"""Calibrate the extractive answerer's abstention threshold on unanswerable questions.

    python tests/bench/calibrate_abstention.py [--docs-index DIR] [--scifact-index DIR]

Two corpora, and questions that have an answer in one and none in the other:

- this project's docs (`site/`, indexed here unless --docs-index is given) with
  the hand-written set `tests/bench/data/anchored-docs-questions.jsonl`
  (answerable questions with gold sections, and off-topic questions);
- BEIR SciFact rendered as a site (the index bench_retrieval.py builds), with
  its test claims as answerable questions; every docs question is unanswerable
  there, and every SciFact claim is unanswerable against the docs.

Each question is retrieved as the query function does and answered with
`min_score=0`; the best sentence's confidence is recorded. The threshold is
the lowest one that answers at most 10% of the unanswerable questions; the
table shows what each threshold costs in false abstentions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from anchored_query.engine import EXTRACTIVE_PASSAGES, RELEVANCE_FLOOR
from anchored_query.extractive import (
    DEFAULT_MIN_SCORE,
    answer_extractively,
    choose_threshold,
)
from anchored_query.prompt import estimate_tokens
from anchored_query.retrieval import Retriever
from beir_site import DEFAULT_BEIR, REPO, load_qrels, load_queries

from build_index.embedder import Embedder, ModelSpec
from build_index.index_format import read_index

QUESTIONS = Path(__file__).parent / "data" / "anchored-docs-questions.jsonl"


def docs_index() -> Path:
    work = Path(tempfile.mkdtemp(prefix="anchored-calib-"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "-q",
            "-f",
            str(REPO / "mkdocs.yml"),
            "-d",
            str(work / "site"),
        ],
        check=True,
        cwd=REPO,
    )
    return REPO / ".anchored" / "index"


Signals = list[tuple[float, float]]  # (term coverage, best similarity) per question


def confidences(index: Path, questions: list[str]) -> Signals:
    """Both abstention signals for each question, retrieved as the engine does."""
    idx = read_index(index)
    retriever = Retriever(idx, Embedder(ModelSpec.from_dir(idx.model_dir)))
    out = []
    for q in questions:
        hits = retriever.rank([q])
        passages = retriever.passages(
            hits,
            token_budget=4000,
            max_passages=EXTRACTIVE_PASSAGES,
            estimate_tokens=estimate_tokens,
        )
        coverage = answer_extractively(q, passages, min_score=0.0).confidence
        out.append((coverage, hits.best_similarity))
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--docs-index", default=None)
    p.add_argument("--scifact-index", default="/tmp/anchored-bench/scifact/.anchored/index")
    p.add_argument("--beir", default=str(DEFAULT_BEIR))
    p.add_argument("--claims", type=int, default=100)
    p.add_argument("--max-false-answer-rate", type=float, default=0.1)
    args = p.parse_args()

    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    docs_q = [r["question"] for r in rows]
    answerable = [r["question"] for r in rows if r["answerable"]]
    off_topic = [r["question"] for r in rows if not r["answerable"]]
    beir = Path(args.beir)
    queries = load_queries(beir)
    claims = [queries[q] for q in sorted(load_qrels(beir)) if q in queries][: args.claims]

    d_index = Path(args.docs_index) if args.docs_index else docs_index()
    s_index = Path(args.scifact_index)
    groups = {
        "docs: answerable": (
            confidences(d_index, answerable),
            True,
        ),
        "docs: off-topic": (
            confidences(d_index, off_topic),
            False,
        ),
        "docs: SciFact claims": (confidences(d_index, claims), False),
        "SciFact: claims": (confidences(s_index, claims), True),
        "SciFact: docs questions": (confidences(s_index, docs_q), False),
    }
    floor = choose_threshold(
        [(sim, ok) for values, ok in groups.values() for _, sim in values],
        max_false_answer_rate=args.max_false_answer_rate,
    )
    current = RELEVANCE_FLOOR.get(read_index(d_index).manifest["model"]["name"], 0.0)

    def rate(values: Signals, coverage: float, similarity: float) -> str:
        answered = sum(c >= coverage and s >= similarity for c, s in values)
        return f"{answered / len(values):.0%}" if values else "-"

    print(
        f"\nsimilarity floor chosen: {floor:.3f} (at most {args.max_false_answer_rate:.0%} of "
        f"unanswerable questions pass it); in use: {current:.3f}; "
        f"term-coverage threshold: {DEFAULT_MIN_SCORE:.2f}\n"
    )
    print(
        "| questions | n | median coverage | median similarity | answered: coverage only "
        "| answered: coverage + floor in use |"
    )
    print("|---|---|---|---|---|---|")
    for name, (values, _) in groups.items():
        cov = sorted(c for c, _ in values)[len(values) // 2] if values else 0.0
        sim = sorted(s for _, s in values)[len(values) // 2] if values else 0.0
        print(
            f"| {name} | {len(values)} | {cov:.2f} | {sim:.2f} "
            f"| {rate(values, DEFAULT_MIN_SCORE, 0.0)} "
            f"| {rate(values, DEFAULT_MIN_SCORE, current)} |"
        )


if __name__ == "__main__":
    main()
