"""Build-side memory: what a large site's build must not hold all at once (issue 15.3).

At 100k chunks the token lists of every chunk, held together as Python lists,
cost hundreds of MB (about 3.6 KB a chunk on this project's docs); the BM25
builder takes an iterable and keeps only int32 ids, so the pipeline must hand it
the token lists one at a time.

The vectors are held as the index stores them, int8 rows with a scale each
(388 B a chunk), quantised block by block as they are embedded, read from the
cache or taken from a published build; a float32 array of every chunk (1,536 B
a chunk, 154 MB at 100k) is never made, and the index is byte for byte the one
that array gave.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from build_index import pipeline
from build_index import reuse as reuse_module
from build_index.bm25 import BM25Index
from build_index.cache import EmbeddingCache, cache_key
from build_index.embedder import Embedder, get_model
from build_index.index_format import (
    SCALES,
    VECTORS,
    ModelInfo,
    quantize,
    read_index,
    write_index,
)
from build_index.index_writer import QuantizedVectors
from build_index.pipeline import (
    EMBEDDING_TEXT_VERSION,
    BuildConfig,
    BuildReport,
    bm25_text,
    build,
    collect_chunks,
    embed_chunks,
    embedding_text,
)
from build_index.reuse import chunk_from_record, open_published
from build_index.tokenizer import tokenize
from build_index.types import Chunk, Section
from tests.pages import numbered_pages


def test_bm25_gets_the_token_lists_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = BM25Index.build
    seen: dict[str, Any] = {}

    def spy(token_lists: Iterable[Sequence[str]], *args: Any, **kwargs: Any) -> BM25Index:
        seen["lazy"] = iter(token_lists) is token_lists  # an iterator, not a held list
        seen["lists"] = [list(t) for t in token_lists]
        return real(seen["lists"], *args, **kwargs)

    monkeypatch.setattr(pipeline.BM25Index, "build", spy)
    report = build(numbered_pages(6), tmp_path / "index", BuildConfig(cache_dir=tmp_path / "cache"))
    assert seen["lazy"], "the pipeline materialised every chunk's tokens for BM25"

    index = read_index(tmp_path / "index")
    assert len(seen["lists"]) == report.chunks == len(index.chunks) > 0
    # the same tokens as the written chunk records give, in row order
    expected = [tokenize(bm25_text(chunk_from_record(r))) for r in index.chunks]
    assert seen["lists"] == expected


def _write_float32(
    out_dir: Path, sections: list[Section], chunks: list[Chunk], matrix: npt.NDArray[np.float32]
) -> dict[str, Any]:
    """The index ``write_index`` makes of a float32 matrix (the old build path)."""
    manifest: dict[str, Any] = dict(
        write_index(
            out_dir,
            sections=sections,
            chunks=chunks,
            vectors=matrix,
            bm25=BM25Index.build(tokenize(bm25_text(c)) for c in chunks),
            model=ModelInfo.from_spec(get_model()),
            site_url=None,
            extra={"embedding_text": EMBEDDING_TEXT_VERSION},
        )
    )
    return manifest


def test_the_index_is_byte_for_byte_the_float32_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One build takes a third of its vectors from the cache, a third from a published
    build and embeds the rest, in ragged blocks: its files are the bytes write_index
    makes of the float32 matrix the build held before (assembled here the old way)."""
    monkeypatch.setattr(pipeline, "REUSE_MIN_MISSING", 1)
    monkeypatch.setattr(pipeline, "VECTOR_BLOCK", 7)
    spec = get_model()
    cache_dir, published = tmp_path / "cache", tmp_path / "published"
    build(numbered_pages(20), tmp_path / "first", BuildConfig(cache_dir=cache_dir))
    build(numbered_pages(40)[20:], published, BuildConfig())
    pages = numbered_pages(60)

    # the old path: one float32 array, filled from the cache, the published build, the model
    sections, chunks = collect_chunks(pages, BuildConfig(), BuildReport())
    texts = [embedding_text(c) for c in chunks]
    matrix = np.zeros((len(texts), spec.dim), dtype=np.float32)
    found = EmbeddingCache(cache_dir / "embeddings", spec.vectors_id).lookup_into(texts, matrix)
    earlier = open_published(published, spec, embedding_text, EMBEDDING_TEXT_VERSION)
    assert earlier is not None
    missing = np.flatnonzero(~found).tolist()
    still = []
    keys = [cache_key(spec.vectors_id, texts[i]) for i in missing]
    for i, vec in zip(missing, earlier.lookup(keys), strict=True):
        if vec is None:
            still.append(i)
        else:
            matrix[i] = vec
    matrix[still] = Embedder(spec).embed_passages([texts[i] for i in still])
    expected = _write_float32(tmp_path / "expected", sections, chunks, matrix)

    config = BuildConfig(cache_dir=cache_dir, reuse_from=str(published))
    report = build(pages, tmp_path / "index", config)
    assert (report.cached, report.reused, report.embedded) == (40, 40, 40)
    assert report.manifest is not None
    for name in (VECTORS, SCALES):
        assert (tmp_path / "index" / name).read_bytes() == (
            tmp_path / "expected" / name
        ).read_bytes()
    assert report.manifest["files"] == expected["files"]
    assert report.manifest["build_id"] == expected["build_id"]


