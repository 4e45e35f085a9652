"""Content-hash cache of passage embeddings, so a rebuild only embeds what changed.

An entry's key is ``sha256(model_sha256 + "\\0" + text)``: the same text embedded
by another model file never hits. On disk, per model, in the cache directory:

* ``embeddings-<model12>.json`` — ``{"format": "anchored-embedding-cache",
  "version": 1, "model_sha256", "dim", "dtype": "float16", "vectors": <npy name>,
  "keys": [hex key of row 0, row 1, ...]}``; this file is the commit point;
* ``embeddings-<model12>-<token>.npy`` — the vectors, ``float16`` ``(n, dim)``,
  row i belonging to ``keys[i]``, read with ``allow_pickle=False`` and
  memory-mapped (100k entries of 384 dims are 77 MB on disk, not in RAM).

Vectors are stored as float16: they are L2-normalised, so float16's ~1e-3
relative precision changes cosines by ~1e-6, far below the int8 quantisation
of the index itself. :meth:`EmbeddingCache.lookup` returns float32 copies.

Writes are atomic: a new ``.npy`` under a fresh name, then the ``.json`` via
``os.replace``, then the old ``.npy`` is removed. A missing, corrupt or
mismatching cache is logged as a warning and treated as empty; it never stops a
build.

Nothing read back is trusted as-is: the ``.json`` records the ``.npy``'s
SHA-256 (``"sha256"``; a file changed behind the cache's back is ignored
whole), and every row returned by :meth:`EmbeddingCache.lookup` must be finite,
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["EmbeddingCache", "cache_key"]

log = logging.getLogger(__name__)

CACHE_FORMAT = "anchored-embedding-cache"
CACHE_VERSION = 1
_STORE_DTYPE = np.float16
_COPY_ROWS = 16384  # rows copied per step when rewriting the .npy
# float16 storage of a unit vector keeps its norm within ~1e-3; anything further off
# was not written by this cache.
NORM_TOLERANCE = 0.01


def cache_key(model_sha256: str, text: str) -> str:
    """Hex sha256 of ``model_sha256 + "\\0" + text`` (UTF-8)."""
    return hashlib.sha256(f"{model_sha256}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache:
    """Embeddings of passages keyed by (model file, text), kept in ``directory``.

    Use :meth:`lookup` before embedding, :meth:`store` after, :meth:`flush` at
    the end of a build. ``hits`` / ``misses`` count lookups since opening.
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
        self._rows: dict[str, int] = {}  # key -> row in self._disk
        self._disk: npt.NDArray[Any] | None = None  # memory-mapped float16 (n, dim)
        self._disk_name: str | None = None
        self._new_keys: list[str] = []
        self._new_vecs: list[npt.NDArray[np.float16]] = []
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
            if meta.get("format") != CACHE_FORMAT or meta.get("version") != CACHE_VERSION:
                raise ValueError(f"format/version {meta.get('format')!r}/{meta.get('version')!r}")
            if meta.get("model_sha256") != self.model_sha256:
                raise ValueError("it belongs to another model")
            keys = meta["keys"]
            dim = int(meta["dim"])
            name = str(meta["vectors"])
            if Path(name).name != name or not name.startswith(self._npy_prefix):
                raise ValueError(f"bad vectors file name {name!r}")
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ValueError("keys must be a list of strings")
            digest = meta.get("sha256")
            if digest is not None and _file_sha256(self.directory / name) != digest:
                raise ValueError("the vectors file does not match its recorded digest")
            arr = np.load(self.directory / name, mmap_mode="r", allow_pickle=False)
            if arr.dtype != _STORE_DTYPE or arr.shape != (len(keys), dim):
                raise ValueError(
                    f"vectors are {arr.dtype} {arr.shape}, expected float16 {(len(keys), dim)}"
                )
        except Exception as exc:  # whatever is wrong with it, the build goes on
            log.warning(
                "embedding cache %s is unreadable (%s); ignoring it, chunks will be re-embedded",
                self._json_path,
                exc,
            )
            return
        self._dim = dim
        self._rows = {k: i for i, k in enumerate(keys)}
        self._disk = arr
        self._disk_name = name

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

    def lookup(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32] | None]:
        """The cached float32 vector of each text, or ``None`` where there is none."""
        out: list[npt.NDArray[np.float32] | None] = []
        for text in texts:
            key = cache_key(self.model_sha256, text)
            vec: npt.NDArray[np.float32] | None = None
            row = self._rows.get(key)
            if row is not None and self._disk is not None:
                vec = np.asarray(self._disk[row], dtype=np.float32)
                if not self._valid(vec):
                    self._refuse(key)
                    vec = None
            else:
                pos = self._new_index.get(key)
                if pos is not None:
                    vec = self._new_vecs[pos].astype(np.float32)
            if vec is None:
                self.misses += 1
            else:
                self.hits += 1
                self._used.add(key)
            out.append(vec)
        return out

    def _valid(self, vec: npt.NDArray[np.float32]) -> bool:
        if vec.shape != (self._dim,) or not np.isfinite(vec).all():
            return False
        return abs(float(np.linalg.norm(vec)) - 1.0) <= NORM_TOLERANCE

    def _refuse(self, key: str) -> None:
        """Forget one bad row: it becomes a miss and the next flush drops it."""
        if self.rejected == 0:
            log.warning(
                "embedding cache %s holds a vector that is not finite or not of unit norm; "
                "such chunks are re-embedded",
                self._json_path,
            )
        self.rejected += 1
        del self._rows[key]
        self._dropped = True

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
        half = arr.astype(_STORE_DTYPE)
        for text, vec in zip(texts, half, strict=True):
            key = cache_key(self.model_sha256, text)
            self._used.add(key)
            if key in self._rows or key in self._new_index:
                continue
            self._new_index[key] = len(self._new_keys)
            self._new_keys.append(key)
            self._new_vecs.append(vec)

    def flush(self, *, prune: bool = False) -> None:
        """Write pending entries to disk atomically.

        With ``prune=True`` only the entries looked up (hit) or stored since the
        cache was opened are kept, so a cache follows the site instead of
        growing with every edit. Failing to write is logged, never raised.
        """
        keep_old = [k for k in self._rows if not prune or k in self._used]
        unchanged = len(keep_old) == len(self._rows) and not self._new_keys and not self._dropped
        if unchanged or self._dim is None:
            return
        try:
            self._write(keep_old)
        except OSError as exc:
            log.warning("could not write embedding cache %s: %s", self._json_path, exc)

    # ------------------------------------------------------------------ writing
    def _write(self, keep_old: list[str]) -> None:
        assert self._dim is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{self._npy_prefix}{secrets.token_hex(6)}.npy"
        npy_path = self.directory / name
        total = len(keep_old) + len(self._new_keys)
        tmp_npy = npy_path.with_name(name + ".tmp")
        out = np.lib.format.open_memmap(
            tmp_npy, mode="w+", dtype=_STORE_DTYPE, shape=(total, self._dim)
        )
        try:
            pos = 0
            if keep_old and self._disk is not None:
                old_rows = np.fromiter((self._rows[k] for k in keep_old), dtype=np.int64)
                contiguous = len(keep_old) == self._disk.shape[0]
                for start in range(0, len(keep_old), _COPY_ROWS):
                    stop = min(start + _COPY_ROWS, len(keep_old))
                    if contiguous:
                        out[start:stop] = self._disk[start:stop]
                    else:
                        out[start:stop] = self._disk[old_rows[start:stop]]
                pos = len(keep_old)
            for start in range(0, len(self._new_vecs), _COPY_ROWS):
                chunk = self._new_vecs[start : start + _COPY_ROWS]
                out[pos : pos + len(chunk)] = np.stack(chunk)
                pos += len(chunk)
            out.flush()
        finally:
            del out
        os.replace(tmp_npy, npy_path)

        keys = keep_old + self._new_keys
        digest = _file_sha256(npy_path)
        meta = {
            "format": CACHE_FORMAT,
            "version": CACHE_VERSION,
            "model_sha256": self.model_sha256,
            "dim": self._dim,
            "dtype": "float16",
            "vectors": name,
            "sha256": digest,
            "keys": keys,
        }
        tmp_json = self._json_path.with_name(self._json_path.name + ".tmp")
        tmp_json.write_text(json.dumps(meta, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp_json, self._json_path)  # the commit point

        self._disk = np.load(npy_path, mmap_mode="r", allow_pickle=False)
        self._disk_name = name
        self._rows = {k: i for i, k in enumerate(keys)}
        self._new_keys, self._new_vecs, self._new_index = [], [], {}
        self._dropped = False
        self._remove_stale(keep=name)

    def _remove_stale(self, keep: str) -> None:
        """Delete vector files of this model that the JSON no longer names."""
        for path in self.directory.glob(f"{self._npy_prefix}*.npy*"):
            if path.name != keep:
                try:
                    path.unlink()
                except OSError:  # pragma: no cover - e.g. still mapped on Windows
                    log.debug("could not remove stale cache file %s", path)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
