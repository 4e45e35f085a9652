"""Calibrate when the extractive answerer refuses, across corpora.

    python tests/bench/calibrate_abstention.py [--work DIR] [--max-false-answer-rate 0.1]
        [--swapped 12] [--dump FILE] [--load FILE] [--leave-one-out]

The answerer refuses when the probability that the docs answer
(``anchored_query.retrieval.evidence.probability_answerable``: a logistic model over
retrieval evidence) is under the model's threshold. This script fits that
model and chooses the threshold.

Questions: every corpus of ``bench_extractive.py`` — the realdocs sites
(MkDocs, HTTPX, Material for MkDocs, this project's docs; their ``dev``
questions fit, their ``test`` questions are only reported) and the older
development sets (skylark, fixture, pkgdocs, this project's docs as
``anchored-docs``; all fit) — in three families:

- answerable questions in their own corpus (label 1);
- unanswerable ones in their own corpus: near misses, the docs are silent
  (label 0);
- swapped: ``--swapped`` answerable questions of each corpus asked of every
  corpus of another topic (label 0). Corpora of one topic (MkDocs and its
  theme, this project's docs, the fixture sites, Skylark's docs site server)
  are not swapped with each other: their questions may well be answered there.

Each is retrieved and answered as the query function does (with
``min_confidence=0``, so the evidence is always reported). The logistic model
is fitted by Newton's method with a small L2 penalty, each family weighted
equally; the threshold is the lowest at which at most
``--max-false-answer-rate`` of each family of unanswerable fitting questions
get an answer. Printed: the coefficients and threshold to put into
``evidence.py``, and per group the share answered with them; with
``--leave-one-out``, per corpus the shares answered by a model fitted on the
other corpora only (does the fit transfer to a site it never saw?); with
``--curve``, for the shipped model (``evidence.COEFFICIENTS``) and the one just
fitted, how well the probability ranks the realdocs sites' answerable questions
above their near misses (ROC AUC) and the shares answered and refused at a range
of thresholds, per split: what any threshold can reach with this evidence.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from anchored_query.retrieval.evidence import COEFFICIENTS, FEATURES, THRESHOLDS
from anchored_query.retrieval.ranking import Retriever
from bench_extractive import (
    READER_SITES,
    REALDOCS,
    REALDOCS_OUT,
    decide,
    index_of,
    load_retriever,
    load_set,
)

CORPORA = (
    # uvicorn is the never-tuned set: nothing is fitted or chosen on it.
    *(f"realdocs:{s}" for s in REALDOCS if s != "uvicorn"),
    "skylark",
    "fixture",
    "pkgdocs",
    "anchored-docs",
)
TOPIC = {
    "realdocs:mkdocs": "mkdocs",
    "realdocs:material": "mkdocs",
    "realdocs:anchored": "mkdocs",
    "anchored-docs": "mkdocs",
    "fixture": "mkdocs",
    "realdocs:httpx": "httpx",
    # Skylark is a docs site server too: "Which themes are available?" or "How do I
    # make warnings fail the build?" are answerable on the MkDocs sites.
    "skylark": "mkdocs",
    "pkgdocs": "pkgdocs",
    "reader:mkdocs": "mkdocs",
    "reader:material": "mkdocs",
    "reader:anchored": "mkdocs",
    "reader:httpx": "httpx",
    # Starlette and HTTPX are one project's (encode); their topics differ (a server
    # framework, a client) but share words enough that neither is swapped to the other.
    "reader:starlette": "httpx",
    "reader:drf": "drf",
    "reader:hatch": "hatch",
}
READER = tuple(f"reader:{s}" for s in READER_SITES)


@dataclass
class Sample:
    corpus: str
    family: str  # answerable, unanswerable, swapped
    fit: bool
    x: list[float]
    qid: str


def collect(
    work: Path, swapped: int, embedding_model: str = "", reader: bool = False
) -> list[Sample]:
    corpora = [c for c in CORPORA if not embedding_model or c.startswith("realdocs:")]
    corpora += list(READER) if reader else []
    if embedding_model:
        root = REALDOCS_OUT / embedding_model
        corpora = [c for c in corpora if (root / c.split(":")[1] / "index/manifest.json").exists()]
    questions = {c: load_set(c) for c in corpora}
    out: list[Sample] = []
    for corpus in corpora:
        retriever, model = load_retriever(index_of(corpus, work, model=embedding_model))

        def evidence(
            row: dict[str, object], retriever: Retriever = retriever, model: str = model
        ) -> list[float]:
            result = decide(retriever, model, row)
            return result.evidence.vector() if result.evidence else [0.0] * len(FEATURES)

        for row in questions[corpus]:
            fit = row.get("split", "dev") == "dev"
            family = "answerable" if row["answerable"] else "unanswerable"
            out.append(Sample(corpus, family, fit, evidence(row), str(row["qid"])))
        for other in corpora:
            if TOPIC[other] == TOPIC[corpus]:
                continue
            rows = [r for r in questions[other] if r["answerable"] and not r.get("history")]
            for row in rows[:swapped]:
                fit = row.get("split", "dev") == "dev"
                x = evidence(row)
                out.append(Sample(corpus, "swapped", fit, x, f"{other}/{row['qid']}"))
        print(f"{corpus}: done", file=sys.stderr)
    return out


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = 0.01) -> np.ndarray:
    """Weighted L2-penalised logistic regression by Newton's method; intercept first."""
    a = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(a.shape[1])
    penalty = np.full(a.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-np.clip(a @ beta, -30, 30)))
        grad = a.T @ (w * (p - y)) + penalty * beta
        hess = (a * (w * p * (1 - p))[:, None]).T @ a + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def fit_model(fit: list[Sample], max_false_answer_rate: float) -> tuple[np.ndarray, float]:
    """The logistic model over ``fit`` and its threshold (see the module docstring)."""
    x = np.array([s.x for s in fit])
    y = np.array([1.0 if s.family == "answerable" else 0.0 for s in fit])
    counts = {f: sum(s.family == f for s in fit) for f in ("answerable", "unanswerable", "swapped")}
    # Answerable questions weigh as much as both families of unanswerable ones together.
    share = {"answerable": 0.5, "unanswerable": 0.25, "swapped": 0.25}
    w = np.array([share[s.family] * len(fit) / counts[s.family] for s in fit])
    beta = fit_logistic(x, y, w)
    prob = probability(beta, x)
    threshold = 0.0
    for family in ("unanswerable", "swapped"):
        values = sorted(
            (float(pr) for pr, s in zip(prob, fit, strict=True) if s.family == family), reverse=True
        )
        allowed = int(max_false_answer_rate * len(values))
        if len(values) > allowed:
            threshold = max(threshold, values[allowed] + 1e-4)
    return beta, threshold


