"""Calibrate when the extractive answerer abstains, across corpora.

    python tests/bench/calibrate_abstention.py [--work DIR] [--scifact-index DIR]
        [--claims 100] [--max-false-answer-rate 0.1] [--check anchored-docs]

The query function answers extractively only when both signals clear their
bar: the answerer's blended confidence (its best sentence's term coverage and
semantic similarity, ``answer_extractively(...).confidence``) must reach
``BLENDED_MIN_SCORE``, and the question's best cosine to a chunk in scope
(``Ranking.best_similarity``) must reach the model's ``RELEVANCE_FLOOR``.

Questions come from the development sets of ``bench_extractive.py`` (skylark,
fixture, pkgdocs: answerable questions, and unanswerable ones — near misses on
the corpus's own topic and off-topic ones), and from BEIR SciFact rendered as a
site (the index ``bench_retrieval.py`` builds) for swapped questions: SciFact
claims asked of each development corpus, and every development question asked
of SciFact, have no answer there. Each is retrieved and answered as the query
function does (``min_score=0``, so the confidence is always reported).

The pair (floor, threshold) is chosen on a grid: for each floor, the lowest
threshold at which at most ``--max-false-answer-rate`` of the unanswerable
questions get an answer, in each family separately (unanswerable questions in
their own corpus; swapped questions); of those pairs, the one that answers the
most answerable development questions (ties: fewer false answers, then the
higher floor). ``--check`` sets are only reported, never used to choose: the
held-out check is this project's own docs (``anchored-docs``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from anchored_query.engine import RELEVANCE_FLOOR
from anchored_query.extractive import BLENDED_MIN_SCORE, answer_extractively
from beir_site import DEFAULT_BEIR, load_qrels, load_queries
from bench_extractive import DEV_SETS, build_corpus, load_retriever, load_set, retrieve


@dataclass
class Group:
    """Questions asked of one corpus, with both signals per question."""

    name: str
    answerable: bool
    family: str  # "answerable", "unanswerable" (own corpus) or "swapped"
    used: bool  # chooses the thresholds (False: --check sets and SciFact's claims)
    signals: list[tuple[float, float]]  # (confidence, best similarity)


def signals(index: Path, questions: Sequence[str]) -> list[tuple[float, float]]:
    retriever, model = load_retriever(index)
    out = []
    for q in questions:
        passages, similarity, vector = retrieve(retriever, q)
        result = answer_extractively(
            q,
            passages,
            min_score=0.0,
            embedder=retriever.embedder,
            model=model,
            question_vector=vector,
        )
        out.append((result.confidence, similarity))
    return out


def answered(values: list[tuple[float, float]], threshold: float, floor: float) -> int:
    return sum(c >= threshold and s >= floor for c, s in values)


def choose(groups: list[Group], rate: float) -> tuple[float, float]:
    """(threshold, floor): see the module docstring."""
    positives = [v for g in groups if g.used and g.family == "answerable" for v in g.signals]
    families = {
        f: [v for g in groups if g.used and g.family == f for v in g.signals]
        for f in ("unanswerable", "swapped")
    }
    best: tuple[int, int, float, float, float] | None = None
    for step in range(0, 61):
        floor = step / 100
        threshold = 0.0
        for values in families.values():
            passing = sorted((c for c, s in values if s >= floor), reverse=True)
            allowed = int(rate * len(values))
            if len(passing) > allowed:
                threshold = max(threshold, round(passing[allowed] + 1e-4, 4))
        hits = answered(positives, threshold, floor)
        false = sum(answered(v, threshold, floor) for v in families.values())
        key = (hits, -false, floor, threshold, floor)
        if best is None or key[:3] > best[:3]:
            best = key
    assert best is not None
    return best[3], best[4]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", default="/tmp/anchored-bench/extractive")
    p.add_argument("--scifact-index", default="/tmp/anchored-bench/scifact/.anchored/index")
    p.add_argument("--beir", default=str(DEFAULT_BEIR))
    p.add_argument("--claims", type=int, default=100)
    p.add_argument("--max-false-answer-rate", type=float, default=0.1)
    p.add_argument("--check", default="anchored-docs", help="held-out sets, comma-separated")
    args = p.parse_args()

    work = Path(args.work)
    beir = Path(args.beir)
    queries = load_queries(beir)
    claims = [queries[q] for q in sorted(load_qrels(beir)) if q in queries][: args.claims]
    scifact = Path(args.scifact_index)
    if not (scifact / "manifest.json").exists():
        raise SystemExit(f"no SciFact index at {scifact}: run bench_retrieval.py first")

    groups: list[Group] = []
    checks = [s for s in args.check.split(",") if s]
    for name in (*DEV_SETS, *checks):
        used = name in DEV_SETS
        index = build_corpus(name, work)
        rows = load_set(name)
        ok = [r["question"] for r in rows if r["answerable"]]
        no = [r["question"] for r in rows if not r["answerable"]]
        every = [r["question"] for r in rows]
        groups += [
            Group(f"{name}: answerable", True, "answerable", used, signals(index, ok)),
            Group(f"{name}: unanswerable", False, "unanswerable", used, signals(index, no)),
            Group(f"{name}: SciFact claims", False, "swapped", used, signals(index, claims)),
            Group(f"SciFact: {name} questions", False, "swapped", used, signals(scifact, every)),
        ]
    groups.append(Group("SciFact: claims", True, "answerable", False, signals(scifact, claims)))

    threshold, floor = choose(groups, args.max_false_answer_rate)
    model = "all-MiniLM-L6-v2"
    in_use = (BLENDED_MIN_SCORE, RELEVANCE_FLOOR.get(model, 0.0))
    print(
        f"\nchosen: confidence >= {threshold:.3f} and similarity >= {floor:.2f} "
        f"(at most {args.max_false_answer_rate:.0%} of each family of unanswerable "
        f"development questions answered); in use: {in_use[0]:.3f} and {in_use[1]:.2f}\n"
    )
    print(
        "| questions | used | n | median confidence | median similarity "
        "| answered: in use | answered: chosen |"
    )
    print("|---|---|---|---|---|---|---|")
    for g in groups:
        n = len(g.signals)
        conf = statistics.median(c for c, _ in g.signals) if n else 0.0
        sim = statistics.median(s for _, s in g.signals) if n else 0.0
        now = answered(g.signals, *in_use)
        new = answered(g.signals, threshold, floor)
        print(
            f"| {g.name} | {'yes' if g.used else 'no'} | {n} | {conf:.2f} | {sim:.2f} "
            f"| {now / n if n else 0:.0%} | {new / n if n else 0:.0%} |"
        )


if __name__ == "__main__":
    main()
