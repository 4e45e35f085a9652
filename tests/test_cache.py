"""The content-hash embedding cache: round trip, corruption, hit counting."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from build_index.cache import EmbeddingCache, cache_key
from tests.pages import numbered_pages

REPO = Path(__file__).resolve().parents[1]
SHA = "ab" * 32
OTHER_SHA = "cd" * 32


def vecs(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_key_depends_on_model_and_text() -> None:
    assert cache_key(SHA, "a") != cache_key(OTHER_SHA, "a")
    assert cache_key(SHA, "a") != cache_key(SHA, "b")
    assert cache_key(SHA, "a\0b") != cache_key(SHA + "a", "b")
    assert len(cache_key(SHA, "")) == 64


def test_round_trip_and_counts(tmp_path: Path) -> None:
    texts = ["alpha", "beta", "", "gamma ünïcode 中文"]
    v = vecs(4)
    cache = EmbeddingCache(tmp_path, SHA)
    assert len(cache) == 0 and bool(cache)  # an empty cache is still a cache
    assert cache.lookup(texts) == [None] * 4
    assert (cache.hits, cache.misses) == (0, 4)
    cache.store(texts, v)
    got = cache.lookup(["beta"])[0]  # pending entries are visible before flush
    assert got is not None and np.allclose(got, v[1], atol=1e-3)
    cache.flush()
    assert len([f for f in files(tmp_path) if f.endswith(".npy")]) == 1

    again = EmbeddingCache(tmp_path, SHA)
    assert len(again) == 4 and again.dim == 8
    found = again.lookup([*texts, "delta"])
    assert (again.hits, again.misses) == (4, 1)
    assert found[4] is None
    for i in range(4):
        vec = found[i]
        assert vec is not None and vec.dtype == np.float32
        assert np.allclose(vec, v[i], atol=1e-3)  # stored as float16


def test_other_model_never_hits(tmp_path: Path) -> None:
    c = EmbeddingCache(tmp_path, SHA)
    c.store(["alpha"], vecs(1))
    c.flush()
    other = EmbeddingCache(tmp_path, OTHER_SHA)
    assert other.lookup(["alpha"]) == [None]
    assert other.misses == 1


def test_incremental_flush_and_prune(tmp_path: Path) -> None:
    c = EmbeddingCache(tmp_path, SHA)
    c.store(["a", "b", "c"], vecs(3))
    c.flush()
    c2 = EmbeddingCache(tmp_path, SHA)
    c2.lookup(["a"])  # used: a; stored below: d
    c2.store(["d", "a"], vecs(2, seed=1))  # "a" already cached: not duplicated
    c2.flush()
    assert len(EmbeddingCache(tmp_path, SHA)) == 4
    c3 = EmbeddingCache(tmp_path, SHA)
    assert c3.lookup(["a", "d"])[0] is not None
    c3.flush(prune=True)
    c4 = EmbeddingCache(tmp_path, SHA)
    assert len(c4) == 2
    assert [x is not None for x in c4.lookup(["a", "b", "c", "d"])] == [True, False, False, True]
    assert np.allclose(c4.lookup(["a"])[0], vecs(3)[0], atol=1e-3)  # type: ignore[arg-type]
    assert len([f for f in files(tmp_path) if ".npy" in f]) == 1  # old files cleaned up


def test_flush_without_changes_writes_nothing(tmp_path: Path) -> None:
    EmbeddingCache(tmp_path / "c", SHA).flush()
    assert not (tmp_path / "c").exists()


def test_dimension_mismatch_rejected(tmp_path: Path) -> None:
    c = EmbeddingCache(tmp_path, SHA)
    c.store(["a"], vecs(1, dim=8))
    with pytest.raises(ValueError):
        c.store(["b"], vecs(1, dim=4))
    with pytest.raises(ValueError):
        c.store(["b", "c"], vecs(1, dim=8))


def _populate(d: Path) -> None:
    c = EmbeddingCache(d, SHA)
    c.store(["a", "b"], vecs(2))
    c.flush()


@pytest.mark.parametrize(
    "damage",
    ["json-garbage", "json-list", "keys-missing", "npy-garbage", "npy-missing", "npy-shape"],
)
def test_corrupt_cache_is_ignored_with_a_warning(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    _populate(tmp_path)
    (json_path,) = tmp_path.glob("*.json")
    (npy_path,) = tmp_path.glob("*.npy")
    meta = json.loads(json_path.read_text())
    if damage == "json-garbage":
        json_path.write_text('{"format": "anchored-embedding-c')
    elif damage == "json-list":
        json_path.write_text("[1, 2]")
    elif damage == "keys-missing":
        del meta["keys"]
        json_path.write_text(json.dumps(meta))
    elif damage == "npy-garbage":
        npy_path.write_bytes(b"\x93NUMPY garbage" * 3)
    elif damage == "npy-missing":
        npy_path.unlink()
    elif damage == "npy-shape":
        meta["keys"].append("f" * 64)
        json_path.write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING, logger="build_index.cache"):
        c = EmbeddingCache(tmp_path, SHA)
    assert "unreadable" in caplog.text
    assert len(c) == 0
    assert c.lookup(["a", "b"]) == [None, None]
    # and the build goes on: a new cache replaces the corrupt one
    c.store(["a"], vecs(1))
    c.flush()
    assert EmbeddingCache(tmp_path, SHA).lookup(["a"])[0] is not None


def test_pickled_npy_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _populate(tmp_path)
    (npy_path,) = tmp_path.glob("*.npy")
    np.save(npy_path, np.array([{"x": 1}, None], dtype=object), allow_pickle=True)
    with caplog.at_level(logging.WARNING, logger="build_index.cache"):
        c = EmbeddingCache(tmp_path, SHA)
    assert len(c) == 0 and "unreadable" in caplog.text


def test_many_entries_stay_cheap(tmp_path: Path) -> None:
    n = 20_000
    texts = [f"chunk number {i}" for i in range(n)]
    c = EmbeddingCache(tmp_path, SHA)
    c.store(texts, vecs(n, dim=384))
    c.flush()
    (npy_path,) = tmp_path.glob("*.npy")
    assert npy_path.stat().st_size < n * 384 * 2 + 1024  # float16 on disk
    c2 = EmbeddingCache(tmp_path, SHA)
    assert all(v is not None for v in c2.lookup(texts[::97]))
    assert c2.misses == 0


def _overwrite_rows(d: Path, rows: dict[int, np.ndarray], *, keep_digest: bool = False) -> None:
    """Change rows of the .npy in place (memory-mapped: same file, same size)."""
    (json_path,) = d.glob("*.json")
    (npy_path,) = d.glob("*.npy")
    arr = np.load(npy_path, mmap_mode="r+", allow_pickle=False)
    for row, value in rows.items():
        arr[row] = value
    arr.flush()
    del arr
    if keep_digest:  # a tampering that also fixed up the recorded digest
        import hashlib

        meta = json.loads(json_path.read_text())
        (segment,) = meta["segments"]
        segment["sha256"] = hashlib.sha256(npy_path.read_bytes()).hexdigest()
        json_path.write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "bad",
    [
        np.full(8, np.nan, dtype=np.float16),
        np.full(8, np.inf, dtype=np.float16),
        np.zeros(8, dtype=np.float16),
        np.full(8, 3.0, dtype=np.float16),  # norm 8.5, not a unit vector
    ],
    ids=["nan", "inf", "zero", "not-unit"],
)
def test_a_bad_cached_row_is_a_miss_and_is_re_embedded(
    tmp_path: Path, bad: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    texts = ["a", "b", "c"]
    v = vecs(3)
    c = EmbeddingCache(tmp_path, SHA)
    c.store(texts, v)
    c.flush()
    _overwrite_rows(tmp_path, {1: bad}, keep_digest=True)
    with caplog.at_level(logging.WARNING, logger="build_index.cache"):
        again = EmbeddingCache(tmp_path, SHA)
        got = again.lookup(texts)
    assert got[0] is not None and got[2] is not None and got[1] is None
    assert again.rejected == 1 and "re-embedded" in caplog.text
    again.store(["b"], v[1:2])  # what the build does with a miss
    again.flush()
    fixed = EmbeddingCache(tmp_path, SHA).lookup(texts)
    assert all(x is not None for x in fixed)
    assert np.allclose(fixed[1], v[1], atol=1e-3)


def test_vectors_changed_behind_the_cache_are_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A well-formed unit vector written over a row (it would steer retrieval) no longer
    matches the digest the cache recorded: the whole file is ignored, all re-embedded."""
    c = EmbeddingCache(tmp_path, SHA)
    c.store(["a", "b"], vecs(2))
    c.flush()
    _overwrite_rows(tmp_path, {0: vecs(1, seed=9)[0].astype(np.float16)})
    with caplog.at_level(logging.WARNING, logger="build_index.cache"):
        again = EmbeddingCache(tmp_path, SHA)
    assert again.lookup(["a", "b"]) == [None, None]
    assert "unreadable" in caplog.text and "digest" in caplog.text


