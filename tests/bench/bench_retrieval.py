"""Retrieval quality on a BEIR set rendered as an MkDocs site, next to bm25s.

    python tests/bench/bench_retrieval.py [BEIR_DIR] [--limit N] [--work DIR]

Renders the corpus as a site (~20 documents a page, one `##` section each),
builds it with `mkdocs build` and the plugin (reusing --work if it already
holds a build), then runs every test query through Anchored's retrieval as
`anchored eval` does: BM25 alone, dense alone and the default hybrid. bm25s
(Lucene BM25, English stopwords, Snowball stemmer) runs on the raw corpus in
the same process. Prints nDCG@10 / Recall@100 / MRR@10 and per-query latency.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from anchored_query.owner.evaluation import load_questions, mrr_at, ndcg_at, recall_at
from beir_site import (
    DEFAULT_BEIR,
    load_corpus,
    load_qrels,
    load_queries,
    write_project,
    write_questions,
)


def build_site(beir: Path, work: Path, limit: int | None) -> Path:
    index = work / ".anchored" / "index"
    if (index / "manifest.json").exists():
        return index
    write_project(beir, work, limit=limit)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q"], cwd=work)
    if done.returncode != 0:
        raise SystemExit("mkdocs build failed")
    print(f"built and indexed the site in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return index


def score_runs(runs: dict[str, list[str]], gold: dict[str, set[str]]) -> dict[str, float]:
    qids = [q for q in gold if q in runs]
    return {
        "ndcg@10": statistics.fmean(ndcg_at(runs[q], gold[q], 10) for q in qids),
        "recall@100": statistics.fmean(recall_at(runs[q], gold[q], 100) for q in qids),
        "mrr@10": statistics.fmean(mrr_at(runs[q], gold[q], 10) for q in qids),
    }


def run_bm25s(
    beir: Path, limit: int | None, where: dict[str, str], queries: dict[str, str]
) -> tuple[dict[str, list[str]], float]:
    import bm25s

    try:
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
    except ImportError:  # pragma: no cover
        stemmer = None
    docs = load_corpus(beir, limit)
    ids = [d["id"] for d in docs]
    corpus = [f"{d['title']} {d['text']}" for d in docs]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    runs: dict[str, list[str]] = {}
    times = []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        tokens = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False)
        res, _ = retriever.retrieve(tokens, k=min(100, len(ids)), show_progress=False)
        times.append(time.perf_counter() - t0)
        runs[qid] = [where[ids[i]] for i in res[0]]
    return runs, statistics.median(times) * 1000


def run_anchored(
    index: Path, questions: list, mode: tuple[str, ...]
) -> tuple[dict[str, list[str]], float]:
    from anchored_query.retrieval.ranking import Retriever

    from build_index.embedder import Embedder, ModelSpec
    from build_index.index_format import read_index

    idx = read_index(index)
    retriever = Retriever(idx, Embedder(ModelSpec.from_dir(idx.model_dir)))
    chunks = idx.chunks
    runs: dict[str, list[str]] = {}
    times = []
    for q in questions:
        t0 = time.perf_counter()
        hits = retriever.rank([q.question], retrievers=mode)
        times.append(time.perf_counter() - t0)
        refs: list[str] = []
        seen: set[str] = set()
        for h in hits:
            c = chunks[h.row]
            ref = f"{c['page']}#{c['anchor']}"
            if ref not in seen:
                seen.add(ref)
                refs.append(ref)
        runs[q.qid] = refs[:100]
    return runs, statistics.median(times) * 1000


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("beir", nargs="?", default=str(DEFAULT_BEIR))
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--work", default=None, help="folder for the generated site (reused if built)")
    args = p.parse_args()
    beir = Path(args.beir)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="anchored-bench-ret-"))
    work.mkdir(parents=True, exist_ok=True)
    index = build_site(beir, work, args.limit)
    where = write_project(beir, work / "_refs", limit=args.limit)  # same mapping, cheap
    write_questions(beir, where, work / "questions.jsonl")
    questions = load_questions(work / "questions.jsonl")
    gold = {q.qid: set(q.gold_refs) for q in questions}
    queries = {q.qid: q.question for q in questions}
    _ = load_qrels, load_queries

    rows = []
    runs, ms = run_bm25s(beir, args.limit, where, queries)
    rows.append(("bm25s (Lucene BM25, stopwords + stemmer)", score_runs(runs, gold), ms))
    for label, mode in (
        ("Anchored BM25 alone", ("bm25",)),
        ("Anchored dense alone", ("dense",)),
        ("Anchored hybrid (default)", ("dense", "bm25")),
    ):
        runs, ms = run_anchored(index, questions, mode)
        rows.append((label, score_runs(runs, gold), ms))

    print(f"\n{beir.name}: {len(questions)} queries, {len(where)} documents\n")
    print("| retriever | nDCG@10 | Recall@100 | MRR@10 | per query (p50) |")
    print("|---|---|---|---|---|")
    for label, m, ms in rows:
        print(
            f"| {label} | {m['ndcg@10']:.3f} | {m['recall@100']:.3f} "
            f"| {m['mrr@10']:.3f} | {ms:.1f} ms |"
        )


if __name__ == "__main__":
    main()
