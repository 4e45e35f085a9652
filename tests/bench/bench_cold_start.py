"""Cold start of the query function: new process -> first /v1/search answer, index from S3.

    python tests/bench/bench_cold_start.py [--sizes 1000,10000] [--runs 3] [--work DIR]

1. Builds the Lambda artifact with lambda/Makefile for this machine (cached, as
   in tests/test_lambda_artifact.py) and reports its size, unzipped and zipped.
2. Builds indexes of about 1k and 10k chunks from a BEIR corpus (default
   ../shared/data/scifact; every document one `##` section, child chunks of at
   most 180 tokens so that the corpus reaches 10k). The pipeline is called
   directly (no `mkdocs build`); indexes and embeddings are cached in the work
   folder, so only the first run pays for embedding (~5 min for 10k on 2 cores).
3. Publishes each index with build_index.publish to a moto S3 server on
   127.0.0.1 (real HTTP).
4. For each size and run: a fresh `python -I -S` process with only the artifact
   on sys.path and an empty /tmp cache imports handler.handler and answers one
   function-URL `GET /v1/search` event, then a second (warm) one. Reported:
   median of the runs, split into interpreter start, imports (handler module:
   imports + settings + app; the handler starts the index download first, so it
   runs alongside), index fetch (what is left of the S3 -> /tmp download,
   verified, after the imports), index load (manifest check, arrays), model load
   (ONNX session + tokenizer), first query; plus the CPU time to the first
   answer (all threads; unlike wall time it hardly changes on a busy machine),
   the warm query and the process's peak RSS.

Prints Markdown tables (paste into site/deploy-aws.md / site/benchmarks.md).
Not measured: Lambda's own part of a cold start (fetching and unpacking the
code, starting the runtime) and a real S3's latency; a Lambda's CPU share
depends on its memory size (one vCPU at 1769 MB).
"""

from __future__ import annotations

import argparse
import copy
import html
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from beir_site import DEFAULT_BEIR, REPO, doc_anchor, load_corpus, load_queries  # noqa: E402
from lambda_build import artifact_sizes, build_artifact, invoke, lambda_env  # noqa: E402
from s3server import MotoS3  # noqa: E402

from build_index.chunking import ChunkSettings, chunk_page  # noqa: E402
from build_index.pipeline import BuildConfig, build  # noqa: E402
from build_index.publish import publish  # noqa: E402
from build_index.types import PageInput  # noqa: E402

CHUNKING = ChunkSettings(child_max_tokens=180)
PER_PAGE = 20
SEARCH_EVENT = REPO / "tests" / "events" / "function-url-search.json"
STEPS = (
    ("interpreter", "interpreter start"),
    ("import", "imports + app"),
    ("fetch", "index fetch (S3)"),
    ("index_load", "index load"),
    ("model_load", "model load"),
    ("first_query", "first query"),
)


def pages_for(beir: Path, target_chunks: int) -> tuple[list[PageInput], int]:
    """Pages of the corpus (``PER_PAGE`` documents each) until ``target_chunks`` is reached."""
    docs = load_corpus(beir)
    pages: list[PageInput] = []
    count = 0
    for start in range(0, len(docs), PER_PAGE):
        parts = [f'<h1 id="documents">Documents {start + 1}</h1>']
        for doc in docs[start : start + PER_PAGE]:
            title = html.escape(doc["title"].strip() or f"Document {doc['id']}")
            parts.append(f'<h2 id="{doc_anchor(doc["id"])}">{title}</h2>')
            parts.append(f"<p>{html.escape(doc['text'].strip())}</p>")
        page = PageInput(
            url=f"p{start // PER_PAGE:05d}/", html="\n".join(parts), title=f"Documents {start + 1}"
        )
        count += len(chunk_page(page, CHUNKING)[1])
        pages.append(page)
        if count >= target_chunks:
            return pages, count
    raise SystemExit(f"{beir} gives only {count} chunks, fewer than {target_chunks}")