def test_quantized_blocks_in_any_order_are_the_whole_matrix_quantized() -> None:
    """Rows put a ragged, shuffled block at a time are what quantize() makes of the
    whole matrix at once (zero rows included); write_index refuses a wrong shape."""
    vectors = _unit_vectors(1000, 384)
    vectors[[3, 500]] = 0
    blocks = QuantizedVectors.zeros(1000, 384)
    order = np.random.default_rng(1).permutation(1000)
    for start, stop in [(0, 1), (1, 65), (65, 600), (600, 1000)]:
        rows = order[start:stop]
        blocks.put(rows, vectors[rows])
    whole, scales = quantize(vectors)
    assert blocks.vectors.tobytes() == whole.tobytes()
    assert blocks.scales.tobytes() == scales.tobytes()
    model = ModelInfo.from_spec(get_model())
    with pytest.raises(ValueError, match="expected int8"):
        write_index(
            Path("unused"),
            sections=[],
            chunks=[],
            vectors=blocks,
            bm25=BM25Index.build([]),
            model=model,
            site_url=None,
        )


def test_a_nan_vector_still_stops_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedder that returns NaN: the build fails at the write with the float32
    path's message, and nothing is written (the int8 rows of NaN are never made)."""
    real = Embedder._run

    def broken(self: Embedder, *args: Any) -> Any:
        out = real(self, *args)
        out[0, 0] = np.nan
        return out

    monkeypatch.setattr(Embedder, "_run", broken)
    with pytest.raises(ValueError, match="NaN or infinity"):
        build(numbered_pages(2), tmp_path / "index", BuildConfig())
    assert not (tmp_path / "index").exists()


def _unit_vectors(n: int, dim: int) -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def _embed_step_peak(folder: Path, n_pages: int, source: str) -> tuple[int, int]:
    """Chunks of ``numbered_pages(n_pages)`` and the traced peak of ``embed_chunks`` when
    every vector comes from ``source`` ("cache" or "published")."""
    spec = get_model()
    sections, chunks = collect_chunks(numbered_pages(n_pages), BuildConfig(), BuildReport())
    vectors = _unit_vectors(len(chunks), spec.dim)
    cache_dir: Path | None = None
    reuse: list[str | Path] = []
    if source == "cache":
        cache_dir = folder / "cache"
        cache = EmbeddingCache(cache_dir / "embeddings", spec.vectors_id)
        cache.store([embedding_text(c) for c in chunks], vectors)
        cache.flush()
        del cache
    else:
        _write_float32(folder / "published", sections, chunks, vectors)
        reuse.append(folder / "published")
    del vectors
    report = BuildReport()
    tracemalloc.start()
    try:
        got = embed_chunks(chunks, spec, cache_dir, report, reuse=reuse)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.embedded == 0 and len(got) == len(chunks)
    return len(chunks), peak


@pytest.mark.parametrize("source", ["cache", "published"])
def test_the_embed_step_grows_by_less_than_a_float32_row_a_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """Vectors all from the cache (or all from a published build), at 1,000 and 3,000
    chunks: the embed step's traced peak (texts, keys, the source's own arrays and the
    int8 rows) grows by less a chunk than a float32 row alone, 1,536 B. The old path
    held a float32 row per chunk, so it grew by more (cache 2.7 KB, published 4.0 KB
    a chunk here; now about 0.85 and 1.1 KB)."""
    # blocks read at a time (1,024 rows by default) stay small, so that what grows
    # with the site is measured, not a block that fills up to its size
    monkeypatch.setattr(pipeline, "VECTOR_BLOCK", 256)
    monkeypatch.setattr(reuse_module, "_ROWS", 256)
    small = _embed_step_peak(tmp_path / "small", 500, source)
    large = _embed_step_peak(tmp_path / "large", 1500, source)
    per_chunk = (large[1] - small[1]) / (large[0] - small[0])
    assert per_chunk < get_model().dim * 4, f"{per_chunk:.0f} B a chunk"