def test_a_nan_row_never_stops_a_build(tmp_path: Path) -> None:
    """The pipeline with a cache whose row went NaN: the build succeeds, the index
    holds finite vectors (it stopped with a raw traceback before)."""
    from build_index.embedder import get_model
    from build_index.pipeline import BuildConfig, build
    from build_index.types import PageInput

    pages = [
        PageInput(url=f"p{i}/", html=f'<h1 id="h">Page {i}</h1><p>Text number {i}.</p>', title="")
        for i in range(3)
    ]
    cache = tmp_path / "cache"
    build(pages, tmp_path / "one", BuildConfig(cache_dir=cache))
    embeddings = cache / "embeddings"
    (npy_path,) = embeddings.glob("*.npy")
    rows = np.load(npy_path, allow_pickle=False).shape[0]
    _overwrite_rows(
        embeddings,
        {r: np.full(get_model("all-MiniLM-L6-v2").dim, np.nan) for r in range(rows)},
        keep_digest=True,
    )
    report = build(pages, tmp_path / "two", BuildConfig(cache_dir=cache))
    assert report.cached == 0
    vectors = np.load(tmp_path / "two" / "vectors.npy", allow_pickle=False)
    assert np.isfinite(vectors.astype(np.float32)).all()


def _segments(meta: Path) -> int:
    """How many flushes the cache's ``.json`` names (0 before the first)."""
    try:
        return len(json.loads(meta.read_text())["segments"])
    except FileNotFoundError:
        return 0