def leave_one_out(fit: list[Sample], max_false_answer_rate: float) -> list[str]:
    """Transfer: per corpus, the model fitted without it (nor its swapped questions)
    and how it does there (answered share of each family)."""
    lines = ["| held-out corpus | answerable answered | unanswerable answered | swapped answered |"]
    lines.append("|---|---|---|---|")
    for corpus in sorted({s.corpus for s in fit}):

        def source(s: Sample) -> str:
            return s.qid.split("/")[0] if s.family == "swapped" else s.corpus

        train = [s for s in fit if s.corpus != corpus and source(s) != corpus]
        beta, threshold = fit_model(train, max_false_answer_rate)
        cells = []
        for family in ("answerable", "unanswerable", "swapped"):
            held = [s for s in fit if s.corpus == corpus and s.family == family]
            if not held:
                cells.append("-")
                continue
            p = probability(beta, np.array([s.x for s in held]))
            cells.append(f"{float(np.mean(p >= threshold)):.0%} of {len(held)}")
        lines.append(f"| {corpus} | " + " | ".join(cells) + " |")
    return lines


def curve(samples: list[Sample], beta: np.ndarray, label: str) -> list[str]:
    """ROC AUC and answered/refused shares by threshold, on the realdocs own questions."""
    lines = [f"\n{label}:\n", "| split | AUC | " + " | ".join(f"{t:.1f}" for t in _CURVE) + " |"]
    lines.append("|---|---|" + "---|" * len(_CURVE))
    for split, fit in (("dev", True), ("test", False)):
        yes = _probabilities(beta, _realdocs(samples, "answerable", fit))
        no = _probabilities(beta, _realdocs(samples, "unanswerable", fit))
        if not len(yes) or not len(no):
            continue
        auc = float(
            np.mean(yes[:, None] > no[None, :]) + 0.5 * np.mean(yes[:, None] == no[None, :])
        )
        cells = [f"{np.mean(yes >= t):.0%} / {np.mean(no < t):.0%}" for t in _CURVE]
        lines.append(
            f"| {split} ({len(yes)} / {len(no)}) | {auc:.3f} | " + " | ".join(cells) + " |"
        )
    return lines


_CURVE = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def _realdocs(samples: list[Sample], family: str, fit: bool) -> list[Sample]:
    """The realdocs sites' own questions of ``family`` in the fitting (dev) or test split."""
    return [
        s
        for s in samples
        if s.corpus.startswith("realdocs:") and s.family == family and s.fit == fit
    ]


