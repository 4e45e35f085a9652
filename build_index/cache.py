"""Content-hash cache of passage embeddings, so a rebuild only embeds what changed.

An entry's key is ``sha256(model_sha256 + "\\0" + text)``, where ``model_sha256`` is
the model's ``ModelSpec.vectors_id`` (its file's hash and how it is run): the same
text embedded by another model file, or by the same file run another way, never
hits. On disk, per model, in the cache directory:

* ``embeddings-<model12>.json`` — ``{"format": "anchored-embedding-cache",
  "version": 2, "model_sha256", "dim", "dtype": "float16", "segments": [{"vectors":
  <npy name>, "sha256", "rows"}, ...], "keys": [hex key of row 0, row 1, ...]}``,
  rows numbered through the segments in order; this file is the commit point;
* ``embeddings-<model12>-<token>.npy`` — one segment's vectors, ``float16``
  ``(rows, dim)``, read with ``allow_pickle=False`` and memory-mapped (100k
  entries of 384 dims are 77 MB on disk, not in RAM).

A flush appends: what was stored since the last one becomes a new segment, then
the ``.json`` names it, so a build can flush every few seconds
(``pipeline.embed_chunks`` does) and a build that is killed keeps what it
flushed. A prune, a refused row, or more than ``MAX_SEGMENTS`` segments rewrite
them as one. A version 1 ``.json`` (one ``"vectors"`` file) is read as one segment.

Vectors are stored as float16: they are L2-normalised, so float16's ~1e-3
relative precision changes cosines by ~1e-6, far below the int8 quantisation
of the index itself. :meth:`EmbeddingCache.lookup_into` writes float32 rows into
the caller's array (one array for all chunks, no array per chunk).

Writes are atomic: a new ``.npy`` under a fresh name, then the ``.json`` via
``os.replace``, then ``.npy`` files it no longer names are removed. A missing, corrupt or
mismatching cache is logged as a warning and treated as empty; it never stops a
build.

Nothing read back is trusted as-is: the ``.json`` records each ``.npy``'s
SHA-256 (``"sha256"``; a file changed behind the cache's back is ignored
whole), and every row :meth:`EmbeddingCache.lookup_into` returns must be finite,
of the cache's dimension and of unit norm (within :data:`NORM_TOLERANCE`);
a row that is not is a miss, so the build embeds that text again and the next
flush replaces the row. (Someone who can rewrite both files can still plant
well-formed vectors: the cache trusts the build machine's own disk that far.)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from build_index.hashing import sha256_file

__all__ = ["EmbeddingCache", "cache_key"]

log = logging.getLogger(__name__)

CACHE_FORMAT = "anchored-embedding-cache"
CACHE_VERSION = 2
_READS_VERSIONS = (1, 2)
#: More segments than this and a flush rewrites them as one.
MAX_SEGMENTS = 16
_STORE_DTYPE = np.float16
_COPY_ROWS = 16384  # rows copied per step when rewriting the .npy
_LOOKUP_ROWS = 4096  # texts looked up per step: 6 MB of float32 temporaries at most
# float16 storage of a unit vector keeps its norm within ~1e-3; anything further off
# was not written by this cache.
NORM_TOLERANCE = 0.01


def cache_key(model_sha256: str, text: str) -> str:
    """Hex sha256 of ``model_sha256 + "\\0" + text`` (UTF-8)."""
    return hashlib.sha256(f"{model_sha256}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


class _Segment(NamedTuple):
    """One ``.npy`` of the cache: its name, its SHA-256 and its rows (memory-mapped)."""

    name: str
    sha256: str
    vectors: npt.NDArray[Any]  # float16 (rows, dim)


class EmbeddingCache:
    """Embeddings of passages keyed by (model, text), kept in ``directory``.

    Use :meth:`lookup_into` before embedding, :meth:`store` after (a batch at a
    time is fine), :meth:`flush` every so often and at the end of a build.
    ``hits`` / ``misses`` count lookups since opening.
    """

    def __init__(self, directory: str | os.PathLike[str], model_sha256: str) -> None:
        """Open (or start) the cache of ``model_sha256`` in ``directory``.

        Nothing is created on disk until :meth:`flush`.
        """
        self.directory = Path(directory)
        self.model_sha256 = model_sha256.lower()
        self.hits = 0
        self.misses = 0
        stem = f"embeddings-{self.model_sha256[:12]}"
        self._json_path = self.directory / f"{stem}.json"
        self._npy_prefix = f"{stem}-"
        self._dim: int | None = None
        self._segments: list[_Segment] = []
        self._starts = np.zeros(1, dtype=np.int64)  # first row of each segment, then the total
        self._keys: list[str] = []  # the key of every row on disk, in row order
        self._rows: dict[str, int] = {}  # key -> row on disk (refused rows left out)
        self._new_keys: list[str] = []
        self._new_blocks: list[npt.NDArray[np.float16]] = []  # rows of _new_keys, in order
        self._new_index: dict[str, int] = {}  # key -> position in _new_keys
        self._used: set[str] = set()
        self._dropped = False  # a row was refused: the next flush rewrites the file
        self.rejected = 0  # cached rows refused by lookup (not finite, not unit norm)
        self._load()

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        if not self._json_path.exists():
            return
        try:
            meta = json.loads(self._json_path.read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
            version = meta.get("version")
            if meta.get("format") != CACHE_FORMAT or version not in _READS_VERSIONS:
                raise ValueError(f"format/version {meta.get('format')!r}/{version!r}")
            if meta.get("model_sha256") != self.model_sha256:
                raise ValueError("it belongs to another model")
            keys = meta["keys"]
            dim = int(meta["dim"])
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ValueError("keys must be a list of strings")
            parts = meta["segments"] if version == 2 else [{**meta, "rows": len(keys)}]
            if not isinstance(parts, list):
                raise ValueError("segments must be a list")
            segments = [self._open_segment(part, dim) for part in parts]
            if sum(len(seg.vectors) for seg in segments) != len(keys):
                raise ValueError(f"the segments hold other than {len(keys)} rows")
        except Exception as exc:  # whatever is wrong with it, the build goes on
            log.warning(
                "embedding cache %s is unreadable (%s); ignoring it, chunks will be re-embedded",
                self._json_path,
                exc,
            )
            return
        self._dim = dim
        self._set_disk(segments, keys)

    def _open_segment(self, part: Any, dim: int) -> _Segment:
        name = str(part["vectors"])
        if Path(name).name != name or not name.startswith(self._npy_prefix):
            raise ValueError(f"bad vectors file name {name!r}")
        path = self.directory / name
        actual = sha256_file(path)
        digest = part.get("sha256")
        if digest is not None and actual != digest:
            raise ValueError("the vectors file does not match its recorded digest")
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
        rows = int(part["rows"])
        if arr.dtype != _STORE_DTYPE or arr.shape != (rows, dim):
            raise ValueError(f"vectors are {arr.dtype} {arr.shape}, expected float16 {(rows, dim)}")
        return _Segment(name, actual, arr)

    def _set_disk(self, segments: list[_Segment], keys: list[str]) -> None:
        self._segments = segments
        self._starts = np.cumsum([0, *(len(seg.vectors) for seg in segments)], dtype=np.int64)
        self._keys = keys
        self._rows = {k: i for i, k in enumerate(keys)}

    # ------------------------------------------------------------------ API
    def __len__(self) -> int:
        """Number of cached vectors (on disk and pending)."""
        return len(self._rows) + len(self._new_keys)

    def __bool__(self) -> bool:
        """Always true, even when empty: ``if cache:`` means "a cache was given"."""
        return True

    @property
    def dim(self) -> int | None:
        """Vector dimension, once known."""
        return self._dim

    def lookup_into(
        self, texts: Sequence[str], out: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.bool_]:
        """Write the cached float32 vector of ``texts[i]`` into ``out[i]`` for each text
        the cache holds; returns which it held. ``out`` is ``(len(texts), dim)``; rows of
        the other texts are not written (but a refused cached row is zeroed). Texts are
        looked up ``_LOOKUP_ROWS`` at a time, so 100k texts cost no array per text."""
        n = len(texts)
        found = np.zeros(n, dtype=np.bool_)
        if self._dim is None:  # nothing stored yet, nothing on disk
            self.misses += n
            return found
        if out.shape != (n, self._dim):
            raise ValueError(f"out has shape {out.shape}, expected ({n}, {self._dim})")
        for start in range(0, n, _LOOKUP_ROWS):
            keys = [cache_key(self.model_sha256, t) for t in texts[start : start + _LOOKUP_ROWS]]
            hit = self._fill(keys, out[start : start + len(keys)])
            found[start : start + len(keys)] = hit
            self._used.update(keys[i] for i in np.flatnonzero(hit))
        hits = int(found.sum())
        self.hits += hits
        self.misses += n - hits
        return found

    def _fill(self, keys: list[str], view: npt.NDArray[np.float32]) -> npt.NDArray[np.bool_]:
        """``lookup_into`` for one block: ``view`` is that block's rows of ``out``."""
        hit = np.zeros(len(keys), dtype=np.bool_)
        if self._rows:
            rows = np.fromiter((self._rows.get(k, -1) for k in keys), np.int64, len(keys))
            held = np.flatnonzero(rows >= 0)
            if len(held) == len(keys):  # the usual rebuild: all cached, read in place
                view[...] = self._gather(rows)
                good = _unit_rows(view)
                view[~good] = 0
            elif len(held):
                block = self._gather(rows[held]).astype(np.float32)
                good = _unit_rows(block)
                view[held[good]] = block[good]
            else:
                good = np.zeros(0, dtype=np.bool_)
            hit[held[good]] = True
            for i in held[~good]:
                self._refuse(keys[i])
        if self._new_keys:
            pending = self._pending()
            for i in np.flatnonzero(~hit):
                pos = self._new_index.get(keys[i])
                if pos is not None:
                    view[i] = pending[pos]
                    hit[i] = True
        return hit

    def lookup(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32] | None]:
        """The cached float32 vector of each text, or ``None`` where there is none (rows
        of one array; :meth:`lookup_into` fills an array the caller already has)."""
        if self._dim is None:
            self.misses += len(texts)
            return [None] * len(texts)
        vectors = np.zeros((len(texts), self._dim), dtype=np.float32)
        found = self.lookup_into(texts, vectors)
        return [vectors[i] if hit else None for i, hit in enumerate(found)]

    def _gather(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float16]:
        """The float16 vectors of on-disk ``rows`` (numbered across the segments)."""
        if len(self._segments) == 1:
            gathered: npt.NDArray[np.float16] = self._segments[0].vectors[rows]
            return gathered
        assert self._dim is not None
        out = np.empty((len(rows), self._dim), dtype=_STORE_DTYPE)
        owner = np.searchsorted(self._starts, rows, side="right") - 1
        for s, segment in enumerate(self._segments):
            mine = np.flatnonzero(owner == s)
            if len(mine):
                out[mine] = segment.vectors[rows[mine] - self._starts[s]]
        return out

    def _refuse(self, key: str) -> None:
        """Forget one bad row: it becomes a miss and the next flush drops it."""
        if self._rows.pop(key, None) is None:
            return  # the same text twice in one lookup
        if self.rejected == 0:
            log.warning(
                "embedding cache %s holds a vector that is not finite or not of unit norm; "
                "such chunks are re-embedded",
                self._json_path,
            )
        self.rejected += 1
        self._dropped = True

    def _pending(self) -> npt.NDArray[np.float16]:
        """The vectors of ``_new_keys`` as one array (joined once, when looked up)."""
        if len(self._new_blocks) > 1:
            self._new_blocks = [np.concatenate(self._new_blocks)]
        return self._new_blocks[0]

    def store(self, texts: Sequence[str], vectors: npt.ArrayLike) -> None:
        """Remember ``vectors[i]`` as the embedding of ``texts[i]`` (until :meth:`flush`)."""
        arr = np.asarray(vectors)
        if arr.ndim == 2 and not np.isfinite(arr).all():
            # Never cache what cannot be a real embedding (it would come back as a miss).
            good = np.isfinite(arr).all(axis=1)
            texts = [t for t, ok in zip(texts, good, strict=True) if ok]
            arr = arr[good]
        if arr.ndim != 2 or arr.shape[0] != len(texts):
            raise ValueError(f"expected {len(texts)} vectors, got an array of shape {arr.shape}")
        if self._dim is None:
            self._dim = int(arr.shape[1])
        elif arr.shape[1] != self._dim:
            raise ValueError(f"vectors have {arr.shape[1]} dims, the cache holds {self._dim}")
        kept: list[int] = []
        for i, text in enumerate(texts):
            key = cache_key(self.model_sha256, text)
            self._used.add(key)
            if key in self._rows or key in self._new_index:
                continue
            self._new_index[key] = len(self._new_keys)
            self._new_keys.append(key)
            kept.append(i)
        if kept:
            half = arr.astype(_STORE_DTYPE)
            self._new_blocks.append(half if len(kept) == len(half) else half[kept])

    def flush(self, *, prune: bool = False) -> None:
        """Write pending entries to disk atomically (as one more segment).

        With ``prune=True`` only the entries looked up (hit) or stored since the
        cache was opened are kept, so a cache follows the site instead of
        growing with every edit. Failing to write is logged, never raised.
        """
        if self._dim is None:
            return
        keep_old = [k for k in self._rows if not prune or k in self._used]
        rewrite = (
            self._dropped
            or len(keep_old) != len(self._rows)
            or len(self._segments) + bool(self._new_keys) > MAX_SEGMENTS
        )
        if not rewrite and not self._new_keys:
            return
        try:
            if rewrite:
                self._rewrite(keep_old)
            else:
                self._append()
        except OSError as exc:
            log.warning("could not write embedding cache %s: %s", self._json_path, exc)

    # ------------------------------------------------------------------ writing
    def _append(self) -> None:
        """The pending rows as one more segment; the rows on disk stay where they are."""
        segment = self._write_segment(iter(self._new_blocks), len(self._new_keys))
        self._commit([*self._segments, segment], self._keys + self._new_keys)

    def _rewrite(self, keep_old: list[str]) -> None:
        """Every kept row and the pending ones as one segment (drops the others)."""
        rows = np.fromiter((self._rows[k] for k in keep_old), dtype=np.int64, count=len(keep_old))

        def blocks() -> Iterator[npt.NDArray[np.float16]]:
            for start in range(0, len(rows), _COPY_ROWS):
                yield self._gather(rows[start : start + _COPY_ROWS])
            yield from self._new_blocks

        segment = self._write_segment(blocks(), len(keep_old) + len(self._new_keys))
        self._commit([segment], keep_old + self._new_keys)

    def _write_segment(self, blocks: Iterator[npt.NDArray[np.float16]], total: int) -> _Segment:
        assert self._dim is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{self._npy_prefix}{secrets.token_hex(6)}.npy"
        npy_path = self.directory / name
        tmp_npy = npy_path.with_name(name + ".tmp")
        out = np.lib.format.open_memmap(
            tmp_npy, mode="w+", dtype=_STORE_DTYPE, shape=(total, self._dim)
        )
        try:
            pos = 0
            for block in blocks:
                out[pos : pos + len(block)] = block
                pos += len(block)
            out.flush()
        finally:
            del out
        os.replace(tmp_npy, npy_path)
        vectors = np.load(npy_path, mmap_mode="r", allow_pickle=False)
        return _Segment(name, sha256_file(npy_path), vectors)

    def _commit(self, segments: list[_Segment], keys: list[str]) -> None:
        """Name ``segments`` in the ``.json`` (the commit point), then forget the rest."""
        meta = {
            "format": CACHE_FORMAT,
            "version": CACHE_VERSION,
            "model_sha256": self.model_sha256,
            "dim": self._dim,
            "dtype": "float16",
            "segments": [
                {"vectors": seg.name, "sha256": seg.sha256, "rows": len(seg.vectors)}
                for seg in segments
            ],
            "keys": keys,
        }
        tmp_json = self._json_path.with_name(self._json_path.name + ".tmp")
        tmp_json.write_text(json.dumps(meta, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp_json, self._json_path)  # the commit point

        self._set_disk(segments, keys)
        self._new_keys, self._new_blocks, self._new_index = [], [], {}
        self._dropped = False
        self._remove_stale(keep={seg.name for seg in segments})

    def _remove_stale(self, keep: set[str]) -> None:
        """Delete vector files of this model that the JSON no longer names."""
        for path in self.directory.glob(f"{self._npy_prefix}*.npy*"):
            if path.name not in keep:
                try:
                    path.unlink()
                except OSError:  # pragma: no cover - e.g. still mapped on Windows
                    log.debug("could not remove stale cache file %s", path)


def _unit_rows(block: npt.NDArray[np.float32]) -> npt.NDArray[np.bool_]:
    """Which rows are finite unit vectors (a NaN or infinity makes the norm NaN or inf)."""
    norms = np.sqrt(np.einsum("ij,ij->i", block, block))
    good: npt.NDArray[np.bool_] = np.abs(norms - 1.0) <= NORM_TOLERANCE
    return good