_KILLED_BUILD = """
import sys
from pathlib import Path
from build_index import pipeline
from tests.pages import numbered_pages
pipeline.CACHE_FLUSH_S = 0.2
config = pipeline.BuildConfig(cache_dir=Path(sys.argv[2]))
pipeline.build(numbered_pages(int(sys.argv[3])), Path(sys.argv[1]), config)
"""


def test_a_killed_build_keeps_what_it_flushed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A real build process, killed (SIGKILL) while it embeds: the vectors it flushed
    before are on disk and readable, and the next build embeds only the rest."""
    from build_index.embedder import get_model
    from build_index.pipeline import BuildConfig, build

    n = 600
    spec = get_model()
    out, cache_dir = tmp_path / "index", tmp_path / "cache"
    meta = cache_dir / "embeddings" / f"embeddings-{spec.vectors_id[:12]}.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_BUILD, str(out), str(cache_dir), str(n)], cwd=REPO
    )
    try:
        deadline = time.monotonic() + 600
        while _segments(meta) < 2:  # two flushes, a second or so into embedding
            assert proc.poll() is None, "the build ended before it flushed the cache twice"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.1)  # the kill lands anywhere, mid-flush too
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "manifest.json").exists(), "the build finished before it was killed"

    with caplog.at_level(logging.WARNING, logger="build_index.cache"):
        flushed = len(EmbeddingCache(cache_dir / "embeddings", spec.vectors_id))
    assert "unreadable" not in caplog.text
    report = build(numbered_pages(n), out, BuildConfig(cache_dir=cache_dir))
    assert 0 < flushed < report.chunks, (flushed, report.chunks)
    assert report.cached == flushed
    assert report.embedded == report.chunks - flushed
    again = build(numbered_pages(n + 1), tmp_path / "again", BuildConfig(cache_dir=cache_dir))
    assert (again.cached, again.embedded) == (report.chunks, again.chunks - report.chunks)


def test_each_flush_appends_a_segment_and_many_are_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush writes only what is new (one more .npy); past MAX_SEGMENTS they become one."""
    from build_index import cache as cache_module

    monkeypatch.setattr(cache_module, "MAX_SEGMENTS", 3)
    v = vecs(8)
    c = EmbeddingCache(tmp_path, SHA)
    for i in range(3):
        c.store([f"t{2 * i}", f"t{2 * i + 1}"], v[2 * i : 2 * i + 2])
        c.flush()
        assert len(list(tmp_path.glob("*.npy"))) == i + 1
    again = EmbeddingCache(tmp_path, SHA)
    got = again.lookup([f"t{i}" for i in range(6)])
    assert all(g is not None and np.allclose(g, v[i], atol=1e-3) for i, g in enumerate(got))
    again.store(["t6", "t7"], v[6:8])
    again.flush()  # a fourth segment would pass MAX_SEGMENTS: one file of all 8 rows
    (npy,) = tmp_path.glob("*.npy")
    assert np.load(npy, allow_pickle=False).shape == (8, 8)
    final = EmbeddingCache(tmp_path, SHA).lookup([f"t{i}" for i in range(8)])
    assert all(g is not None and np.allclose(g, v[i], atol=1e-3) for i, g in enumerate(final))