def ensure_index(beir: Path, work: Path, target_chunks: int) -> Path:
    """The index of about ``target_chunks`` chunks, built once into the work folder."""
    out = work / f"index-{target_chunks}"
    if (out / "manifest.json").is_file():
        return out
    pages, count = pages_for(beir, target_chunks)
    print(f"building an index of {count} chunks ({len(pages)} pages) into {out} ...", flush=True)
    t0 = time.perf_counter()
    config = BuildConfig(cache_dir=work / "cache", chunking=CHUNKING, site_url=None)
    report = build(pages, out, config)
    print(
        f"  {report.chunks} chunks, {report.embedded} embedded, {report.cached} from the cache, "
        f"{time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    return out


def search_event(query: str) -> dict[str, Any]:
    event: dict[str, Any] = copy.deepcopy(json.loads(SEARCH_EVENT.read_text("utf-8")))
    event["rawQueryString"] = urllib.parse.urlencode(
        {"q": query, "k": "10"}, quote_via=urllib.parse.quote
    )
    event["queryStringParameters"] = {"q": query, "k": "10"}
    event["requestContext"]["requestId"] = str(uuid.uuid4())
    return event


def interpreter_start_s() -> float:
    """Wall time of ``python -I -S -c pass`` (median of 5): the part before our code runs."""
    import subprocess

    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def one_run(artifact: Path, target: str, endpoint: str, queries: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="anchored-lambda-tmp-") as tmp:
        env = lambda_env(target, endpoint, Path(tmp) / "anchored")
        out = invoke(artifact, [search_event(q) for q in queries], env)
    for resp in out["responses"]:
        if resp["statusCode"] != 200:
            raise SystemExit(f"the handler answered {resp['statusCode']}: {resp.get('body')}")
        if not json.loads(resp["body"])["results"]:
            raise SystemExit("the handler found nothing; is the index empty?")
    t = out["timings_s"]
    return {
        "total": out["spawn_to_first_answer_s"],
        "interpreter": out["spawn_to_first_answer_s"] - t["main_to_first_answer"],
        "import": t["import"],
        "fetch": t["fetch"],
        "index_load": t["index_load"],
        "model_load": t["model_load"] + t["retriever"],
        "first_query": t["first_query"],
        "cpu": out["cpu_to_first_answer_s"],
        "warm_query": out["event_s"][1],
        "max_rss_mb": out["max_rss_mb"],
    }


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file()) / 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("beir", nargs="?", default=str(DEFAULT_BEIR))
    p.add_argument("--sizes", default="1000,10000", help="index sizes in chunks")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--work", default=str(REPO / ".anchored-test-cache" / "bench-cold-start"))
    p.add_argument(
        "--artifact", help="measure this already-built artifact folder instead (e.g. an old one)"
    )
    args = p.parse_args()
    beir, work = Path(args.beir), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]

    t0 = time.perf_counter()
    if args.artifact:
        artifact, built = Path(args.artifact), f"given: {args.artifact}"
    else:
        artifact, reused = build_artifact()
        built = "reused" if reused else f"built in {time.perf_counter() - t0:.0f} s"
    size = artifact_sizes(artifact)
    indexes = {n: ensure_index(beir, work, n) for n in sizes}
    queries = list(load_queries(beir).values())[:2]

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        os.environ.pop(key, None)
    server = MotoS3().start()
    try:
        client = server.client()
        bucket = f"anchored-bench-{uuid.uuid4().hex[:8]}"
        client.create_bucket(Bucket=bucket)
        targets = {}
        for n, index in indexes.items():
            targets[n] = f"s3://{bucket}/site-{n}"
            publish(index, targets[n], client=client)
        results: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
        load_before = os.getloadavg()[0]  # wall times stretch on a busy machine; CPU time not
        for run in range(args.runs):
            for n in sizes:  # interleaved, so a busy moment of the machine hits both
                results[n].append(one_run(artifact, targets[n], server.endpoint_url, queries))
                print(f"run {run + 1}, {n} chunks: {results[n][-1]['total']:.2f} s", flush=True)
    finally:
        server.stop()

    print()
    print(
        f"Lambda artifact (`make -C lambda build-AnchoredFunction`, {platform.machine()}, "
        f"Python {sys.version_info.major}.{sys.version_info.minor}, {built}): "
        f"{size['unzipped'] / 1e6:.0f} MB unzipped, {size['zipped'] / 1e6:.0f} MB zipped."
    )
    print()
    chunks = {
        n: json.loads((indexes[n] / "manifest.json").read_text())["counts"]["chunks"] for n in sizes
    }
    header = [f"median of {args.runs} runs", *[f"{chunks[n]:,} chunks" for n in sizes]]

    def median(n: int, key: str) -> float:
        return statistics.median(r[key] for r in results[n])

    rows = [["index size (model included)", *[f"{dir_mb(indexes[n]):.1f} MB" for n in sizes]]]
    for key, label in STEPS:
        rows.append([label, *[f"{median(n, key):.3f} s" for n in sizes]])
    rows.append(
        ["**new process → first answer**", *[f"**{median(n, 'total'):.2f} s**" for n in sizes]]
    )
    rows.append(["CPU time to first answer", *[f"{median(n, 'cpu'):.2f} s" for n in sizes]])
    rows.append(["warm query", *[f"{median(n, 'warm_query') * 1000:.0f} ms" for n in sizes]])
    rows.append(["max RSS", *[f"{median(n, 'max_rss_mb'):.0f} MB" for n in sizes]])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    each = "; ".join(
        f"{chunks[n]:,} chunks " + " / ".join(f"{r['total']:.2f}" for r in results[n]) + " s"
        for n in sizes
    )
    print(
        f"Each run: {each}. Bare `python -I -S -c pass`: {interpreter_start_s() * 1000:.0f} ms. "
        f"Machine: {os.cpu_count()} cores ({platform.machine()}), load average "
        f"{load_before:.1f} before and {os.getloadavg()[0]:.1f} after."
    )


if __name__ == "__main__":
    main()
