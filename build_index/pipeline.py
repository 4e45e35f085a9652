"""The build pipeline: pages -> chunks -> BM25 + embeddings -> index directory.

This is what the MkDocs plugin and ``anchored index`` call; it knows neither
MkDocs nor the command line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from build_index import __version__
from build_index.bm25 import BM25Index
from build_index.cache import EmbeddingCache, cache_key
from build_index.chunking import ChunkSettings, chunk_page, is_excluded
from build_index.embedder import Embedder
from build_index.errors import PageError
from build_index.index_format import VERSION as FORMAT_VERSION
from build_index.index_format import Manifest, ModelInfo, write_index
from build_index.index_writer import QuantizedVectors
from build_index.model_registry import DESCRIPTOR_NAME, ModelSpec, get_model
from build_index.reuse import ReuseRefused, open_published
from build_index.tokenizer import TOKENIZER_SETTINGS, tokenize
from build_index.types import Chunk, PageInput, Section

log = logging.getLogger("anchored")

ProgressFn = Callable[[int, int], None]
#: Version of :func:`embedding_text`'s layout, recorded in the manifest: a published
#: build's vectors are reused only when its chunks were embedded with the same layout.
EMBEDDING_TEXT_VERSION = 1
#: A warm cache that lacks only a few chunks embeds them: reading and checking a
#: published build (all its chunk rows and vectors) would cost more than that.
REUSE_MIN_MISSING = 64
#: Seconds of embedding between two flushes of the embedding cache: a build that is
#: killed or fails keeps all but the last few seconds of its embedding work.
CACHE_FLUSH_S = 10.0
#: Vectors read from the cache or a published build a block at a time, as float32
#: (1.5 MB) before they are quantised into the index's int8 rows; quantize() makes
#: a few temporaries of the block's size, so a larger block costs more than itself.
VECTOR_BLOCK = 1024


@dataclass(frozen=True)
class BuildConfig:
    """What a build needs besides the pages."""

    model: str = "all-MiniLM-L6-v2"
    cache_dir: Path | None = None
    chunking: ChunkSettings = field(default_factory=ChunkSettings)
    exclude: Sequence[str] = ()
    site_url: str | None = None
    strict: bool = False
    # Where the live build is published (s3://bucket/prefix or an index folder): its
    # vectors are reused for unchanged chunks the local cache lacks. The output
    # folder's own earlier index is always tried first.
    reuse_from: str | None = None


@dataclass
class BuildReport:
    """What a build did, for logs, tests and benchmarks."""

    manifest: Manifest | None = None
    pages: int = 0
    pages_skipped: int = 0
    chunks: int = 0
    embedded: int = 0
    cached: int = 0
    reused: int = 0  # vectors taken from the published build (reuse_from / out_dir)
    reused_from: list[str] = field(default_factory=list)  # the builds they came from
    reuse_refused: list[str] = field(default_factory=list)  # why a published build was not used
    model_files: list[str] = field(default_factory=list)  # the model's files, for stamps
    warnings: list[str] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    unchanged: bool = False  # the existing index already matched the inputs


class BuildFailed(PageError):
    """A page failed in strict mode; nothing was written."""


def embedding_text(chunk: Chunk) -> str:
    """The text embedded for a chunk: its heading path first, so a bare table row
    or list item still knows what it belongs to."""
    path = " > ".join(p for p in [chunk.title, *chunk.heading_path] if p)
    # The title is often the first heading too; don't say it twice.
    if chunk.heading_path and chunk.title == chunk.heading_path[0]:
        path = " > ".join(chunk.heading_path)
    body = f"{chunk.header}\n{chunk.text}" if chunk.header else chunk.text
    return f"{path}\n{body}" if path else body


def bm25_text(chunk: Chunk) -> str:
    """The text BM25 indexes for a chunk: heading path and body (header for table rows)."""
    heads = " ".join(chunk.heading_path)
    body = f"{chunk.header}\n{chunk.text}" if chunk.header else chunk.text
    return f"{heads}\n{body}"


def collect_chunks(
    pages: Iterable[PageInput], config: BuildConfig, report: BuildReport
) -> tuple[list[Section], list[Chunk]]:
    """Chunk every page; a page that fails is skipped with a warning naming it
    (or, in strict mode, stops the build before anything is written)."""
    sections: list[Section] = []
    chunks: list[Chunk] = []
    seen_pages: set[str] = set()
    for page in pages:
        if is_excluded(page, config.exclude):
            continue
        report.pages += 1
        try:
            page_sections, page_chunks = chunk_page(page, config.chunking)
        except PageError as exc:
            message = f"page '{page.url or '/'}' was not indexed: {exc}"
            if config.strict:
                raise BuildFailed(message) from exc
            log.warning(message)
            report.warnings.append(message)
            report.pages_skipped += 1
            continue
        if page.url in seen_pages:
            continue
        seen_pages.add(page.url)
        sections.extend(page_sections)
        chunks.extend(page_chunks)
    return sections, chunks


def embed_chunks(
    chunks: Sequence[Chunk],
    spec: ModelSpec,
    cache_dir: Path | None,
    report: BuildReport,
    progress: ProgressFn | None = None,
    reuse: Sequence[str | Path] = (),
) -> QuantizedVectors:
    """Embed chunk texts, reusing cached vectors for unchanged text, then those of the
    published builds in ``reuse`` (tried in order, only for what is still missing, and
    only when the cache had nothing or lacks at least ``REUSE_MIN_MISSING`` chunks).

    The vectors come back as the index stores them (int8 rows, a scale each): every
    block is quantised as it is read or embedded, so no float32 array of all the
    chunks is held (154 MB at 100k chunks, against 39 MB of int8 rows)."""
    texts = [embedding_text(c) for c in chunks]
    vectors = QuantizedVectors.zeros(len(texts), spec.dim)
    cache = EmbeddingCache(cache_dir / "embeddings", spec.vectors_id) if cache_dir else None
    if cache is not None:
        missing = _from_cache(cache, texts, vectors, spec.dim)
    else:
        missing = list(range(len(texts)))
    report.cached = len(texts) - len(missing)
    if missing and reuse and (len(missing) >= REUSE_MIN_MISSING or not report.cached):
        missing = _reuse_published(texts, missing, vectors, spec, reuse, report, cache)
    report.embedded = len(missing)
    try:
        if missing:
            # the start line is progress's own ("embedding N chunks"); the counts are the report's
            if progress is not None:
                progress(0, len(missing))
            todo = [texts[i] for i in missing]
            keep = _CacheWriter(cache, todo, CACHE_FLUSH_S) if cache is not None else None
            at = np.asarray(missing, dtype=np.intp)
            for rows, batch in Embedder(spec).iter_passages(todo, progress=progress):
                if keep is not None:
                    keep(rows, batch)
                vectors.put(at[rows], batch)  # each text at its chunk's row
    finally:  # what was embedded is kept, also when the build fails
        if cache is not None:
            cache.flush()
    return vectors


def _from_cache(
    cache: EmbeddingCache, texts: Sequence[str], vectors: QuantizedVectors, dim: int
) -> list[int]:
    """Put the cached vector of each text the cache holds into ``vectors`` (read
    ``VECTOR_BLOCK`` at a time); returns the rows of the texts it lacks."""
    missing: list[int] = []
    block = np.zeros((min(len(texts), VECTOR_BLOCK), dim), dtype=np.float32)
    for start in range(0, len(texts), VECTOR_BLOCK):
        part = texts[start : start + VECTOR_BLOCK]
        view = block[: len(part)]
        found = cache.lookup_into(part, view)
        hit = np.flatnonzero(found)
        if len(hit):
            vectors.put(start + hit, view if len(hit) == len(part) else view[hit])
        missing.extend((start + np.flatnonzero(~found)).tolist())
    return missing


class _CacheWriter:
    """Puts each embedded batch into the cache and flushes it every ``interval_s``
    seconds, so the work done survives a build that dies before the end."""

    def __init__(self, cache: EmbeddingCache, texts: Sequence[str], interval_s: float) -> None:
        self.cache = cache
        self.texts = texts
        self.interval_s = interval_s
        self.flushed_at = time.monotonic()

    def __call__(self, rows: npt.NDArray[np.intp], vectors: npt.NDArray[np.float32]) -> None:
        self.cache.store([self.texts[i] for i in rows], vectors)
        if time.monotonic() - self.flushed_at >= self.interval_s:
            self.cache.flush()
            self.flushed_at = time.monotonic()


def _reuse_published(
    texts: Sequence[str],
    missing: list[int],
    vectors: QuantizedVectors,
    spec: ModelSpec,
    sources: Sequence[str | Path],
    report: BuildReport,
    cache: EmbeddingCache | None,
) -> list[int]:
    """Fill ``vectors[missing]`` from published builds, and the cache with what they
    gave (``VECTOR_BLOCK`` rows at a time); returns what is still missing."""
    seen: set[str] = set()
    for source in sources:
        if not missing:
            break
        try:
            published = open_published(
                source, spec, embedding_text, EMBEDDING_TEXT_VERSION, skip=frozenset(seen)
            )
        except ReuseRefused as exc:
            what = "published build" if str(source).startswith("s3://") else "earlier index"
            message = f"the {what} at {source} is not reused ({exc}); embedding instead"
            log.warning("anchored: %s", message)
            report.reuse_refused.append(message)
            continue
        if published is None:
            continue
        seen.add(published.build_id)
        still: list[int] = []
        taken = 0
        for start in range(0, len(missing), VECTOR_BLOCK):
            part = missing[start : start + VECTOR_BLOCK]
            found = published.lookup([cache_key(spec.vectors_id, texts[i]) for i in part])
            rows = [i for i, vec in zip(part, found, strict=True) if vec is not None]
            still.extend(i for i, vec in zip(part, found, strict=True) if vec is None)
            if rows:
                block = np.stack([vec for vec in found if vec is not None])
                vectors.put(rows, block)
                if cache is not None:
                    cache.store([texts[i] for i in rows], block)
                taken += len(rows)
        if taken:
            report.reused += taken
            report.reused_from.append(f"{published.where} (build {published.build_id})")
            log.info("anchored: reused %d vectors of %s", taken, published.where)
        missing = still
    return missing


def input_fingerprint(pages: Sequence[PageInput], config: BuildConfig, spec: ModelSpec) -> str:
    """A hash of everything an index is made from: pages, settings, model, code version."""
    digest = hashlib.sha256()
    settings = {
        "code": __version__,
        "format": FORMAT_VERSION,
        "tokenizer": TOKENIZER_SETTINGS,
        "model": spec.describe(),  # the file's hash, and how it is run (compute, prefixes)
        "chunking": dataclasses.asdict(config.chunking),
        "exclude": list(config.exclude),
        "site_url": config.site_url,
    }
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for page in sorted(pages, key=lambda p: p.url):
        meta = json.dumps(page.meta, sort_keys=True, default=str)
        for part in (page.url, page.title, meta, page.html):
            digest.update(b"\0" + part.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def unchanged_index(out_dir: Path, fingerprint: str) -> Manifest | None:
    """The manifest of ``out_dir`` when it is an index of exactly these inputs.

    Every file must be there with its recorded size; contents are not hashed
    again here (readers verify every checksum before use), so an unchanged
    rebuild costs a hash of the pages and a few ``stat`` calls.
    """
    try:
        manifest: Manifest = json.loads((out_dir / "manifest.json").read_text("utf-8"))
        if manifest.get("extra", {}).get("inputs") != fingerprint:
            return None
        for name, entry in manifest["files"].items():
            if (out_dir / name).stat().st_size != entry["size"]:
                return None
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None
    return manifest


def build(
    pages: Iterable[PageInput],
    out_dir: Path,
    config: BuildConfig | None = None,
    progress: ProgressFn | None = None,
) -> BuildReport:
    """Build an index of ``pages`` into ``out_dir`` (replaced atomically).

    When ``out_dir`` already holds a valid index of the same pages, settings and
    model, nothing is redone (an unchanged rebuild costs a hash of the pages);
    otherwise unchanged chunks still reuse their vectors: from the embedding cache,
    else from the index already in ``out_dir``, else from the build published at
    ``config.reuse_from`` (see :mod:`build_index.reuse`). Only the rest is embedded.
    """
    config = config or BuildConfig()
    spec = get_model(config.model)
    pages = list(pages)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    fingerprint = input_fingerprint(pages, config, spec)
    previous = unchanged_index(out_dir, fingerprint)
    if previous is not None:
        extra = previous.get("extra", {})
        report = BuildReport(
            manifest=previous,
            pages=int(extra.get("pages", 0)),
            pages_skipped=int(extra.get("pages_skipped", 0)),
            chunks=previous["counts"]["chunks"],
            warnings=list(extra.get("warnings", [])),
            unchanged=True,
            timings_s={"check": time.perf_counter() - t0},
            model_files=model_files(spec),
        )
        for warning in report.warnings:
            log.warning("anchored: %s", warning)
        return report

    report = BuildReport()
    sections, chunks = collect_chunks(pages, config, report)
    timings["chunk"] = time.perf_counter() - t0
    if not chunks:
        message = "no indexable text was found in the site; the index is empty"
        log.warning("anchored: %s", message)
        report.warnings.append(message)

    t1 = time.perf_counter()
    # A generator: BM25Index.build turns each token list into int32 ids as it comes, so
    # the build never holds every chunk's tokens at once (about 3.6 KB a chunk as
    # Python lists, against 4 bytes a token as ids).
    bm25 = BM25Index.build(tokenize(bm25_text(c)) for c in chunks)
    timings["bm25"] = time.perf_counter() - t1

    t2 = time.perf_counter()
    sources: list[str | Path] = [out_dir]
    if config.reuse_from and Path(config.reuse_from) != out_dir:
        sources.append(config.reuse_from)
    vectors = embed_chunks(chunks, spec, config.cache_dir, report, progress, sources)
    timings["embed"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    report.manifest = write_index(
        out_dir,
        sections=sections,
        chunks=chunks,
        vectors=vectors,
        bm25=bm25,
        model=ModelInfo.from_spec(spec),
        site_url=config.site_url,
        extra={
            "inputs": fingerprint,
            "embedding_text": EMBEDDING_TEXT_VERSION,
            "pages": report.pages,
            "pages_skipped": report.pages_skipped,
            "warnings": report.warnings,
        },
    )
    timings["write"] = time.perf_counter() - t3
    report.chunks = len(chunks)
    report.timings_s = timings
    report.model_files = model_files(spec)
    return report


def model_files(spec: ModelSpec) -> list[str]:
    """The files a build read the model from (for :mod:`build_index.quickcheck` stamps)."""
    onnx = Path(spec.path)
    folder = onnx.parent if onnx.suffix == ".onnx" else onnx
    return [str(p) for p in (onnx, Path(spec.tokenizer_path), folder / DESCRIPTOR_NAME)]
