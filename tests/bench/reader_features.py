"""Do cheap features of a (question, passage) pair tell an answer apart on a site never
seen? The reader model's baseline to beat (issue 26).

    python tests/bench/reader_features.py [--cache /tmp/anchored-bench/reader-features.npz]

The labelled pairs of ``data/reader/pairs-<site>.jsonl`` (a capable model's labels of
today's top-6 passages: *answers* / *on topic* / *unrelated*) get four features, all
available at run time without a new model:

- ``cos``: the embedder's cosine between the question (as a query) and the passage;
- ``best line``: the best cosine between the question and one line of the passage (its
  lines of three words or more, the first 40): the passage read a line at a time;
- ``lexical``: the share of the question's terms (the BM25 tokenizer's) the passage holds;
- ``1/rank``: retrieval's rank of the passage's section (7 for a section added as the
  question's source).

Each feature alone, and a logistic regression over all four fitted on the other four
sites, is scored on each site left out: ROC AUC of *answers* against the rest. The
features take about 7 minutes on 2 quiet cores (the lines are embedded); they are cached.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_extractive import load_retriever  # noqa: E402
from calibrate_abstention import fit_logistic  # noqa: E402
from reader_data import DATA, SITES  # noqa: E402
from realdocs import DEFAULT_OUT, build  # noqa: E402

from build_index.tokenizer import tokenize  # noqa: E402

NAMES = ("cos", "best line", "lexical", "1/rank")
MAX_LINES = 40
CACHE = Path("/tmp/anchored-bench/reader-features.npz")

Array = npt.NDArray[np.float64]


def pair_features(
    embedder: Any, question: str, passages: Sequence[str], ranks: Sequence[int]
) -> Array:
    """The four features of ``question`` with each passage (its section's rank given)."""
    q = embedder.embed_query(question)
    out = np.zeros((len(passages), len(NAMES)))
    if not passages:
        return out
    out[:, 0] = embedder.embed_passages(list(passages)) @ q
    for i, passage in enumerate(passages):
        lines = [x for x in passage.split("\n") if len(x.split()) >= 3][:MAX_LINES]
        out[i, 1] = float((embedder.embed_passages(lines or [passage]) @ q).max())
        asked = set(tokenize(question))
        out[i, 2] = len(asked & set(tokenize(passage))) / max(1, len(asked))
        out[i, 3] = 1.0 / (ranks[i] or 7)
    return out


def features(site: str, embedder: Any) -> tuple[Array, Array]:
    """(features, is-answer) of a site's labelled pairs."""
    rows = [json.loads(x) for x in (DATA / f"pairs-{site}.jsonl").read_text("utf-8").splitlines()]
    x = np.concatenate(
        [pair_features(embedder, r["question"], [r["passage"]], [r["rank"]]) for r in rows]
    )
    return x, np.array([r["label"] == "answers" for r in rows], dtype=float)


def auc(score: Array, label: Array) -> float:
    """ROC AUC (ties broken by order; the features are continuous)."""
    ranks = np.empty(len(score))
    ranks[np.argsort(score)] = np.arange(1, len(score) + 1)
    pos = label == 1
    n1, n0 = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def fit(x: Array, y: Array) -> Array:
    """:func:`calibrate_abstention.fit_logistic` (unweighted) on standardised features;
    returns the weights for :func:`score` (mean, scale, then intercept and coefficients)."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    beta = fit_logistic((x - mu) / sd, y, np.ones(len(y)))
    return np.concatenate([mu, sd, beta])


def score(weights: Array, x: Array) -> Array:
    k = x.shape[1]
    mu, sd, w = weights[:k], weights[k : 2 * k], weights[2 * k :]
    result: Array = np.c_[np.ones(len(x)), (x - mu) / sd] @ w
    return result


def load(cache: Path = CACHE) -> tuple[dict[str, Array], dict[str, Array]]:
    """The labelled pairs' features and labels of each site that has pairs (computed once,
    then cached; a site whose pairs are added later is computed then)."""
    sites = [s for s in SITES if (DATA / f"pairs-{s}.jsonl").exists()]
    x: dict[str, Array] = {}
    y: dict[str, Array] = {}
    if cache.exists():
        with np.load(cache) as saved:
            for s in sites:
                if f"{s}_x" in saved:
                    x[s], y[s] = saved[f"{s}_x"], saved[f"{s}_y"]
    missing = [s for s in sites if s not in x]
    if missing:
        index = build("mkdocs", DEFAULT_OUT, stale_ok=True) / "index"
        embedder = load_retriever(index)[0].embedder
        for site in missing:
            x[site], y[site] = features(site, embedder)
            print(f"{site}: {len(y[site])} pairs, {y[site].mean():.0%} answers", flush=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **{f"{s}_x": x[s] for s in x}, **{f"{s}_y": y[s] for s in y})
    return {s: x[s] for s in sites}, {s: y[s] for s in sites}


class FeatureReader:
    """``bench_reader``'s reader interface over the four features: P(answers) from the
    logistic regression fitted on the labelled pairs of every site but ``held_out``.
    The passages are read in rank order (the first is rank 1)."""

    def __init__(self, embedder: Any, held_out: str, cache: Path = CACHE) -> None:
        x, y = load(cache)
        others = [s for s in x if s != held_out]
        self.name = f"features (fitted without {held_out})"
        self.embedder = embedder
        self.weights = fit(
            np.concatenate([x[s] for s in others]), np.concatenate([y[s] for s in others])
        )

    def read(self, question: str, passages: Sequence[str]) -> Any:
        from reader_model import Reading

        ranks = list(range(1, len(passages) + 1))
        z = score(self.weights, pair_features(self.embedder, question, passages, ranks))
        p = 1 / (1 + np.exp(-z))
        return Reading(np.c_[p, np.zeros_like(p), 1 - p].astype(np.float32))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, default=CACHE)
    args = p.parse_args()
    x, y = load(args.cache)
    print("\nROC AUC of *answers* against the rest, on the site left out:\n")
    print("| site left out | " + " | ".join(NAMES) + " | logistic of the four, fitted elsewhere |")
    print("|---|" + "---|" * (len(NAMES) + 1))
    for held in x:
        others = [s for s in x if s != held]
        weights = fit(
            np.concatenate([x[s] for s in others]), np.concatenate([y[s] for s in others])
        )
        alone = [auc(x[held][:, j], y[held]) for j in range(len(NAMES))]
        both = auc(score(weights, x[held]), y[held])
        print(f"| {held} | " + " | ".join(f"{a:.3f}" for a in alone) + f" | **{both:.3f}** |")


if __name__ == "__main__":
    main()
