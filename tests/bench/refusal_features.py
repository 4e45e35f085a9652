"""Does any more evidence of today's models tell a near miss from an answerable question?

    python tests/bench/refusal_features.py [--sites mkdocs httpx material anchored]

Issue 26's premise is that retrieval evidence is spent: refusal ranks answerable
questions above near misses at ROC AUC about 0.88, and telling them apart takes a
model that reads the question with the passage. Before training one, this checks
three more kinds of evidence that need no new model, each with a reason to work:

- **a missing term** (``gap``, ``missing``): the weight (IDF times the word prior, as the
  quote weighs terms) of the most specific question term the quoted section lacks, and
  the weight of all it lacks, as shares of the question's. A near miss ("gzip the
  *request* body", "a *PAC* file") often names one thing the closest section never says;
- **the topic taken out** (``residual``): the cosine of question and best chunk after
  both lose their component along the mean of the 20 best chunks: what they share
  beyond the topic every candidate shares;
- **token by token** (``maxsim``, ``weakest``): the embedder's contextual token vectors
  (the ONNX graph's output before pooling): for each question word, its best cosine to
  a token of the quoted section; their weighted mean, and the weakest of the words that
  weigh at least half the heaviest. A word the passage never addresses scores low.

For each development site (never uvicorn, the set no decision is tuned on) the
questions are answered as ``/v1/ask`` does, with ``min_confidence=0``; printed per
site: each feature's ROC AUC alone (answerable above near misses; under 0.5 means
lower is answerable), then a logistic regression of the shipped probability's logit
plus one feature, fitted on the other sites and scored on the one left out, beside the
logit alone. Takes about 4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).parent))
from anchored_query.answer.extractive import answer_extractively
from anchored_query.answer.quote_window import read_sections
from anchored_query.question.analysis import Question
from anchored_query.question.question_terms import question_weights
from anchored_query.question.word_prior import word_prior
from bench_extractive import history_of, index_of, load_retriever, load_set, retrieve
from calibrate_abstention import fit_logistic
from reader_features import auc

from build_index.tokenizer import tokenize

SITES = ("mkdocs", "httpx", "material", "anchored")
NAMES = ("gap", "missing", "residual", "maxsim", "weakest")
_TOPIC = 20
_SECTION_CHARS = 1500  # the section's text read token by token (about 256 tokens)

Array = npt.NDArray[np.float64]


def token_vectors(embedder: Any, text: str, prefix: str) -> tuple[Any, npt.NDArray[np.float32]]:
    """The tokenizer's encoding of ``prefix + text`` and its normalised token vectors."""
    encoding = embedder._tokenizer.encode(prefix + text, add_special_tokens=True)
    ids = np.asarray(encoding.ids, dtype=np.int64)[None, :]
    feeds = {"input_ids": ids}
    if "attention_mask" in embedder._inputs:
        feeds["attention_mask"] = np.ones_like(ids)
    if "token_type_ids" in embedder._inputs:
        feeds["token_type_ids"] = np.zeros_like(ids)
    out = np.asarray(embedder._session.run([embedder._output], feeds)[0][0], dtype=np.float32)
    return encoding, out / (np.linalg.norm(out, axis=1, keepdims=True) + 1e-9)


def token_match(
    embedder: Any, question: str, weights: dict[str, float], passage: str
) -> tuple[float, float]:
    """(weighted mean, weakest heavy word) of each question word's best token cosine."""
    prefix = embedder.spec.query_prefix
    encoding, q = token_vectors(embedder, question, prefix)
    _, p = token_vectors(embedder, passage[:_SECTION_CHARS], embedder.spec.passage_prefix)
    best = (q @ p[1:-1].T).max(1) if len(p) > 2 else (q @ p.T).max(1)
    rows: dict[int, list[int]] = {}
    for i, word in enumerate(encoding.word_ids):
        if word is not None:
            rows.setdefault(word, []).append(i)
    scored = []
    for tokens in rows.values():
        start, end = encoding.offsets[tokens[0]][0], encoding.offsets[tokens[-1]][1]
        word = (prefix + question)[start:end]
        weight = max((weights.get(t, 0.0) for t in tokenize(word)), default=0.0)
        if weight > 0:
            scored.append((float(best[tokens].mean()), weight))
    if not scored:
        return 0.0, 0.0
    total = sum(w for _, w in scored)
    heaviest = max(w for _, w in scored)
    return (
        sum(m * w for m, w in scored) / total,
        min(m for m, w in scored if w >= 0.5 * heaviest),
    )


