"""A large site, built and served: a generated site of 100k chunks, figures beside targets.

    nice -n 19 python tests/bench/bench_scale.py [--chunks 100000] [--work DIR]
        [--raw-sample 1000] [--beir DIR]

The site is the SciFact site of the build benchmark (``beir_site.write_project``:
one ``##`` section per document, 20 documents a page), scaled up the way the
latency benchmark scales an index: the pages are copied under new folders
(``copy1/``, ``copy2/``, …) until the site has ``--chunks`` chunks (chunk counts
come from ``chunk_page`` on each page rendered with the same Markdown
extensions). So the texts repeat; every copy is still embedded, and BM25 statistics
stay those of a real corpus. In one run, each build being a real ``mkdocs build``
(the Anchored plugin with its defaults, and MkDocs' own ``search``) in a fresh process:

- cold build (empty cache): wall time, embedding time and chunks/s (from the
  plugin's progress lines), peak memory of the build process and its children
  (RSS sampled every 0.25 s, and the process's own ``ru_maxrss``); the same site
  without the plugin beside it;
- the embedder against raw onnxruntime on the same texts (every k-th chunk of
  the built index, ``--raw-sample`` of them): same model, same tokenizer with the
  same truncation, same batch size (64), batches padded to their longest text, in
  input order, onnxruntime's default session options with the same thread count;
  two rounds, alternating, best of each;
- warm rebuilds: unchanged, and with one page changed (chunks embedded);
- the index on disk, per file;
- the query function on the index: a fresh process until its first ``/v1/search``
  answer, and its memory (RSS after the first answer and after 20 more asks), also
  on a slice of the index (``bench_latency.scaled_index``), so the per-chunk cost
  can be extrapolated to Lambda's memory sizes.

Not part of the test run. ``--chunks 5000`` is the smoke check.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from beir_site import DEFAULT_BEIR, load_queries, write_project
from bench_build import RUN_AND_REPORT_RSS, change_one_page, cpu_seconds, without_plugin
from bench_latency import scaled_index

DEFAULT_WORK = Path(tempfile.gettempdir()) / "anchored-bench" / "scale"
MODEL_FILES = {"model.onnx", "tokenizer.json", "anchored-model.json"}
BATCH = 64  # the Embedder's default batch size
TARGET_BUILD_MB = 2048
LAMBDA_MAX_MB = 10240
_PROGRESS = re.compile(r"anchored: (embedded \d+/\d+ chunks[^\n]*)")
_DONE = re.compile(r"embedded (\d+)/\1 chunks \(100%\) in ([^,]+), ([\d.]+) chunks/s")
_SUMMARY = re.compile(r"indexed (\d+) chunks from (\d+) pages \((\d+) embedded, (\d+) from cache")


# ------------------------------------------------------------------------------ the site


def page_chunks(md_file: Path) -> int:
    """Chunks the pipeline makes of one generated page (rendered as MkDocs renders it)."""
    import markdown

    from build_index.chunking import ChunkSettings, chunk_page
    from build_index.types import PageInput

    html = markdown.markdown(md_file.read_text("utf-8"), extensions=["toc", "attr_list"])
    return len(
        chunk_page(PageInput(url=md_file.stem + "/", html=html, title=""), ChunkSettings())[1]
    )


def write_scaled_site(beir: Path, project: Path, n_chunks: int) -> tuple[int, int]:
    """The SciFact site with its pages copied under ``copyK/`` until ``n_chunks``.

    Returns (chunks, pages) as the generator counted them."""
    if project.exists():
        shutil.rmtree(project)
    write_project(beir, project)
    docs = project / "docs"
    base = sorted(docs.glob("p*.md"))
    counts: dict[str, int] = {}
    total, pages, copy = 0, 0, 0
    while total < n_chunks:
        for page in base:
            if total >= n_chunks:
                if copy == 0:
                    page.unlink()
                continue
            if copy:
                folder = docs / f"copy{copy}"
                folder.mkdir(exist_ok=True)
                shutil.copyfile(page, folder / page.name)
            if page.name not in counts:
                counts[page.name] = page_chunks(page)
            total += counts[page.name]
            pages += 1
        copy += 1
    return total, pages


# ----------------------------------------------------------------------------- building


class PeakRSS:
    """Sample the summed RSS of a process and all its children every ``every_s`` seconds,
    keeping the peak of each phase (``phase`` is set by the caller as the log shows it)."""

    def __init__(self, pid: int, every_s: float = 0.25) -> None:
        import psutil

        self.proc = psutil.Process(pid)
        self.every_s = every_s
        self.phase = "before embedding"
        self.peaks: dict[str, int] = {}
        self.starts: dict[str, int] = {}  # RSS when the phase was first seen
        self.last = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def peak(self) -> int:
        return max(self.peaks.values(), default=0)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                rss = 0
                for p in [self.proc, *self.proc.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        rss += p.memory_info().rss
            except psutil.Error:
                return
            self.last = rss
            self.starts.setdefault(self.phase, rss)
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), rss)
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def mkdocs_build(project: Path, config: str, log_name: str, echo_s: float = 60.0) -> dict[str, Any]:
    """One verbose ``mkdocs build`` in a fresh process: wall, CPU, peak RSS, its log."""
    script = RUN_AND_REPORT_RSS.replace("'-q'", "'-v'")
    log_path = project.parent / f"{log_name}.log"
    t0 = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log, open(log_path, encoding="utf-8") as tail:
        proc = subprocess.Popen(
            [sys.executable, "-c", script, config], cwd=project, stdout=log, stderr=log
        )
        sampler = PeakRSS(proc.pid)
        last_echo, state = time.perf_counter(), "rendering / chunking"
        while proc.poll() is None:
            time.sleep(1.0)
            new = tail.read()
            if "anchored: embedding " in new and sampler.phase == "before embedding":
                sampler.phase = "embedding"
            if _DONE.search(new):
                sampler.phase = "after embedding"
            lines = _PROGRESS.findall(new)
            state = lines[-1] if lines else state
            if time.perf_counter() - last_echo >= echo_s:
                last_echo = time.perf_counter()
                print(
                    f"  [{log_name} {time.perf_counter() - t0:5.0f} s] {state}; "
                    f"RSS now {sampler.last / 2**20:.0f} MB, peak {sampler.peak / 2**20:.0f} MB",
                    flush=True,
                )
    wall = time.perf_counter() - t0
    sampler.stop()
    text = log_path.read_text("utf-8", errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"mkdocs build failed ({log_path}):\n{text[-3000:]}")
    own_peak_mb = int(text.rsplit("PEAK_RSS_KB", 1)[1].split()[0]) / 1024
    row: dict[str, Any] = {
        "wall_s": wall,
        "cpu_s": cpu_seconds(text),
        "peak_mb": max(sampler.peak / 2**20, own_peak_mb),
        "sampled_peak_mb": sampler.peak / 2**20,
        "ru_maxrss_mb": own_peak_mb,
        "phases_mb": {k: (sampler.starts[k] / 2**20, v / 2**20) for k, v in sampler.peaks.items()},
    }
    done = _DONE.search(text)
    if done:
        row["embedded"] = int(done.group(1))
        row["embed_rate"] = float(done.group(3))
        row["embed_s"] = int(done.group(1)) / float(done.group(3))
    summary = _SUMMARY.search(text)
    if summary:
        row["chunks"], row["embedded"] = int(summary.group(1)), int(summary.group(3))
    return row


# ------------------------------------------------------------------ embedder against raw


def sample_texts(index: Path, n: int) -> list[str]:
    """The embedding texts of every k-th chunk of a built index (``n`` of them)."""
    from build_index.pipeline import embedding_text
    from build_index.types import Chunk

    with open(index / "chunks.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    step = max(1, len(rows) // n)
    fields = ("id", "page", "anchor", "title", "heading_path", "type", "text", "parent")
    return [
        embedding_text(
            Chunk(
                **{k: row[k] for k in fields},
                offsets=tuple(row["offsets"]),
                header=row.get("header", ""),
            )
        )
        for row in rows[::step][:n]
    ]


def raw_embed(session: Any, tok: Any, inputs: set[str], texts: list[str]) -> int:
    """Plain onnxruntime: batches of ``BATCH`` in input order, padded to their longest."""
    import numpy as np

    for start in range(0, len(texts), BATCH):
        enc = tok.encode_batch(texts[start : start + BATCH])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, {k: v for k, v in feed.items() if k in inputs})[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
        pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return len(texts)


def embed_vs_raw(index: Path, n: int, rounds: int = 2) -> dict[str, float]:
    """Texts/s of ``Embedder.embed_passages`` and of raw onnxruntime, alternating."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from build_index.embedder import Embedder, ModelSpec

    texts = sample_texts(index, n)
    spec = ModelSpec.from_dir(index)
    ours = Embedder(spec, batch_size=BATCH)
    options = ort.SessionOptions()
    options.intra_op_num_threads = ours._session.get_session_options().intra_op_num_threads
    for key, value in spec.session_entries().items():  # as the model is meant to run
        options.add_session_config_entry(key, value)
    session = ort.InferenceSession(str(spec.path), options, providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(spec.tokenizer_path))
    tok.enable_truncation(max_length=spec.max_tokens)
    tok.enable_padding(pad_id=ours._pad_id)
    inputs = {i.name for i in session.get_inputs()}
    ours.embed_passages(texts[:8])  # warm up both
    raw_embed(session, tok, inputs, texts[:8])
    best = {"ours": float("inf"), "raw": float("inf")}
    for _ in range(rounds):
        for name in ("raw", "ours"):
            t0 = time.perf_counter()
            if name == "ours":
                ours.embed_passages(texts)
            else:
                raw_embed(session, tok, inputs, texts)
            best[name] = min(best[name], time.perf_counter() - t0)
    return {
        "texts": len(texts),
        "ours_rate": len(texts) / best["ours"],
        "raw_rate": len(texts) / best["raw"],
    }


