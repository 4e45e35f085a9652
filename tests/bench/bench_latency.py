"""Query latency, cold start and memory of the query function, next to its raw parts.

    python tests/bench/bench_latency.py [--source INDEX_DIR] [--queries N]

Indexes of 5k and 100k chunks are made from a real index (default: the SciFact
site built by bench_retrieval.py in /tmp/anchored-bench/scifact, else built
here from ../shared/data/scifact): the 5k one is a slice, the 100k one copies
every chunk under new pages with its vector slightly perturbed (synthetic
scale-up; BM25 statistics stay realistic). For each size, one query at a time
and in process:

- `/v1/search` through the ASGI app, and `/v1/ask` in extractive mode (the
  whole answer path minus any LLM call);
- the raw parts measured in the same run: query embedding + a bm25s query +
  a numpy dot product over float32 vectors; the ratio ours / raw parts.

Then a cold start (new process -> first `/v1/search` answer, 10k chunks) and
resident memory next to the index size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from beir_site import DEFAULT_BEIR, load_queries

DEFAULT_WORK = Path(tempfile.gettempdir()) / "anchored-bench"
MODEL_FILES = {"model.onnx", "tokenizer.json", "anchored-model.json"}


def source_index(path: str | None) -> Path:
    if path:
        return Path(path)
    default = DEFAULT_WORK / "scifact" / ".anchored" / "index"
    if not (default / "manifest.json").exists():
        subprocess.run(
            [
                sys.executable,
                str(Path(__file__).parent / "bench_retrieval.py"),
                "--work",
                str(default.parents[1]),
            ],
            check=True,
        )
    return default


def scaled_index(source: Path, target: Path, n_chunks: int) -> Path:
    """An index of ``n_chunks`` made from ``source`` (slice, or copies under new pages)."""
    origin = json.loads((source / "manifest.json").read_text())["build_id"]
    if (target / "manifest.json").exists():
        manifest = json.loads((target / "manifest.json").read_text())
        made_from = manifest.get("extra", {}).get("scaled_from")
        if manifest["counts"]["chunks"] == n_chunks and made_from == origin:
            return target
    from build_index.bm25 import BM25Index
    from build_index.index_format import ModelInfo, read_index, write_index
    from build_index.model_registry import ModelSpec
    from build_index.pipeline import bm25_text
    from build_index.tokenizer import tokenize
    from build_index.types import Chunk, Section

    src = read_index(source)
    rows = list(src.chunks)
    sections = {k: v for k, v in src.sections.items()}
    vectors = src.vectors.astype(np.float32) * src.scales[:, None]
    rng = np.random.default_rng(0)
    out_chunks: list[Chunk] = []
    out_sections: dict[str, Section] = {}
    out_vectors = []
    tokens_cache: dict[int, list[str]] = {}
    copy = 0
    while len(out_chunks) < n_chunks:
        prefix = f"copy{copy}/" if copy else ""
        for i, row in enumerate(rows):
            if len(out_chunks) >= n_chunks:
                break
            page = prefix + row["page"]
            parent = prefix + row["parent"]
            chunk = Chunk(
                id=prefix + row["id"],
                page=page,
                anchor=row["anchor"],
                title=row["title"],
                heading_path=row["heading_path"],
                type=row["type"],
                text=row["text"],
                parent=parent,
                offsets=tuple(row["offsets"]),
                header=row.get("header", ""),
            )
            out_chunks.append(chunk)
            if parent not in out_sections:
                s = sections[row["parent"]]
                out_sections[parent] = Section(
                    id=parent,
                    page=page,
                    anchor=s["anchor"],
                    title=s["title"],
                    heading_path=s["heading_path"],
                    text=s["text"],
                )
            v = vectors[i]
            if copy:
                v = v + rng.normal(0, 0.03, v.shape).astype(np.float32)
                v /= np.linalg.norm(v)
            out_vectors.append(v)
            if i not in tokens_cache:
                tokens_cache[i] = tokenize(bm25_text(chunk))
        copy += 1
    token_lists = [tokens_cache[i % len(rows)] for i in range(len(out_chunks))]
    write_index(
        target,
        sections=list(out_sections.values()),
        chunks=out_chunks,
        vectors=np.stack(out_vectors),
        bm25=BM25Index.build(token_lists),
        model=ModelInfo.from_spec(ModelSpec.from_dir(source)),  # the vectors' own model
        site_url=None,
        extra={"scaled_from": origin},  # reused only for the same source build
    )
    return target


def percentiles(samples: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in samples)
    return statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.95))]


class InstantLLM:
    """A stand-in model that answers at once, so `/v1/ask` is timed minus the LLM call.

    It still goes through everything around the call: query rewrites (one extra
    phrasing), the prompt over the whole candidate set, parsing, verification and
    renumbering of a cited answer.
    """

    name = "instant"

    def complete(self, messages: Any, **_: Any) -> Any:
        from anchored_query.llm import Completion

        text = "Rewritten question\nThe first passage answers it [1]. The second adds to it [2]."
        return Completion(text, None, None, "stop")


def forget_vectors(engine: Any) -> None:
    """Empty the loaded build's vector cache (``retrieval/vector_cache.py``), so a request
    measured after another with the same question embeds it again (a tree before the
    cache has none)."""
    forget = getattr(engine.current().retriever.embedder, "forget", None)
    if forget is not None:
        forget()


def measure(index: Path, queries: list[str]) -> dict[str, float]:
    import bm25s
    import psutil
    from anchored_query.engine import Engine
    from anchored_query.question.validation import AskRequest
    from anchored_query.serve.app import create_app
    from anchored_query.settings import Settings
    from starlette.testclient import TestClient

    from build_index.embedder import Embedder, ModelSpec

    settings = Settings(index=str(index), refresh_s=3600, rate_limit_per_min=0)
    # One engine (one loaded index) for every route; the stand-in model only
    # answers requests that ask for the LLM path.
    engine = Engine(settings, llm=InstantLLM())
    app = create_app(settings, engine=engine)
    client = TestClient(app)
    client.get("/v1/search", params={"q": "warm up"})
    # Every route asks the same questions: each starts with the vector cache empty, so
    # it does not find their vectors kept by an earlier route.
    search, ask, core = [], [], []
    forget_vectors(engine)
    for q in queries:
        t0 = time.perf_counter()
        engine.search(q[:2000], 10)
        core.append(time.perf_counter() - t0)
    forget_vectors(engine)
    for q in queries:
        t0 = time.perf_counter()
        r = client.get("/v1/search", params={"q": q[:2000], "k": 10})
        search.append(time.perf_counter() - t0)
        assert r.status_code == 200, r.text
    forget_vectors(engine)
    for q in queries:
        t0 = time.perf_counter()
        engine.ask(AskRequest(question=q[:2000], mode="extractive"))
        ask.append(time.perf_counter() - t0)
    engine.ask(AskRequest(question="warm up", mode="llm"))
    forget_vectors(engine)
    ask_llm = []
    for q in queries:
        t0 = time.perf_counter()
        engine.ask(AskRequest(question=q[:2000], mode="llm"))
        ask_llm.append(time.perf_counter() - t0)
    rss = psutil.Process().memory_info().rss

    # Raw parts, same texts, same process.
    loaded = engine.current()
    embedder = Embedder(ModelSpec.from_dir(loaded.index.model_dir))
    matrix = loaded.index.vectors.astype(np.float32) * loaded.index.scales[:, None]
    texts = [c["text"] for c in loaded.index.chunks]
    stemmer = None
    try:
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
    except ImportError:  # pragma: no cover
        pass
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    raw = []
    for q in queries:
        t0 = time.perf_counter()
        vec = embedder.embed_query(q)
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        retriever.retrieve(tokens, k=100, show_progress=False)
        matrix @ vec
        raw.append(time.perf_counter() - t0)
    index_bytes = sum(f.stat().st_size for f in index.iterdir() if f.name not in MODEL_FILES)
    model_bytes = (index / "model.onnx").stat().st_size
    s50, s95 = percentiles(search)
    c50, c95 = percentiles(core)
    a50, a95 = percentiles(ask)
    l50, l95 = percentiles(ask_llm)
    r50, r95 = percentiles(raw)
    return {
        "chunks": len(texts),
        "search_p50": s50,
        "search_p95": s95,
        "core_p50": c50,
        "core_p95": c95,
        "ask_p50": a50,
        "ask_p95": a95,
        "llm_p50": l50,
        "llm_p95": l95,
        "raw_p50": r50,
        "raw_p95": r95,
        "rss_mb": rss / 2**20,
        "index_mb": index_bytes / 2**20,
        "model_mb": model_bytes / 2**20,
    }


COLD = """
import time, sys
t0 = time.perf_counter()
from starlette.testclient import TestClient
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
app = create_app(Settings(index=sys.argv[1], refresh_s=3600))
r = TestClient(app).get("/v1/search", params={"q": "what causes inflammation"})
assert r.status_code == 200, r.text
print(time.perf_counter() - t0)
"""


def cold_start(index: Path, runs: int = 3) -> tuple[float, float]:
    """Median wall time from process spawn to the first answer, and the in-process part."""
    walls, inside = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", COLD, str(index)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        walls.append(time.perf_counter() - t0)
        inside.append(float(done.stdout.strip().splitlines()[-1]))
    return statistics.median(walls), statistics.median(inside)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--source", default=None, help="index to scale (default: SciFact site)")
    p.add_argument("--beir", default=str(DEFAULT_BEIR), help="queries from this BEIR folder")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--sizes", default="5000,100000")
    p.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:  # child process: one index, clean memory
        queries = list(load_queries(Path(args.beir)).values())[: args.queries]
        print(json.dumps(measure(Path(args.measure), queries)))
        return
    source = source_index(args.source)
    queries = list(load_queries(Path(args.beir)).values())[: args.queries]
    work = DEFAULT_WORK / "latency"
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        index = scaled_index(source, work / f"index-{size}", size)
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--measure",
                str(index),
                "--beir",
                args.beir,
                "--queries",
                str(args.queries),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    cold_index = scaled_index(source, work / "index-10000", 10000)
    cold_wall, cold_inside = cold_start(cold_index)

    print(f"\n{len(queries)} queries, one at a time, in process\n")
    print(
        "| chunks | search (route's work) p50 / p95 | /v1/search via TestClient p50 / p95 "
        "| /v1/ask extractive p50 / p95 "
        "| /v1/ask LLM path minus the call p50 / p95 | raw parts p50 / p95 "
        "| search ÷ raw (p50) | RSS | index + model |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['chunks']:,} | {r['core_p50']:.1f} / {r['core_p95']:.1f} ms "
            f"| {r['search_p50']:.1f} / {r['search_p95']:.1f} ms "
            f"| {r['ask_p50']:.1f} / {r['ask_p95']:.1f} ms "
            f"| {r['llm_p50']:.1f} / {r['llm_p95']:.1f} ms "
            f"| {r['raw_p50']:.1f} / {r['raw_p95']:.1f} ms "
            f"| {r['core_p50'] / r['raw_p50']:.2f}× | {r['rss_mb']:.0f} MB "
            f"| {r['index_mb']:.0f} + {r['model_mb']:.0f} MB |"
        )
    print(
        f"\nCold start, 10k chunks (new process -> first /v1/search answer, median of 3): "
        f"{cold_wall:.2f} s wall ({cold_inside:.2f} s after the interpreter started)"
    )
    print(
        "Memory target: RSS <= index size x 2 + model; raw parts = query embedding + "
        "bm25s top-100 + numpy dot product over float32 vectors."
    )


if __name__ == "__main__":
    main()
