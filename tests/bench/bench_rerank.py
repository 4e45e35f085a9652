"""Does a reranking step pay for the no-LLM answer? Measured with the one reranker we can ship.

    python tests/bench/bench_rerank.py [--split dev|test|all] [--weights 0 0.7 1.4]

A cross-encoder or an extractive-QA model would read each candidate line with the
question. No package on the registry ships such weights: the reranker packages
(flashrank, swiftrank, lmem, small-hybrid-reranker, …) fetch theirs from a model hub
at run time, which the query function must not do, and the others ship code, an
embedder (all-MiniLM-L6-v2 again) or unrelated models (checked 2026-12-02 by
downloading and listing about 50 wheels; see ``site/benchmarks.md``).

What can be shipped is *late interaction* with the embedder we already have: the
MiniLM graph outputs one vector per token before pooling, so a (question, line)
pair can be scored ColBERT-style, the mean over the question's tokens of each
token's best cosine to a token of the line (MaxSim). It is added to the unit score
of :mod:`anchored_query.answer.extractive` as a second meaning term, ``weight`` times its
value mapped to [0, 1] between :data:`LOW` and :data:`HIGH`, for the units the
answerer already embeds; weight 0 is the answerer as shipped. Per weight and
realdocs set: answered, unanswerable refused, fact in the answer, first citation
right, and the CPU time of retrieval plus answer (the extra model pass included;
sharing the answerer's own pass would make it nearly free, so the CPU column is
an upper bound).

The patch of ``_add_semantic`` is this benchmark's experiment, not the product.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).parent))
import anchored_query.answer.extractive as extractive
from bench_extractive import (
    REALDOCS,
    Tally,
    after,
    history_of,
    index_of,
    load_retriever,
    load_set,
    pct,
    quantile,
    retrieve,
    score,
)

from build_index.embedder import Embedder

LOW, HIGH = 0.35, 0.75  # MaxSim of an unrelated line and of one that answers (MiniLM)
_MAX_TOKENS = 128


def token_vectors(embedder: Embedder, text: str) -> npt.NDArray[np.float32]:
    """The text's token vectors (special tokens dropped), each of length 1."""
    ids = embedder._tokenizer.encode(text, add_special_tokens=True).ids[:_MAX_TOKENS]
    feeds: dict[str, npt.NDArray[np.int64]] = {"input_ids": np.array([ids], dtype=np.int64)}
    if "attention_mask" in embedder._inputs:
        feeds["attention_mask"] = np.ones((1, len(ids)), dtype=np.int64)
    if "token_type_ids" in embedder._inputs:
        feeds["token_type_ids"] = np.zeros((1, len(ids)), dtype=np.int64)
    hidden = np.asarray(embedder._session.run([embedder._output], feeds)[0][0], dtype=np.float32)
    hidden = hidden[1:-1] if len(hidden) > 2 else hidden
    return hidden / np.maximum(np.linalg.norm(hidden, axis=1, keepdims=True), 1e-12)


def maxsim(question: npt.NDArray[np.float32], line: npt.NDArray[np.float32]) -> float:
    return float((question @ line.T).max(axis=1).mean())


def patch(weight: float) -> None:
    """Add the MaxSim term to the units the answerer embeds (weight 0: as shipped)."""
    original = extractive._original_add_semantic  # type: ignore[attr-defined]

    def add_semantic(question: str, scored: Any, sections: Any, embedder: Any, *rest: Any) -> Any:
        out = original(question, scored, sections, embedder, *rest)
        if weight and isinstance(embedder, Embedder):
            q = token_vectors(embedder, question)
            for c in scored:
                if c.cosine is None:
                    continue
                text = extractive._embedding_text(c, sections[c.section])
                value = maxsim(q, token_vectors(embedder, text))
                add = weight * max(0.0, (value - LOW) / (HIGH - LOW))
                c.own += add
                c.score += add * c.factor
        return out

    extractive._add_semantic = add_semantic  # type: ignore[assignment]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--split", default="dev", choices=("dev", "test", "all"))
    p.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.7, 1.4])
    p.add_argument("--work", default="/tmp/anchored-bench/extractive")
    args = p.parse_args()
    extractive._original_add_semantic = extractive._add_semantic  # type: ignore[attr-defined]
    lines = [
        "| set | questions | MaxSim weight | answered | refused | fact | first citation "
        "| CPU p50 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for site in REALDOCS:
        name = f"realdocs:{site}"
        retriever, model = load_retriever(index_of(name, Path(args.work)))
        rows = load_set(name, args.split)
        retriever.rank(["warm up"])
        for weight in args.weights:
            patch(weight)
            tally = Tally()
            for row in rows:
                c0 = time.process_time()
                passages, hits = retrieve(retriever, row["question"], history_of(row))
                payload = after(row, passages, hits, retriever, model)
                tally.cpu.append((time.process_time() - c0) * 1000)
                score(row, payload, tally)
            lines.append(
                f"| {site} | {len(rows)} | {weight:g} | {pct(tally.answered, tally.answerable)} "
                f"| {pct(tally.refused, tally.unanswerable)} "
                f"| {pct(tally.fact_hits, tally.with_facts)} "
                f"| {pct(tally.gold_first, tally.answered)} | {quantile(tally.cpu, 0.5):.0f} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    print(f"\nsplit: {args.split}\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