# ---------------------------------------------------------------------- query function

FUNCTION = """
import json, sys, time
t0 = time.perf_counter()
def hwm_kb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
import psutil
from starlette.testclient import TestClient
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
client = TestClient(create_app(Settings(index=sys.argv[1], refresh_s=3600, rate_limit_per_min=0)))
r = client.get("/v1/search", params={"q": "what causes inflammation"})
assert r.status_code == 200 and r.json()["results"], r.text
first = time.perf_counter() - t0
first_at = time.time()
rss_first = psutil.Process().memory_info().rss
for q in json.loads(sys.argv[2]):
    r = client.post("/v1/ask", json={"question": q, "mode": "extractive"})
    assert r.status_code == 200, r.text
print(json.dumps({
    "first_s": first,
    "first_at": first_at,
    "rss_first_mb": rss_first / 2**20,
    "rss_mb": psutil.Process().memory_info().rss / 2**20,
    # VmHWM, not ru_maxrss: Linux carries the forking parent's high-water mark across exec
    # into ru_maxrss (this benchmark's own process holds an embedder by now).
    "peak_mb": hwm_kb() / 1024,
}))
"""


def function_run(index: Path, questions: list[str]) -> dict[str, float]:
    """A fresh process on ``index``: time to the first answer (from spawn), its memory."""
    spawned_at = time.time()
    done = subprocess.run(
        [sys.executable, "-c", FUNCTION, str(index), json.dumps(questions)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    if done.returncode != 0:
        raise SystemExit(f"the function failed on {index}:\n{done.stderr[-3000:]}")
    row: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    row["spawn_to_first_s"] = row["first_at"] - spawned_at
    return row


def index_files(index: Path) -> dict[str, int]:
    return {f.name: f.stat().st_size for f in sorted(index.iterdir()) if f.is_file()}


# -------------------------------------------------------------------------------- report


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def print_throughput(tp: dict[str, float], cold: dict[str, Any]) -> None:
    ratio = tp["ours_rate"] / tp["raw_rate"]
    print(
        f"| embedder vs raw onnxruntime, same {tp['texts']:.0f} texts, batch {BATCH}, "
        f"alternating | {tp['ours_rate']:.1f} vs {tp['raw_rate']:.1f} texts/s: "
        f"**{ratio:.2f}×** | ≥ 0.90× ({verdict(ratio >= 0.9)}) |"
    )
    if "embed_rate" in cold:
        print(
            f"| whole build's embedding rate ÷ raw (not the same minutes) "
            f"| {cold['embed_rate'] / tp['raw_rate']:.2f}× | – |"
        )


def print_rebuilds(
    unchanged: dict[str, Any], plain: dict[str, Any], changed: dict[str, Any], rounds: int
) -> None:
    over = (unchanged["wall_s"] - plain["wall_s"]) / plain["wall_s"]
    over_cpu = (unchanged["cpu_s"] - plain["cpu_s"]) / plain["cpu_s"]
    print(
        f"| unchanged rebuild, wall (CPU), best of {rounds} alternating "
        f"| {unchanged['wall_s']:.1f} s ({unchanged['cpu_s']:.1f} s) against "
        f"{plain['wall_s']:.1f} s ({plain['cpu_s']:.1f} s) without the plugin: "
        f"{over:+.1%} ({over_cpu:+.1%} CPU); peak {unchanged['peak_mb']:,.0f} MB "
        f"| ≤ +10% ({verdict(over_cpu <= 0.10)}) |"
    )
    print(
        f"| one page changed, wall (CPU) | {changed['wall_s']:.1f} s ({changed['cpu_s']:.1f} s), "
        f"{changed.get('embedded', '?')} chunks embedded; peak {changed['peak_mb']:,.0f} MB | – |"
    )


def warm_rebuilds(
    project: Path, rounds: int
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Best unchanged rebuild, best plain build (alternating pairs), one page changed."""
    # One unchanged build against one plain build is noise on a shared machine (+31% and
    # -3% on the same 2k-chunk site, minutes apart): alternate them, keep each one's best.
    pairs = [
        (
            mkdocs_build(project, "mkdocs.yml", f"unchanged{i}"),
            mkdocs_build(project, "mkdocs-plain.yml", f"plain{i}"),
        )
        for i in range(1, rounds + 1)
    ]
    unchanged = min((u for u, _ in pairs), key=lambda r: r["cpu_s"])
    plain = min((p for _, p in pairs), key=lambda r: r["cpu_s"])
    change_one_page(project)
    changed = mkdocs_build(project, "mkdocs.yml", "one-page")
    print("rebuilds done; embedder vs raw ...", flush=True)
    return unchanged, plain, changed


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--beir", default=str(DEFAULT_BEIR))
    p.add_argument("--work", default=None, help=f"default: {DEFAULT_WORK}-<chunks>")
    p.add_argument("--raw-sample", type=int, default=1000, help="texts for embedder vs raw")
    p.add_argument("--asks", type=int, default=20, help="asks after the first answer")
    p.add_argument("--rounds", type=int, default=3, help="unchanged/plain build pairs")
    p.add_argument(
        "--cold-only",
        action="store_true",
        help="only the cold build, the index and the query function: no plain build, no "
        "rebuilds, no embedder-vs-raw rounds (a cold 100k build alone takes about 2.3 h here)",
    )
    p.add_argument(
        "--cache-from",
        type=Path,
        help="start the first build with this embedding cache (.anchored/cache of an earlier "
        "run): the copies repeat the texts, so a smaller run's cache holds their vectors; the "
        "first build is then NOT a cold embed, and the table says so",
    )
    args = p.parse_args()
    work = Path(args.work or f"{DEFAULT_WORK}-{args.chunks}")
    work.mkdir(parents=True, exist_ok=True)
    project = work / "project"
    load0 = os.getloadavg()

    t0 = time.perf_counter()
    n_chunks, n_pages = write_scaled_site(Path(args.beir), project, args.chunks)
    print(
        f"site: {n_pages} pages, {n_chunks} chunks ({time.perf_counter() - t0:.0f} s)", flush=True
    )
    (project / "mkdocs-plain.yml").write_text(without_plugin((project / "mkdocs.yml").read_text()))

    plain = None if args.cold_only else mkdocs_build(project, "mkdocs-plain.yml", "plain")
    if plain:
        print(f"plain build: {plain['wall_s']:.0f} s, {plain['peak_mb']:.0f} MB", flush=True)
    if args.cache_from:
        shutil.copytree(args.cache_from, project / ".anchored" / "cache")
    cold = mkdocs_build(project, "mkdocs.yml", "cold")
    print(f"cold build: {cold['wall_s']:.0f} s, {cold['peak_mb']:.0f} MB", flush=True)
    index = project / ".anchored" / "index"
    rebuilds = None if args.cold_only else warm_rebuilds(project, args.rounds)
    tp = None if args.cold_only else embed_vs_raw(index, args.raw_sample)

    questions = list(load_queries(Path(args.beir)).values())[: args.asks]
    slice_n = max(200, n_chunks // 10)
    small = scaled_index(index, work / f"slice-{slice_n}", slice_n)
    fn_small = function_run(small, questions)
    fn = function_run(index, questions)
    files = index_files(index)
    load1 = os.getloadavg()

    chunks = int(cold.get("chunks", n_chunks))
    data_bytes = sum(v for k, v in files.items() if k not in MODEL_FILES)
    model_bytes = sum(v for k, v in files.items() if k in MODEL_FILES)
    print(f"\n## {chunks:,} chunks, {n_pages:,} pages\n")
    first = "cold build" if not args.cache_from else "build, vectors from the cache"
    print("| measure | figure | target |")
    print("|---|---|---|")
    phases = "; ".join(f"{k} {a:,.0f} → {b:,.0f} MB" for k, (a, b) in cold["phases_mb"].items())
    plain_mb = f"; without the plugin {plain['peak_mb']:,.0f} MB" if plain else ""
    plain_s = (
        f"; without the plugin {plain['wall_s']:.0f} s ({plain['cpu_s']:.0f} s)" if plain else ""
    )
    print(
        f"| {first}, peak memory (build process + children, sampled; ru_maxrss) "
        f"| **{cold['peak_mb']:,.0f} MB** ({cold['sampled_peak_mb']:,.0f} sampled, "
        f"{cold['ru_maxrss_mb']:,.0f} ru_maxrss){plain_mb}; "
        f"by phase (first sample → peak): {phases} "
        f"| ≤ {TARGET_BUILD_MB:,} MB ({verdict(cold['peak_mb'] <= TARGET_BUILD_MB)}) |"
    )
    print(
        f"| {first}, wall (CPU) | {cold['wall_s']:,.0f} s ({cold['cpu_s']:,.0f} s){plain_s} | – |"
    )
    if "embed_rate" in cold:
        print(
            f"| {first}, embedding | {cold['embedded']:,} chunks in {cold['embed_s']:,.0f} s, "
            f"**{cold['embed_rate']:.1f} chunks/s** | – |"
        )
    if tp:
        print_throughput(tp, cold)
    if rebuilds:
        print_rebuilds(*rebuilds, args.rounds)
    print(
        f"| index on disk | {data_bytes / 2**20:,.1f} MB + model {model_bytes / 2**20:.1f} MB; "
        f"{data_bytes / chunks:,.0f} bytes a chunk | – |"
    )
    for label, r, n in (("index", fn, chunks), ("slice", fn_small, slice_n)):
        print(
            f"| query function, {n:,} chunks ({label}): new process → first answer "
            f"| {r['spawn_to_first_s']:.2f} s "
            f"({r['first_s']:.2f} s after the interpreter started); RSS "
            f"{r['rss_first_mb']:,.0f} MB after it, {r['rss_mb']:,.0f} MB after "
            f"{len(questions)} asks (peak {r['peak_mb']:,.0f} MB) | – |"
        )
    per_chunk = (fn["peak_mb"] - fn_small["peak_mb"]) / (chunks - slice_n)
    fixed = fn["peak_mb"] - per_chunk * chunks
    print(
        f"\nfunction memory: {fixed:,.0f} MB + {per_chunk * 1024:,.2f} KB a chunk (peak RSS, "
        f"from the two sizes)"
    )
    for limit in (1536, LAMBDA_MAX_MB):
        if per_chunk > 0:
            print(f"  {limit:,} MB is outgrown at about {(limit - fixed) / per_chunk:,.0f} chunks")
    print("\n| index file | bytes | per chunk |\n|---|---|---|")
    for name, size in files.items():
        print(f"| {name} | {size:,} | {size / chunks:,.1f} |")
    print(
        f"\nMachine: {os.cpu_count()} cores, load average {load0[0]:.1f} before and "
        f"{load1[0]:.1f} after; nice {os.nice(0)}; work dir {work}"
    )


if __name__ == "__main__":
    main()
