"""Build-side benchmark: what the plugin adds to `mkdocs build`, and what the index costs.

    python tests/bench/bench_build.py [BEIR_DIR] [--limit N] [--skip-site]

For this project's own docs (`site/`) and a large site generated from a BEIR
corpus (default ../shared/data/scifact, ~20 documents a page, one `##` section
each) it measures, in one run:

- `mkdocs build` without the plugin, with it cold (empty cache) and warm
  (unchanged rebuild) — wall time and the child's peak RSS;
- chunks/s embedded by the pipeline, next to raw onnxruntime throughput of the
  same model on the same texts (fixed-length batches of 32, padded to 256);
- index bytes per chunk, with and without the text, the model file left out.

Prints a Markdown table (paste into site/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    "    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "    print('PEAK_RSS_KB', rss, file=sys.stderr)\n"
)


def timed_build(project: Path, config: str = "mkdocs.yml") -> tuple[float, float, str]:
    """Wall seconds and peak RSS (MB) of one `mkdocs build` in a fresh process."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_REPORT_RSS, config],
        cwd=project,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"mkdocs build failed in {project}:\n{done.stderr[-3000:]}")
    peak_kb = int(done.stderr.rsplit("PEAK_RSS_KB", 1)[1].split()[0])
    return wall, peak_kb / 1024, done.stderr


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


def bench_project(name: str, project: Path) -> dict[str, object]:
    plain_cfg = project / "mkdocs-plain.yml"
    plain_cfg.write_text(without_plugin((project / "mkdocs.yml").read_text()))
    for d in (project / ".anchored", project / "site"):
        shutil.rmtree(d, ignore_errors=True)
    plain, _, _ = timed_build(project, plain_cfg.name)
    plain2, _, _ = timed_build(project, plain_cfg.name)
    plain = min(plain, plain2)
    cold, cold_rss, _ = timed_build(project)
    warm, _, _ = timed_build(project)
    sizes = index_sizes(project / ".anchored" / "index")
    return {
        "site": name,
        "plain_s": plain,
        "cold_s": cold,
        "warm_s": warm,
        "warm_overhead": (warm - plain) / plain,
        "peak_rss_mb": cold_rss,
        **sizes,
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("beir", nargs="?", default=str(DEFAULT_BEIR))
    p.add_argument("--limit", type=int, default=None, help="documents of the corpus to use")
    p.add_argument("--skip-site", action="store_true")
    p.add_argument("--sample", type=int, default=1000, help="texts for the throughput comparison")
    args = p.parse_args()

    rows = []
    work = Path(tempfile.mkdtemp(prefix="anchored-bench-build-"))
    if not args.skip_site:
        proj = work / "own-docs"
        proj.mkdir()
        shutil.copy(REPO / "mkdocs.yml", proj / "mkdocs.yml")
        shutil.copytree(REPO / "site", proj / "docs")
        text = (proj / "mkdocs.yml").read_text()
        text = text.replace("docs_dir: site", "docs_dir: docs").replace("build/site", "site")
        (proj / "mkdocs.yml").write_text(text)
        rows.append(bench_project("site/ (own docs)", proj))
    beir = Path(args.beir)
    proj = work / beir.name
    write_project(beir, proj, limit=args.limit)
    rows.append(bench_project(f"{beir.name} ({args.limit or 'all'} docs)", proj))
    tp = embed_throughput(proj / ".anchored" / "index", args.sample)

    print(
        "\n| site | chunks | plain build | +plugin cold | +plugin warm | warm overhead "
        "| peak RSS | bytes/chunk | besides text |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['site']} | {r['chunks']} | {r['plain_s']:.2f} s | {r['cold_s']:.2f} s | "
            f"{r['warm_s']:.2f} s | {r['warm_overhead'] * 100:+.1f}% | {r['peak_rss_mb']:.0f} MB | "
            f"{r['bytes_per_chunk']:.0f} | {r['bytes_per_chunk_besides_text']:.0f} |"
        )
    print("\n| embedding (same texts, same run) | passages/s |")
    print("|---|---|")
    print(f"| raw onnxruntime, batches of 32 padded to 256 | {tp['raw_per_s']:.1f} |")
    print(f"| Anchored embedder (length-bucketed) | {tp['ours_per_s']:.1f} |")
    print(f"| ratio | {tp['ratio']:.2f}× |")
    print(f"\n({tp['texts']:.0f} texts; work dir {work})")


if __name__ == "__main__":
    main()
