"""Build-side benchmark: what the plugin adds to `mkdocs build`, and what the index costs.

    python tests/bench/bench_build.py [BEIR_DIR] [--limit N] [--skip-site] [--sample N]
        [--before REV]

For this project's own docs (`site/`) and a site generated from a BEIR corpus
(default ../shared/data/scifact, ~20 documents a page, one `##` section each;
``--limit 1500`` gives ~2k chunks) it measures, in one run:

- `mkdocs build` without the plugin, with it cold (empty cache) and warm
  (unchanged rebuild) — wall time and peak RSS; plain and warm builds are
  timed in turns, best of ``--rounds`` (5), as the machine may be shared;
- with ``--before REV``: the same unchanged rebuild with the plugin and
  build_index of git revision REV (extracted to a temp folder, first on
  PYTHONPATH), so the old and new overhead come from the same run;
- a fresh CI runner: the build published to S3 (moto server, real HTTP), one
  page changed, `.anchored/` deleted, `mkdocs build` again — chunks embedded
  and seconds, next to the cold build;
- chunks/s embedded by the pipeline, next to raw onnxruntime throughput of the
  same model on the same texts (fixed-length batches of 32, padded to 256;
  ``--sample 0`` skips it);
- index bytes per chunk, with and without the text, the model file left out.

Prints Markdown tables (paste into site/benchmarks.md).

    python tests/bench/bench_build.py --embed-memory N --before REV [--cold-from DIR]

measures only the build's memory while it gets its vectors, for REV and the working
tree side by side: a generated site of N chunks (``tests/pages.py``,
``numbered_pages``) built in a fresh process per variant and source (cold: every
chunk embedded; from the embedding cache; from a published build), with
``tracemalloc`` (numpy's allocations included) over the embed step and over the
write step, and the growth of resident memory (``VmHWM`` reset at the start of the
embed step) to the end of the write; then whether both wrote the same
``vectors.npy`` and ``vector_scales.npy``. ``--cold-from`` takes the cold builds
(and their cache and index) of an earlier run's work folder instead of embedding
again.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from beir_site import DEFAULT_BEIR, REPO, write_project

MODEL_FILES = {"model.onnx", "tokenizer.json", "anchored-model.json"}


RUN_AND_REPORT_RSS = (
    "import resource, sys\n"
    "from mkdocs.__main__ import cli\n"
    "try:\n"
    "    cli.main(args=['build', '-q', '-f', sys.argv[1]], standalone_mode=False)\n"
    "finally:\n"
    "    use = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    print('PEAK_RSS_KB', use.ru_maxrss, use.ru_utime + use.ru_stime, file=sys.stderr)\n"
)


def timed_build(
    project: Path,
    config: str = "mkdocs.yml",
    env: dict[str, str] | None = None,
    verbose: bool = False,
) -> tuple[float, float, str]:
    """Wall seconds and peak RSS (MB) of one `mkdocs build` in a fresh process."""
    script = RUN_AND_REPORT_RSS.replace("'-q'", "'-v'") if verbose else RUN_AND_REPORT_RSS
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script, config],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"mkdocs build failed in {project}:\n{done.stderr[-3000:]}")
    peak_kb = int(done.stderr.rsplit("PEAK_RSS_KB", 1)[1].split()[0])
    return wall, peak_kb / 1024, done.stderr


def cpu_seconds(stderr: str) -> float:
    """User + system CPU seconds the build process reported (see RUN_AND_REPORT_RSS)."""
    return float(stderr.rsplit("PEAK_RSS_KB", 1)[1].split()[1])


def index_sizes(index_dir: Path) -> dict[str, float]:
    manifest = json.loads((index_dir / "manifest.json").read_text())
    chunks = manifest["counts"]["chunks"] or 1
    total = sum(f.stat().st_size for f in index_dir.iterdir() if f.name not in MODEL_FILES)
    text = 0
    for name in ("chunks.jsonl", "sections.jsonl"):
        with open(index_dir / name, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                # The page's own words: body text, page title and heading path.
                words = [row["text"], row["title"], *row["heading_path"]]
                text += sum(len(w.encode("utf-8")) for w in words)
    return {
        "chunks": manifest["counts"]["chunks"],
        "bytes_per_chunk": total / chunks,
        "bytes_per_chunk_besides_text": (total - text) / chunks,
    }


def embed_throughput(index_dir: Path, sample: int) -> dict[str, float]:
    """Pipeline embedder vs raw onnxruntime on the same chunk texts, same run."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from build_index.embedder import Embedder, ModelSpec
    from build_index.pipeline import embedding_text
    from build_index.types import Chunk

    rows = []
    with open(index_dir / "chunks.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rows.append(json.loads(line))
    step = max(1, len(rows) // sample)
    texts = []
    for row in rows[::step][:sample]:
        chunk = Chunk(
            id=row["id"],
            page=row["page"],
            anchor=row["anchor"],
            title=row["title"],
            heading_path=row["heading_path"],
            type=row["type"],
            text=row["text"],
            parent=row["parent"],
            offsets=tuple(row["offsets"]),
            header=row.get("header", ""),
        )
        texts.append(embedding_text(chunk))
    spec = ModelSpec.from_dir(index_dir)
    embedder = Embedder(spec)
    embedder.embed_passages(texts[:8])  # warm-up
    t0 = time.perf_counter()
    embedder.embed_passages(texts)
    ours = len(texts) / (time.perf_counter() - t0)

    tok = Tokenizer.from_file(str(spec.tokenizer_path))
    tok.enable_truncation(256)
    tok.enable_padding(length=256)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    for key, value in spec.session_entries().items():  # as the model is meant to run
        options.add_session_config_entry(key, value)
    session = ort.InferenceSession(str(spec.path), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    t0 = time.perf_counter()
    for start in range(0, len(texts), 32):
        enc = tok.encode_batch(texts[start : start + 32])
        feed = {
            "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
        }
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        session.run(None, feed)
    raw = len(texts) / (time.perf_counter() - t0)
    return {"texts": len(texts), "ours_per_s": ours, "raw_per_s": raw, "ratio": ours / raw}


def without_plugin(config: str) -> str:
    """The same mkdocs.yml with the ``- anchored`` entry (and its options) removed."""
    out: list[str] = []
    skipping = False
    for line in config.splitlines():
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if stripped.startswith("- anchored"):
            skipping, entry_indent = True, indent
            continue
        if skipping and (not stripped or indent > entry_indent):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out) + "\n"


def with_store(config: str, store: str) -> str:
    """The same mkdocs.yml with the anchored plugin's ``store`` set to ``store``."""
    out: list[str] = []
    for line in config.splitlines():
        stripped = line.lstrip()
        indent = " " * (len(line) - len(stripped))
        if stripped == "- anchored:":
            out += [line, f"{indent}    store: {store}"]
        elif stripped == "- anchored":
            out += [f"{indent}- anchored:", f"{indent}    store: {store}"]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


EMBED_MEMORY = """
import json, sys, time, tracemalloc
from pathlib import Path
code, repo, n_pages, cache_dir, reuse_from, out_dir = sys.argv[1:7]
sys.path[:0] = [code, repo]
from build_index import pipeline
from tests.pages import numbered_pages

def kb(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))

seen = {}
real_embed, real_write = pipeline.embed_chunks, pipeline.write_index

def embed(*args, **kwargs):
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # VmHWM := VmRSS
    seen["rss_kb"] = kb("VmRSS:")
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        return real_embed(*args, **kwargs)
    finally:
        seen["embed_s"] = time.perf_counter() - t0
        seen["embed_peak"] = tracemalloc.get_traced_memory()[1]

def write(*args, **kwargs):
    tracemalloc.reset_peak()  # what the embed step returned is still traced
    try:
        return real_write(*args, **kwargs)
    finally:
        seen["write_peak"] = tracemalloc.get_traced_memory()[1]
        seen["hwm_kb"] = kb("VmHWM:")
        tracemalloc.stop()

pipeline.embed_chunks, pipeline.write_index = embed, write
config = pipeline.BuildConfig(
    cache_dir=Path(cache_dir) if cache_dir else None, reuse_from=reuse_from or None
)
report = pipeline.build(numbered_pages(int(n_pages)), Path(out_dir), config)
seen.update(chunks=report.chunks, embedded=report.embedded, cached=report.cached,
            reused=report.reused)
print(json.dumps(seen))
"""


def embed_memory(
    n_chunks: int, before: Path, work: Path, cold_from: Path | None = None
) -> list[dict[str, Any]]:
    """The build's memory while it gets its vectors, ``before`` against the working tree,
    cold, from the cache and from a published build (see the module docstring). With
    ``cold_from`` (an earlier run's work folder) the cold builds are not run again:
    its cache and index are the others' source."""
    variants = {"now": REPO, "before": before}
    rows: list[dict[str, Any]] = []

    def run(label: str, source: str, cache: Path | None, reuse: Path | None) -> dict[str, Any]:
        out = work / f"{label}-{source}"
        args = [str(variants[label]), str(REPO), str(n_chunks // 2)]
        args += [str(cache or ""), str(reuse or ""), str(out)]
        done = subprocess.run(
            [sys.executable, "-c", EMBED_MEMORY, *args], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"the {label} build ({source}) failed:\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        result.update(variant=label, source=source, out=out)
        return result

    if cold_from is None:
        cold_from = work
        for label in variants:  # "now" first: its cold build is the others' cache and store
            rows.append(run(label, "cold", work / f"cache-{label}", None))
    for label in variants:
        cache = work / f"cache-copy-{label}"
        shutil.copytree(cold_from / "cache-now", cache)
        rows.append(run(label, "cache", cache, None))
        rows.append(run(label, "published", None, cold_from / "now-cold"))
    return rows


def print_embed_memory(rows: list[dict[str, Any]], rev: str) -> None:
    by = {(r["variant"], r["source"]): r for r in rows}
    mb = 1e6
    print(
        f"\n| vectors from | chunks | embed step traced peak, {rev} → now | ratio "
        "| write step traced peak | RSS growth, embed + write | same vectors.npy + scales |"
    )
    print("|---|---|---|---|---|---|---|")
    for source in ("cold", "cache", "published"):
        if ("now", source) not in by:
            continue
        old, new = by[("before", source)], by[("now", source)]
        same = all(
            (old["out"] / name).read_bytes() == (new["out"] / name).read_bytes()
            for name in ("vectors.npy", "vector_scales.npy")
        )
        growth = [(r["hwm_kb"] - r["rss_kb"]) / 1024 for r in (old, new)]
        print(
            f"| {source} | {new['chunks']:,} | {old['embed_peak'] / mb:.1f} → "
            f"{new['embed_peak'] / mb:.1f} MB | {new['embed_peak'] / old['embed_peak']:.2f} | "
            f"{old['write_peak'] / mb:.1f} → {new['write_peak'] / mb:.1f} MB | "
            f"{growth[0]:.0f} → {growth[1]:.0f} MB | {'yes' if same else 'NO'} |"
        )
    if ("now", "cold") in by:
        cold = by[("now", "cold")]
        print(f"\n(cold: {cold['embedded']:,} chunks embedded in {cold['embed_s']:.0f} s)")


def old_code(rev: str, work: Path) -> Path:
    """The plugin and build_index of git revision ``rev``, importable from the returned folder."""
    dest = work / f"code-{rev}"
    dest.mkdir()
    archive = subprocess.run(
        ["git", "archive", rev, "plugin", "build_index"], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    (dest / "plugin").rename(dest / "mkdocs_anchored")
    return dest


def best_of(
    rounds: int, project: Path, variants: dict[str, tuple[str, dict[str, str] | None]]
) -> dict[str, tuple[float, float]]:
    """The fastest wall time and the least CPU time of ``rounds`` builds of each variant
    (label -> (config, env)), taken in turns so that load from other processes falls on
    every variant alike. CPU time (user + system of the build process) is what a loaded
    machine distorts least."""
    best = {label: (float("inf"), float("inf")) for label in variants}
    for _ in range(rounds):
        for label, (config, env) in variants.items():
            wall, _, log = timed_build(project, config, env)
            best[label] = (min(best[label][0], wall), min(best[label][1], cpu_seconds(log)))
    return best


def overheads(project: Path, before: Path | None, rounds: int, plain_cfg: str) -> dict[str, float]:
    """Unchanged rebuild (and, with ``before``, the old code's) against a plain build."""
    variants: dict[str, tuple[str, dict[str, str] | None]] = {
        "plain": (plain_cfg, None),
        "warm": ("mkdocs.yml", None),
    }
    if before is not None:
        variants["old_warm"] = ("mkdocs.yml", {"PYTHONPATH": str(before)})
    times = best_of(rounds, project, variants)
    (plain, plain_cpu), (warm, warm_cpu) = times["plain"], times["warm"]
    row = {
        "plain_s": plain,
        "warm_s": warm,
        "plain_cpu_s": plain_cpu,
        "warm_cpu_s": warm_cpu,
        "warm_overhead": (warm - plain) / plain,
        "warm_cpu_overhead": (warm_cpu - plain_cpu) / plain_cpu,
    }
    if before is not None:
        old, old_cpu = times["old_warm"]
        row["old_warm_s"], row["old_warm_cpu_s"] = old, old_cpu
        row["old_warm_overhead"] = (old - plain) / plain
        row["old_warm_cpu_overhead"] = (old_cpu - plain_cpu) / plain_cpu
    return row


def change_one_page(project: Path) -> Path:
    """Append a paragraph to one page (the middle one of the docs, by name)."""
    pages = sorted(p for p in (project / "docs").rglob("*.md") if p.name != "index.md")
    page = pages[len(pages) // 2]
    page.write_text(
        page.read_text("utf-8") + "\n\nA paragraph added to measure a one-page change.\n",
        "utf-8",
    )
    return page


def fresh_runner(project: Path, name: str, s3: Any) -> dict[str, float]:
    """Publish to S3, change one page, delete `.anchored/`, rebuild; what did it embed?"""
    store = f"s3://{s3['bucket']}/{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}"
    cfg = project / "mkdocs-s3.yml"
    cfg.write_text(with_store((project / "mkdocs.yml").read_text(), store))
    timed_build(project, cfg.name, s3["env"])  # publishes the warm build
    change_one_page(project)
    shutil.rmtree(project / ".anchored", ignore_errors=True)
    shutil.rmtree(project / "site", ignore_errors=True)
    seconds, _, log = timed_build(project, cfg.name, s3["env"], verbose=True)
    found = re.search(r"\((\d+) embedded, (\d+) from cache(?:, (\d+) from the published)?", log)
    if not found:
        raise SystemExit(f"no build summary in the log:\n{log[-3000:]}")
    return {
        "fresh_s": seconds,
        "fresh_embedded": int(found.group(1)),
        "fresh_reused": int(found.group(3) or 0),
    }


def start_s3(work: Path) -> tuple[Any, dict[str, Any]]:
    """A moto S3 server (tests/s3server.py) with one bucket, and the environment to reach it."""
    sys.path.insert(0, str(REPO / "tests"))
    from s3server import CREDENTIALS, REGION, MotoS3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log lines
    server = MotoS3().start()
    bucket = "anchored-bench"
    server.client().create_bucket(Bucket=bucket)
    env = {
        "AWS_ENDPOINT_URL_S3": server.endpoint_url,
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    return server, {"bucket": bucket, "env": env}


def bench_project(
    name: str, project: Path, before: Path | None, s3: dict[str, Any], rounds: int
) -> dict[str, object]:
    plain_cfg = project / "mkdocs-plain.yml"
    plain_cfg.write_text(without_plugin((project / "mkdocs.yml").read_text()))
    for d in (project / ".anchored", project / "site"):
        shutil.rmtree(d, ignore_errors=True)
    timed_build(project, plain_cfg.name)  # warms the file system cache
    cold, cold_rss, _ = timed_build(project)
    row: dict[str, object] = {
        "site": name,
        "cold_s": cold,
        "peak_rss_mb": cold_rss,
        **index_sizes(project / ".anchored" / "index"),
        **overheads(project, before, rounds, plain_cfg.name),
    }
    row.update(fresh_runner(project, name, s3))
    return row


def _pct(row: dict[str, object], key: str) -> str:
    return f"{float(row[key]) * 100:+.1f}%" if key in row else "—"  # type: ignore[arg-type]


def print_tables(rows: list[dict[str, object]]) -> None:
    full = [r for r in rows if "cold_s" in r]
    if full:
        print(
            "\n| site | chunks | plain build | +plugin cold | +plugin warm | warm overhead "
            "| peak RSS | bytes/chunk | besides text |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for r in full:
            print(
                f"| {r['site']} | {r['chunks']} | {r['plain_s']:.2f} s | {r['cold_s']:.2f} s | "
                f"{r['warm_s']:.2f} s | {_pct(r, 'warm_overhead')} | {r['peak_rss_mb']:.0f} MB | "
                f"{r['bytes_per_chunk']:.0f} | {r['bytes_per_chunk_besides_text']:.0f} |"
            )
    print(
        "\n| unchanged rebuild over plain `mkdocs build` | plain (wall / CPU) "
        "| before: wall / CPU | after: wall / CPU | target (CPU) |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        verdict = "met" if float(r["warm_cpu_overhead"]) <= 0.10 else "**missed**"  # type: ignore[arg-type]
        print(
            f"| {r['site']} | {r['plain_s']:.2f} s / {r['plain_cpu_s']:.2f} s "
            f"| {_pct(r, 'old_warm_overhead')} / {_pct(r, 'old_warm_cpu_overhead')} "
            f"| {_pct(r, 'warm_overhead')} / {_pct(r, 'warm_cpu_overhead')} "
            f"| ≤ +10% ({verdict}) |"
        )
    if full:
        print(
            "\n| fresh CI runner, one page changed | chunks | embedded | reused | seconds "
            "| cold build |"
        )
        print("|---|---|---|---|---|---|")
        for r in full:
            print(
                f"| {r['site']} | {r['chunks']} | {r['fresh_embedded']} | {r['fresh_reused']} | "
                f"{r['fresh_s']:.1f} s | {r['cold_s']:.1f} s |"
            )


def again(work: Path, before: Path | None, rounds: int) -> list[dict[str, object]]:
    """Only the unchanged-rebuild overheads, on the projects an earlier run left in ``work``."""
    rows: list[dict[str, object]] = []
    for proj in sorted(p for p in work.iterdir() if (p / "mkdocs-plain.yml").is_file()):
        timed_build(proj)  # the local index is current again after the fresh-runner step
        row: dict[str, object] = {"site": proj.name}
        row.update(overheads(proj, before, rounds, "mkdocs-plain.yml"))
        rows.append(row)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("beir", nargs="?", default=str(DEFAULT_BEIR))
    p.add_argument("--limit", type=int, default=None, help="documents of the corpus to use")
    p.add_argument("--skip-site", action="store_true")
    p.add_argument("--sample", type=int, default=1000, help="texts for the throughput comparison")
    p.add_argument("--before", metavar="REV", help="also time the unchanged rebuild of REV")
    p.add_argument("--rounds", type=int, default=5, help="timed builds of each variant (best)")
    p.add_argument(
        "--again",
        metavar="WORK_DIR",
        help="only re-time the unchanged rebuilds of the projects an earlier run left there",
    )
    p.add_argument(
        "--embed-memory",
        type=int,
        metavar="N",
        help="only the build's memory while it gets N chunks' vectors (needs --before)",
    )
    p.add_argument(
        "--cold-from",
        metavar="WORK_DIR",
        help="with --embed-memory: take the cold builds of an earlier run, do not embed again",
    )
    args = p.parse_args()

    if args.embed_memory:
        if not args.before:
            p.error("--embed-memory compares against --before REV")
        work = Path(tempfile.mkdtemp(prefix="anchored-bench-memory-"))
        cold_from = Path(args.cold_from) if args.cold_from else None
        rows = embed_memory(args.embed_memory, old_code(args.before, work), work, cold_from)
        print_embed_memory(rows, args.before)
        print(f"(work dir {work})")
        return

    if args.again:
        work = Path(args.again)
        before = old_code(args.before, Path(tempfile.mkdtemp())) if args.before else None
        print_tables(again(work, before, args.rounds))
        return

    rows = []
    work = Path(tempfile.mkdtemp(prefix="anchored-bench-build-"))
    before = old_code(args.before, work) if args.before else None
    server, s3 = start_s3(work)
    try:
        if not args.skip_site:
            proj = work / "own-docs"
            proj.mkdir()
            shutil.copy(REPO / "mkdocs.yml", proj / "mkdocs.yml")
            shutil.copytree(REPO / "site", proj / "docs")
            text = (proj / "mkdocs.yml").read_text()
            text = text.replace("docs_dir: site", "docs_dir: docs").replace("build/site", "site")
            (proj / "mkdocs.yml").write_text(text)
            rows.append(bench_project("site/ (own docs)", proj, before, s3, args.rounds))
        beir = Path(args.beir)
        proj = work / beir.name
        write_project(beir, proj, limit=args.limit)
        name = f"{beir.name} ({args.limit or 'all'} docs)"
        rows.append(bench_project(name, proj, before, s3, args.rounds))
    finally:
        server.stop()
    print_tables(rows)
    if args.sample > 0:
        tp = embed_throughput(proj / ".anchored" / "index", args.sample)
        print("\n| embedding (same texts, same run) | passages/s |")
        print("|---|---|")
        print(f"| raw onnxruntime, batches of 32 padded to 256 | {tp['raw_per_s']:.1f} |")
        print(f"| Anchored embedder (length-bucketed) | {tp['ours_per_s']:.1f} |")
        print(f"| ratio | {tp['ratio']:.2f}× |")
        print(f"\n({tp['texts']:.0f} texts)")
    print(f"(work dir {work})")


if __name__ == "__main__":
    main()
