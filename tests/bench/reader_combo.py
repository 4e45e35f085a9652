"""Does a reader add to today's refusal evidence? Question-level, every site held out.

    python tests/bench/bench_reader.py --reader A --fold material,anchored,uvicorn=A \\
        --sites material anchored uvicorn --dump a.jsonl     # and the other fold → b.jsonl
    python tests/bench/reader_combo.py a.jsonl b.jsonl

Each line of the dumps is one question: its site, whether the docs answer it, today's
probability that they do (the shipped refusal model, ``_confidence``) and the reader's
best P(answers) over the answerer's passages, read by a model that never saw the site.
Per site, a two-feature logistic regression (the two log-odds,
:func:`reader_features.fit`) is fitted on the other development sites'
questions and scored on the site's: ROC AUC of answerable against near misses for today,
the reader alone and the two together, and the share of answerable questions still
answered where 90% of near misses are refused. The never-tuned set (uvicorn) is scored,
never fitted on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from reader_features import auc, fit, score

NEVER_TUNED = ("uvicorn",)


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    result: np.ndarray = np.log(p / (1 - p))
    return result


def answered_at_refusal(score: np.ndarray, y: np.ndarray, refused: float = 0.9) -> float:
    """Share of answerable questions above the threshold that refuses ``refused`` of the
    near misses."""
    negatives = np.sort(score[y == 0])
    if not len(negatives):
        return float("nan")
    cut = negatives[min(len(negatives) - 1, int(np.ceil(refused * len(negatives))) - 1)]
    return float((score[y == 1] > cut).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dumps", nargs="+", type=Path)
    args = ap.parse_args()
    rows = [
        json.loads(line)
        for path in args.dumps
        for line in path.read_text("utf-8").splitlines()
        if line.strip()
    ]
    rows = [r for r in rows if r.get("today") is not None]
    sites = sorted({r["site"] for r in rows})
    x = {s: np.array([[r["today"], r["reader"]] for r in rows if r["site"] == s]) for s in sites}
    y = {s: np.array([float(r["answerable"]) for r in rows if r["site"] == s]) for s in sites}
    feats = {s: logit(v) for s, v in x.items()}
    print("| site | questions | AUC today | reader | both | answered, 90% refused: today → both |")
    print("|---|---|---|---|---|---|")
    for site in sites:
        fit_on = [s for s in sites if s != site and s not in NEVER_TUNED]
        if not fit_on:
            continue
        weights = fit(
            np.concatenate([feats[s] for s in fit_on]), np.concatenate([y[s] for s in fit_on])
        )
        both = score(weights, feats[site])
        today, reader = feats[site][:, 0], feats[site][:, 1]
        print(
            f"| {site} | {len(y[site])} | {auc(today, y[site]):.3f} | {auc(reader, y[site]):.3f} "
            f"| {auc(both, y[site]):.3f} | {answered_at_refusal(today, y[site]):.0%} → "
            f"{answered_at_refusal(both, y[site]):.0%} |"
        )


if __name__ == "__main__":
    main()