def test_a_version_1_cache_is_read(tmp_path: Path) -> None:
    """The one-file layout earlier releases wrote still hits (and is rewritten as version 2)."""
    import hashlib

    v = vecs(2)
    npy = tmp_path / f"embeddings-{SHA[:12]}-0123456789ab.npy"
    np.save(npy, v.astype(np.float16), allow_pickle=False)
    meta = {
        "format": "anchored-embedding-cache",
        "version": 1,
        "model_sha256": SHA,
        "dim": 8,
        "dtype": "float16",
        "vectors": npy.name,
        "sha256": hashlib.sha256(npy.read_bytes()).hexdigest(),
        "keys": [cache_key(SHA, "a"), cache_key(SHA, "b")],
    }
    (tmp_path / f"embeddings-{SHA[:12]}.json").write_text(json.dumps(meta))
    c = EmbeddingCache(tmp_path, SHA)
    got = c.lookup(["a", "b"])
    assert all(g is not None and np.allclose(g, v[i], atol=1e-3) for i, g in enumerate(got))
    c.store(["c"], vecs(1, seed=3))
    c.flush()
    (json_path,) = tmp_path.glob("*.json")
    assert json.loads(json_path.read_text())["version"] == 2
    assert len(EmbeddingCache(tmp_path, SHA)) == 3


def test_lookup_into_fills_one_array(tmp_path: Path) -> None:
    """Hits are written into the caller's rows, misses left as they were; no list of arrays."""
    v = vecs(3)
    c = EmbeddingCache(tmp_path, SHA)
    c.store(["a", "c"], v[[0, 2]])
    c.flush()
    c.store(["b"], v[1:2])  # pending, not flushed: found too
    out = np.full((4, 8), 7.0, dtype=np.float32)
    found = c.lookup_into(["a", "x", "b", "c"], out)
    assert found.tolist() == [True, False, True, True]
    assert np.allclose(out[[0, 2, 3]], v[[0, 1, 2]], atol=1e-3)
    assert (out[1] == 7.0).all()
    assert (c.hits, c.misses) == (3, 1)
    with pytest.raises(ValueError, match="shape"):
        c.lookup_into(["a"], np.zeros((1, 4), dtype=np.float32))


def test_a_failed_build_keeps_the_batches_it_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedder fails on its third batch: the two batches before it are in the cache,
    and the next build embeds only the rest."""
    from build_index import pipeline
    from build_index.embedder import Embedder, get_model
    from build_index.pipeline import BuildConfig, build

    real = Embedder._run
    calls = []

    def failing(self: Embedder, *args: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("the machine ran out of memory")
        return real(self, *args)

    monkeypatch.setattr(pipeline, "CACHE_FLUSH_S", 3600.0)  # only the final flush
    monkeypatch.setattr(Embedder, "_run", failing)
    cache_dir = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="out of memory"):
        build(numbered_pages(200), tmp_path / "index", BuildConfig(cache_dir=cache_dir))
    kept = len(EmbeddingCache(cache_dir / "embeddings", get_model().vectors_id))
    monkeypatch.setattr(Embedder, "_run", real)
    report = build(numbered_pages(200), tmp_path / "index", BuildConfig(cache_dir=cache_dir))
    assert 0 < kept < report.chunks
    assert (report.cached, report.embedded) == (kept, report.chunks - kept)