def residual_cosine(vectors: Array, q: Array) -> float:
    """Cosine of the question and the best chunk without their topic component."""
    dense = vectors @ q
    top = vectors[np.argsort(-dense)[:_TOPIC]]
    topic = top.mean(0)
    topic /= np.linalg.norm(topic)
    qr = q - (q @ topic) * topic
    cr = top[0] - (top[0] @ topic) * topic
    return float(qr @ cr / (np.linalg.norm(qr) * np.linalg.norm(cr) + 1e-9))


def site_rows(site: str, work: Path) -> list[dict[str, Any]]:
    """Each question's shipped probability (as a logit), label and the five features."""
    retriever, model = load_retriever(index_of(f"realdocs:{site}", work))
    index, embedder = retriever.index, retriever.embedder
    vectors = index.vectors.astype(np.float64) * index.scales[:, None]
    prior = word_prior(index.model_dir)
    out = []
    for row in load_set(f"realdocs:{site}", "all"):
        asked, history = str(row["question"]), history_of(row)
        passages, hits = retrieve(retriever, asked, history)
        question = hits.gloss or asked
        result = answer_extractively(
            question,
            passages,
            index=index,
            embedder=embedder,
            model=model,
            question_vector=hits.query_vector,
            similarity=hits.best_similarity,
            history=history,
            min_confidence=0.0,
            asked=asked if hits.gloss else "",
        )
        pool = [p for p in passages if not p.excluded]
        weights = question_weights(question, history, pool, index, prior, Question.of(asked))
        sections = read_sections(pool, index)
        quoted = result.quotes[0].passage.section_id if result.quotes else None
        section = next((s for s in sections if s.passage.section_id == quoted), sections[0])
        held = set(tokenize(section.text)) | section.heading_terms
        total = sum(weights.values()) or 1.0
        lacking = [w for t, w in weights.items() if t not in held]
        maxsim, weakest = token_match(embedder, question, weights, section.text)
        p = min(max(result.confidence, 1e-6), 1 - 1e-6)
        out.append(
            {
                "answerable": bool(row["answerable"]),
                "logit": math.log(p / (1 - p)),
                "gap": max(lacking, default=0.0) / total,
                "missing": sum(lacking) / total,
                "residual": residual_cosine(vectors, np.asarray(hits.query_vector, np.float64)),
                "maxsim": maxsim,
                "weakest": weakest,
            }
        )
    return out


def held_out_auc(rows: dict[str, list[dict[str, Any]]], names: tuple[str, ...]) -> list[float]:
    """Per site: AUC of a logistic regression over ``names`` fitted on the other sites."""
    out = []
    for site in rows:
        train = [r for s, rs in rows.items() if s != site for r in rs]
        x = np.array([[r[n] for n in names] for r in train])
        y = np.array([float(r["answerable"]) for r in train])
        w = np.where(y == 1, 0.5 / y.sum(), 0.5 / (1 - y).sum()) * len(y)
        beta = fit_logistic(x, y, w)
        z = beta[0] + np.array([[r[n] for n in names] for r in rows[site]]) @ beta[1:]
        out.append(auc(z, np.array([float(r["answerable"]) for r in rows[site]])))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sites", nargs="+", choices=SITES, default=list(SITES))
    p.add_argument("--work", type=Path, default=Path("/tmp/anchored-bench/extractive"))
    args = p.parse_args()
    rows = {site: site_rows(site, args.work) for site in args.sites}
    print("\nROC AUC, answerable above near misses, each feature alone:\n")
    print("| site | shipped logit | " + " | ".join(NAMES) + " |")
    print("|---|---|" + "---|" * len(NAMES))
    for site, rs in rows.items():
        y = np.array([float(r["answerable"]) for r in rs])
        cells = [auc(np.array([r[n] for r in rs]), y) for n in ("logit", *NAMES)]
        print(f"| {site} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    print("\nThe shipped logit plus one feature, fitted on the other sites (site left out):\n")
    print("| features | " + " | ".join(rows) + " | mean |")
    print("|---|" + "---|" * (len(rows) + 1))
    for names in [("logit",), *(("logit", n) for n in NAMES)]:
        aucs = held_out_auc(rows, names)
        shown = " | ".join(f"{a:.3f}" for a in aucs)
        print(f"| {' + '.join(names)} | {shown} | {np.mean(aucs):.3f} |")


if __name__ == "__main__":
    main()