def _probabilities(beta: np.ndarray, samples: list[Sample]) -> np.ndarray:
    return probability(beta, np.array([s.x for s in samples])) if samples else np.zeros(0)


def sure_threshold(samples: list[Sample], beta: np.ndarray, rate: float) -> float:
    """The lowest probability at which at most ``rate`` of the realdocs sites' near
    misses in development get an answer (``evidence.SURE``: under it an answer is
    labelled tentative)."""
    near = _realdocs(samples, "unanswerable", True)
    values = sorted(_probabilities(beta, near).tolist(), reverse=True)
    allowed = int(rate * len(values))
    return values[allowed] + 1e-4 if len(values) > allowed else 0.0


def tentative_shares(samples: list[Sample], beta: np.ndarray, low: float, sure: float) -> str:
    """Per split: of the realdocs answers given (probability >= ``low``), the share
    labelled tentative (under ``sure``), answerable questions and near misses apart."""
    cells = []
    for split, fit in (("dev", True), ("test", False)):
        for family in ("answerable", "unanswerable"):
            p = _probabilities(beta, _realdocs(samples, family, fit))
            answered = p[p >= low]
            share = f"{np.mean(answered < sure):.0%}" if len(answered) else "-"
            cells.append(f"{split} {family}: {share} of {len(answered)}")
    return "; ".join(cells)


def probability(beta: np.ndarray, x: np.ndarray) -> np.ndarray:
    z = beta[0] + x @ beta[1:]
    out: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", default="/tmp/anchored-bench/extractive")
    p.add_argument("--max-false-answer-rate", type=float, default=0.1)
    p.add_argument("--swapped", type=int, default=12)
    p.add_argument("--dump", default=None, help="write the samples to this JSON Lines file")
    p.add_argument("--load", default=None, help="read samples written by --dump")
    p.add_argument("--model", default="", help="the realdocs sites built with this model only")
    p.add_argument(
        "--leave-one-out", action="store_true", help="also fit without each corpus in turn"
    )
    p.add_argument("--curve", action="store_true", help="AUC and answered / refused by threshold")
    p.add_argument(
        "--reader-sets",
        action="store_true",
        help="also fit on the reader model's questions of seven sites (data/reader/)",
    )
    args = p.parse_args()

    if args.load:
        samples = [Sample(**json.loads(line)) for line in Path(args.load).read_text().splitlines()]
    else:
        samples = collect(Path(args.work), args.swapped, args.model, args.reader_sets)
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as f:
            for s in samples:
                f.write(json.dumps(s.__dict__) + "\n")

    fit = [s for s in samples if s.fit]
    beta, threshold = fit_model(fit, args.max_false_answer_rate)
    coefficients = ", ".join(f"{b:.3f}" for b in beta)
    print(f"\nfeatures: {', '.join(FEATURES)}")
    print(f"coefficients (intercept first): ({coefficients})")
    print(f"threshold: {threshold:.4f}\n")
    print("| corpus | family | fit | n | answered |")
    print("|---|---|---|---|---|")
    groups: dict[tuple[str, str, bool], list[float]] = {}
    for s in samples:
        pr = float(probability(beta, np.array([s.x]))[0])
        groups.setdefault((s.corpus, s.family, s.fit), []).append(pr)
    for (corpus, family, is_fit), values in sorted(groups.items()):
        answered = sum(v >= threshold for v in values) / len(values)
        used = "yes" if is_fit else "no"
        print(f"| {corpus} | {family} | {used} | {len(values)} | {answered:.0%} |")
    if args.leave_one_out:
        print("\nEach corpus left out of the fit:\n")
        print("\n".join(leave_one_out(fit, args.max_false_answer_rate)))
    if args.curve:
        shipped = np.array(COEFFICIENTS[args.model or "all-MiniLM-L6-v2"])
        print("\nAnswerable answered / unanswerable refused (realdocs sites) by threshold:")
        print("\n".join(curve(samples, shipped, "the shipped model (evidence.py)")))
        print("\n".join(curve(samples, beta, "the model fitted now")))
        name = args.model or "all-MiniLM-L6-v2"
        sure = sure_threshold(samples, shipped, args.max_false_answer_rate)
        print(f"\nsure threshold of the shipped model (evidence.SURE): {sure:.4f}")
        print(
            "answers labelled tentative: "
            + tentative_shares(samples, shipped, THRESHOLDS[name], sure)
        )


if __name__ == "__main__":
    main()
