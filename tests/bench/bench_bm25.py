"""Benchmark Anchored's BM25 against bm25s on a BEIR dataset (default: SciFact).

    python tests/bench/bench_bm25.py [BEIR_DIR] [--k1 K1] [--b B]

``BEIR_DIR`` holds ``corpus.jsonl[.gz]``, ``queries.jsonl`` and the test qrels
(``qrels/test.tsv`` or ``qrels-test.tsv``); the default is
``../shared/data/scifact`` beside the repository. Both retrievers index
title + text in the same run, one process, one query at a time:

* Anchored: ``build_index.tokenizer.tokenize`` + ``BM25Index`` (Lucene BM25);
* bm25s: method "lucene", its English stopwords and the PyStemmer English
  stemmer when installed, its own defaults otherwise (k1=1.5, b=0.75).

Prints index time, median query latency (tokenize + top-100), nDCG@10 and
Recall@100 for both and their ratio, and the bytes per document of our BM25.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from build_index.bm25 import BM25Index  # noqa: E402
from build_index.tokenizer import tokenize  # noqa: E402

DEFAULT_DIR = REPO.parent / "shared" / "data" / "scifact"
DEPTH = 100

Qrels = dict[str, dict[str, int]]
Run = dict[str, list[str]]


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of ``path`` or of ``path.gz``."""
    if not path.exists() and path.with_suffix(path.suffix + ".gz").exists():
        path = path.with_suffix(path.suffix + ".gz")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def read_beir(root: Path) -> tuple[list[str], list[str], dict[str, str], Qrels]:
    """Document ids, document texts (title + text), test queries and qrels."""
    doc_ids, texts = [], []
    for row in read_jsonl(root / "corpus.jsonl"):
        doc_ids.append(str(row["_id"]))
        texts.append(f"{row.get('title', '')}\n{row.get('text', '')}")
    qrels_path = next(
        p for p in (root / "qrels" / "test.tsv", root / "qrels-test.tsv") if p.exists()
    )
    qrels: Qrels = defaultdict(dict)
    for line in qrels_path.read_text(encoding="utf-8").splitlines()[1:]:
        qid, did, score = line.split("\t")
        qrels[qid][did] = int(score)
    queries = {
        str(row["_id"]): row["text"]
        for row in read_jsonl(root / "queries.jsonl")
        if str(row["_id"]) in qrels
    }
    return doc_ids, texts, queries, qrels


def ndcg_at(run: Run, qrels: Qrels, k: int) -> float:
    """Mean nDCG@k with linear gains (as pytrec_eval / BEIR compute it)."""
    total = 0.0
    for qid, rels in qrels.items():
        ranked = run.get(qid, [])[:k]
        dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked))
        ideal = sorted(rels.values(), reverse=True)[:k]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        total += dcg / idcg if idcg > 0 else 0.0
    return total / len(qrels)


def recall_at(run: Run, qrels: Qrels, k: int) -> float:
    """Mean fraction of each query's relevant documents found in its top k."""
    total = 0.0
    for qid, rels in qrels.items():
        relevant = {d for d, g in rels.items() if g > 0}
        total += len(relevant & set(run.get(qid, [])[:k])) / len(relevant)
    return total / len(qrels)


def timed_run(
    queries: dict[str, str], search: Callable[[str], Sequence[int]], doc_ids: list[str]
) -> tuple[Run, float]:
    """The ranked documents per query and the median latency in ms."""
    search(next(iter(queries.values())))  # warm-up
    run: Run = {}
    latencies = []
    for qid, text in queries.items():
        start = time.perf_counter()
        rows = search(text)
        latencies.append(time.perf_counter() - start)
        run[qid] = [doc_ids[r] for r in rows]
    return run, statistics.median(latencies) * 1000


def bench_ours(
    doc_ids: list[str], texts: list[str], queries: dict[str, str], k1: float, b: float
) -> dict[str, Any]:
    start = time.perf_counter()
    index = BM25Index.build([tokenize(t) for t in texts], k1=k1, b=b)
    index_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        index.save(Path(tmp))
        disk = sum(p.stat().st_size for p in Path(tmp).iterdir())
        index = BM25Index.load(Path(tmp))  # query the memory-mapped files, as served
        run, p50 = timed_run(
            queries, lambda q: index.top_k(tokenize(q), DEPTH)[0].tolist(), doc_ids
        )
    return {
        "name": f"Anchored (k1={k1}, b={b})",
        "index_s": index_s,
        "p50_ms": p50,
        "run": run,
        "csr_bytes": index.nbytes,
        "disk_bytes": disk,
        "vocab": len(index.vocab),
    }


def bench_bm25s(doc_ids: list[str], texts: list[str], queries: dict[str, str]) -> dict[str, Any]:
    import bm25s

    try:
        import Stemmer

        stemmer: Any = Stemmer.Stemmer("english")
        label = "en stopwords + PyStemmer"
    except ImportError:
        stemmer, label = None, "en stopwords, no stemmer"
    start = time.perf_counter()
    corpus_tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(method="lucene")
    retriever.index(corpus_tokens, show_progress=False)
    index_s = time.perf_counter() - start

    def search(query: str) -> Sequence[int]:
        tokens = bm25s.tokenize(query, stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        ids, _ = retriever.retrieve(tokens, k=DEPTH, show_progress=False, n_threads=1)
        return [int(i) for i in ids[0]]

    run, p50 = timed_run(queries, search, doc_ids)
    return {
        "name": f"bm25s lucene (k1=1.5, b=0.75, {label})",
        "index_s": index_s,
        "p50_ms": p50,
        "run": run,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("beir_dir", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--k1", type=float, default=1.2, help="our k1 (default 1.2)")
    parser.add_argument("--b", type=float, default=0.75, help="our b (default 0.75)")
    args = parser.parse_args(argv)
    doc_ids, texts, queries, qrels = read_beir(args.beir_dir)
    size_mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"{args.beir_dir}: {len(texts)} documents ({size_mb:.1f} MB), {len(queries)} queries")

    rows = [
        bench_ours(doc_ids, texts, queries, args.k1, args.b),
        bench_bm25s(doc_ids, texts, queries),
    ]
    for row in rows:
        row["ndcg10"] = ndcg_at(row["run"], qrels, 10)
        row["recall100"] = recall_at(row["run"], qrels, 100)

    ours, theirs = rows
    width = max(len(row["name"]) for row in rows)
    print()
    print(f"| {'retriever':{width}s} | index s | p50 ms/query | nDCG@10 | Recall@100 |")
    print(f"|{'-' * (width + 2)}|--------:|-------------:|--------:|-----------:|")
    for row in rows:
        print(
            f"| {row['name']:{width}s} | {row['index_s']:7.2f} | {row['p50_ms']:12.2f} "
            f"| {row['ndcg10']:7.3f} | {row['recall100']:10.3f} |"
        )
    print(
        f"| {'ratio Anchored / bm25s':{width}s} | {ours['index_s'] / theirs['index_s']:7.2f} "
        f"| {ours['p50_ms'] / theirs['p50_ms']:12.2f} "
        f"| {ours['ndcg10'] / theirs['ndcg10']:7.3f} "
        f"| {ours['recall100'] / theirs['recall100']:10.3f} |"
    )
    n = len(texts)
    print()
    print(
        f"Anchored BM25: {ours['vocab']} terms, {ours['csr_bytes'] / n:.0f} bytes/document in "
        f"the CSR arrays, {ours['disk_bytes'] / n:.0f} bytes/document on disk with vocab.json"
    )


if __name__ == "__main__":
    main()
