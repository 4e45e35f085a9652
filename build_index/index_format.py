"""Index format version 1: the writer and the one reader of an index directory.

An index is a flat directory (see ``site/reference`` and DESIGN.md):

=====================  ==========================================================
``manifest.json``      format, version, build_id, created, site_url, model,
                       tokenizer, bm25, counts, files (sha256 + size of each)
``chunks.jsonl``       one chunk a line (row i = vector row i = BM25 chunk id i)
``sections.jsonl``     one section (a chunk's parent) a line
``vectors.npy``        int8 (n, dim), symmetric per-row quantisation
``vector_scales.npy``  float32 (n,): row i ≈ ``vectors[i] * scales[i]``
``bm25_*.npy``         term → chunk CSR weights, plus ``vocab.json`` (``bm25.py``)
``model.onnx``         the embedding model that embedded the chunks, with its
``tokenizer.json``     tokenizer and ``anchored-model.json`` (its descriptor)
=====================  ==========================================================

``write_index`` builds the directory beside its destination, fsyncs it and
swaps it into place, so a reader never sees half an index. ``read_index``
checks the manifest (format, version, every file's size and sha256, the model
hash, the tokenizer settings) before it touches any array, and refuses a
mismatch with a message that names it. No pickle anywhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final, NotRequired, Protocol, TypedDict, overload

import numpy as np
import numpy.typing as npt

from build_index.bm25 import BM25_FILES, BM25Index
from build_index.errors import IndexFormatError, ModelError
from build_index.tokenizer import TOKENIZER_SETTINGS
from build_index.types import Chunk, Section

__all__ = [
    "FORMAT",
    "REQUIRED_FILES",
    "VERSION",
    "FileEntry",
    "Index",
    "JsonlRows",
    "Manifest",
    "ModelInfo",
    "SectionMap",
    "read_index",
    "write_index",
]

FORMAT: Final = "anchored-index"
VERSION: Final = 1
MANIFEST: Final = "manifest.json"
CHUNKS: Final = "chunks.jsonl"
SECTIONS: Final = "sections.jsonl"
VECTORS: Final = "vectors.npy"
SCALES: Final = "vector_scales.npy"
MODEL_FILE: Final = "model.onnx"
MODEL_TOKENIZER: Final = "tokenizer.json"
MODEL_JSON: Final = "anchored-model.json"
REQUIRED_FILES: Final[frozenset[str]] = frozenset(
    {CHUNKS, SECTIONS, VECTORS, SCALES, MODEL_FILE, MODEL_TOKENIZER, MODEL_JSON, *BM25_FILES}
)
_BLOCK: Final = 1 << 20  # bytes hashed/copied at a time
_DENSE_ROWS: Final = 1024  # int8 rows dequantised at a time: 1.5 MB float32, stays in cache
_STALE_TEMP_S: Final = 24 * 3600


# -- records ----------------------------------------------------------------


class _ModelSpecLike(Protocol):
    """What ``ModelInfo.from_spec`` reads from the embedder's (frozen) ``ModelSpec``."""

    @property
    def name(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def dim(self) -> int: ...
    @property
    def pooling(self) -> str: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def query_prefix(self) -> str: ...
    @property
    def passage_prefix(self) -> str: ...
    @property
    def path(self) -> Path: ...


@dataclass(frozen=True)
class ModelInfo:
    """The embedding model an index is built with; ``source_dir`` holds
    ``model.onnx`` and ``tokenizer.json``, which are copied into the index."""

    name: str
    sha256: str
    dim: int
    pooling: str
    max_tokens: int
    query_prefix: str
    passage_prefix: str
    source_dir: Path

    @classmethod
    def from_spec(cls, spec: _ModelSpecLike) -> ModelInfo:
        """From the embedder's ``ModelSpec`` (its ``path``: the model folder or its ONNX file)."""
        path = Path(spec.path)
        return cls(
            name=spec.name,
            sha256=spec.sha256,
            dim=int(spec.dim),
            pooling=spec.pooling,
            max_tokens=int(spec.max_tokens),
            query_prefix=spec.query_prefix,
            passage_prefix=spec.passage_prefix,
            source_dir=path.parent if path.suffix == ".onnx" else path,
        )

    def descriptor(self) -> dict[str, Any]:
        """``anchored-model.json``: the model's descriptor without local paths."""
        return {
            "format": "anchored-model",
            "version": 1,
            "name": self.name,
            "onnx": MODEL_FILE,
            "tokenizer": MODEL_TOKENIZER,
            "sha256": self.sha256,
            "dim": self.dim,
            "dtype": "int8",
            "pooling": self.pooling,
            "max_tokens": self.max_tokens,
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
        }


class FileEntry(TypedDict):
    """One file of an index, as listed in the manifest."""

    sha256: str
    size: int


class Manifest(TypedDict):
    """``manifest.json``, as written and as read back."""

    format: str
    version: int
    build_id: str
    created: str
    site_url: str | None
    model: dict[str, Any]
    tokenizer: dict[str, Any]
    bm25: dict[str, float]
    counts: dict[str, int]
    files: dict[str, FileEntry]
    extra: NotRequired[dict[str, Any]]


# -- writing ----------------------------------------------------------------


def write_index(
    out_dir: Path,
    *,
    sections: Sequence[Section],
    chunks: Sequence[Chunk],
    vectors: npt.NDArray[np.floating[Any]],
    bm25: BM25Index,
    model: ModelInfo,
    site_url: str | None,
    extra: dict[str, Any] | None = None,
) -> Manifest:
    """Write an index of ``chunks`` (row i = ``vectors[i]`` = BM25 chunk i) to ``out_dir``.

    ``vectors`` are float32 and normalised, one row of ``model.dim`` per chunk.
    The directory is replaced atomically: written and fsynced beside
    ``out_dir``, then swapped in; on any error the previous index stays.
    Raises ``ValueError`` for inconsistent inputs, ``ModelError`` when the
    model files are missing or do not match ``model.sha256``, and
    ``IndexFormatError`` when ``out_dir`` holds something that is not an index.
    """
    out_dir = Path(out_dir).absolute()
    matrix = _check_inputs(sections, chunks, vectors, bm25, model)
    _refuse_foreign_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(out_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes 0700; the index may be served by another user
        files = _write_files(tmp, sections, chunks, matrix, bm25, model)
        manifest: Manifest = {
            "format": FORMAT,
            "version": VERSION,
            "build_id": build_id_of(files),
            "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "site_url": site_url,
            "model": {
                "name": model.name,
                "sha256": model.sha256,
                "dim": model.dim,
                "dtype": "int8",
                "pooling": model.pooling,
                "max_tokens": model.max_tokens,
                "query_prefix": model.query_prefix,
                "passage_prefix": model.passage_prefix,
                "file": MODEL_FILE,
                "tokenizer_file": MODEL_TOKENIZER,
            },
            "tokenizer": dict(TOKENIZER_SETTINGS),
            "bm25": bm25.params,
            "counts": {
                "pages": len({s.page for s in sections} | {c.page for c in chunks}),
                "sections": len(sections),
                "chunks": len(chunks),
                "vocab": len(bm25.vocab),
            },
            "files": dict(sorted(files.items())),
        }
        if extra:
            manifest["extra"] = extra
        with _Sink(tmp / MANIFEST) as sink:
            text = json.dumps(manifest, indent=2, ensure_ascii=False, default=str)
            sink.write(text.encode() + b"\n")
        _fsync_dir(tmp)
        _swap_into_place(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    written: Manifest = json.loads(text)  # exactly what a reader gets (dates as text)
    return written


def build_id_of(files: Mapping[str, FileEntry]) -> str:
    """The content hash of an index: sha256 over its sorted (name, sha256) pairs, 16 hex."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{files[name]['sha256']}\n".encode())
    return digest.hexdigest()[:16]


def quantize(
    vectors: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Symmetric per-row int8 quantisation: ``row ≈ q * scale`` with ``|q| <= 127``."""
    n = len(vectors)
    q = np.empty(vectors.shape, dtype=np.int8)
    scales = np.empty(n, dtype=np.float32)
    for start in range(0, n, 8192):  # bounded float temporaries for large sites
        block = vectors[start : start + 8192]
        scale = np.abs(block).max(axis=1, initial=0.0) / np.float32(127)
        safe = np.where(scale > 0, scale, np.float32(1))
        q[start : start + 8192] = np.clip(np.rint(block / safe[:, None]), -127, 127)
        scales[start : start + 8192] = scale
    return q, scales


def _check_inputs(
    sections: Sequence[Section],
    chunks: Sequence[Chunk],
    vectors: npt.NDArray[np.floating[Any]],
    bm25: BM25Index,
    model: ModelInfo,
) -> npt.NDArray[np.float32]:
    """The vectors as float32 (n, dim), after checking that the parts fit together."""
    n = len(chunks)
    matrix = np.asarray(vectors, dtype=np.float32)
    if n == 0 and matrix.size == 0:
        matrix = matrix.reshape(0, model.dim)
    if matrix.shape != (n, model.dim):
        raise ValueError(f"vectors have shape {matrix.shape}, expected ({n}, {model.dim})")
    if not np.isfinite(matrix).all():
        raise ValueError("vectors contain NaN or infinity")
    if bm25.n_chunks != n:
        raise ValueError(f"the BM25 index covers {bm25.n_chunks} chunks, not {n}")
    section_ids = {s.id for s in sections}
    if len(section_ids) != len(sections):
        raise ValueError("section ids are not unique")
    seen: set[str] = set()
    for chunk in chunks:
        if chunk.id in seen:
            raise ValueError(f"chunk id {chunk.id!r} occurs twice")
        seen.add(chunk.id)
        if chunk.parent not in section_ids:
            raise ValueError(f"chunk {chunk.id!r} names parent {chunk.parent!r}, not a section")
    return matrix


def _write_files(
    tmp: Path,
    sections: Sequence[Section],
    chunks: Sequence[Chunk],
    matrix: npt.NDArray[np.float32],
    bm25: BM25Index,
    model: ModelInfo,
) -> dict[str, FileEntry]:
    """Every data file of the index (all but the manifest), fsynced; name -> entry."""
    files: dict[str, FileEntry] = {}
    files[CHUNKS] = _write_jsonl(tmp / CHUNKS, (_chunk_record(c) for c in chunks))
    files[SECTIONS] = _write_jsonl(tmp / SECTIONS, (_section_record(s) for s in sections))
    q, scales = quantize(matrix)
    for name, array in ((VECTORS, q), (SCALES, scales)):
        with _Sink(tmp / name) as sink:
            np.save(sink, array, allow_pickle=False)
        files[name] = sink.entry
    for name in bm25.save(tmp):
        files[name] = _seal(tmp / name)
    files[MODEL_FILE] = _copy_model_file(model.source_dir / MODEL_FILE, tmp / MODEL_FILE)
    if files[MODEL_FILE]["sha256"] != model.sha256:
        raise ModelError(
            f"{model.source_dir / MODEL_FILE} has sha256 {files[MODEL_FILE]['sha256']}, "
            f"but model {model.name!r} is pinned to {model.sha256}; reinstall the model"
        )
    files[MODEL_TOKENIZER] = _copy_model_file(
        model.source_dir / MODEL_TOKENIZER, tmp / MODEL_TOKENIZER
    )
    with _Sink(tmp / MODEL_JSON) as sink:
        sink.write(json.dumps(model.descriptor(), indent=2).encode() + b"\n")
    files[MODEL_JSON] = sink.entry
    return files


def _chunk_record(chunk: Chunk) -> dict[str, Any]:
    # "id", "page" (and "lang") first: JsonlRows reads those columns without parsing rows
    record: dict[str, Any] = {"id": chunk.id, "page": chunk.page}
    if chunk.lang:
        record["lang"] = chunk.lang
    record |= {
        "anchor": chunk.anchor,
        "title": chunk.title,
        "heading_path": list(chunk.heading_path),
        "type": chunk.type,
        "text": chunk.text,
        "parent": chunk.parent,
        "offsets": [int(chunk.offsets[0]), int(chunk.offsets[1])],
    }
    if chunk.header:
        record["header"] = chunk.header
    if chunk.meta:
        record["meta"] = chunk.meta
    return record


def _section_record(section: Section) -> dict[str, Any]:
    return {
        "id": section.id,
        "page": section.page,
        "anchor": section.anchor,
        "title": section.title,
        "heading_path": list(section.heading_path),
        "text": section.text,
        "meta": section.meta,
    }


class _Sink:
    """A binary file that hashes and counts what is written, fsynced on close."""

    def __init__(self, path: Path) -> None:
        self._file: IO[bytes] = open(path, "wb")  # noqa: SIM115 (closed in __exit__)
        self._hash = hashlib.sha256()
        self._size = 0
        self.entry: FileEntry = {"sha256": "", "size": 0}

    def write(self, data: bytes | memoryview) -> int:
        self._hash.update(data)
        self._size += len(data)
        return self._file.write(data)

    def __enter__(self) -> _Sink:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        finally:
            self._file.close()
        self.entry = {"sha256": self._hash.hexdigest(), "size": self._size}


def _write_jsonl(path: Path, records: Iterator[dict[str, Any]]) -> FileEntry:
    with _Sink(path) as sink:
        batch: list[str] = []
        for record in records:
            # default=str: page meta from YAML front matter may hold dates
            batch.append(json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str))
            if len(batch) >= 1024:
                sink.write(("\n".join(batch) + "\n").encode())
                batch.clear()
        if batch:
            sink.write(("\n".join(batch) + "\n").encode())
    return sink.entry


def _copy_model_file(source: Path, dest: Path) -> FileEntry:
    try:
        with open(source, "rb") as src, _Sink(dest) as sink:
            while block := src.read(_BLOCK):
                sink.write(block)
    except FileNotFoundError:
        raise ModelError(
            f"the embedding model file {source} is missing; reinstall the model"
        ) from None
    return sink.entry


def _seal(path: Path) -> FileEntry:
    """Hash and fsync a file that another module wrote."""
    digest = hashlib.sha256()
    with open(path, "rb+") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
        os.fsync(f.fileno())
    return {"sha256": digest.hexdigest(), "size": path.stat().st_size}


def _fsync_dir(path: Path) -> None:
    if os.name == "nt":  # directories cannot be opened (nor need fsync) on Windows
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _refuse_foreign_dir(out_dir: Path) -> None:
    """Never swap away a folder that is not an index (a typo must not delete the docs)."""
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MANIFEST).is_file():
        raise IndexFormatError(
            f"{out_dir} exists and is not an Anchored index (no {MANIFEST}); "
            "choose another output folder or empty this one"
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise IndexFormatError(f"{out_dir} is a file; choose a folder for the index")


def _remove_stale_temps(out_dir: Path) -> None:
    """Drop temp folders that a killed build left beside ``out_dir`` over a day ago."""
    cutoff = time.time() - _STALE_TEMP_S
    for stale in out_dir.parent.glob(f".{out_dir.name}.tmp-*"):
        with contextlib.suppress(OSError):
            if stale.is_dir() and stale.stat().st_mtime < cutoff:
                shutil.rmtree(stale, ignore_errors=True)


def _swap_into_place(tmp: Path, out_dir: Path) -> None:
    """Rename the old index away, the new one in, then delete the old one."""
    if not out_dir.exists():
        os.rename(tmp, out_dir)
        _fsync_dir(out_dir.parent)
        return
    old = out_dir.parent / f".{out_dir.name}.old-{uuid.uuid4().hex[:12]}"
    os.rename(out_dir, old)
    try:
        os.rename(tmp, out_dir)
    except BaseException:
        os.rename(old, out_dir)  # put the previous index back
        raise
    _fsync_dir(out_dir.parent)
    shutil.rmtree(old, ignore_errors=True)


# -- reading ----------------------------------------------------------------

# A line's leading string fields; the leading "\n" (the line before) gives the
# regex engine a literal prefix to search for, ~10x faster than "^" with re.M.
_JSON_CHARS: Final = rb'[^"\\\n]*(?:\\.[^"\\\n]*)*'  # a string's body, escapes included
_ID_RE: Final = re.compile(rb'\n\{"id":"(' + _JSON_CHARS + rb')"')
_PAGE_RE: Final = re.compile(rb'\n\{"id":"' + _JSON_CHARS + rb'","page":"(' + _JSON_CHARS + rb')"')
_LANG_RE: Final = re.compile(
    rb'\n\{"id":"' + _JSON_CHARS + rb'","page":"' + _JSON_CHARS + rb'","lang":"([a-z0-9-]*)"'
)
_ROW_CACHE: Final = 4096


class JsonlRows(Sequence[dict[str, Any]]):
    """The rows of a JSON Lines file, parsed when accessed (a few µs a row).

    Holds only the file's bytes and the line offsets, so 100k chunks cost
    their file size in memory and nothing to load. Returned dicts are shared
    with a small cache: treat them as read-only.
    """

    def __init__(self, data: bytes, where: str) -> None:
        self._data = data
        self._where = where
        ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A)
        if data and not data.endswith(b"\n"):
            ends = np.append(ends, len(data))
        self._ends = ends
        self._starts = np.concatenate([[0], ends[:-1] + 1]) if len(ends) else ends
        self._cache: dict[int, dict[str, Any]] = {}
        self._ids: list[str] | None = None
        self._rows_by_id: dict[str, int] | None = None
        self._pages: list[str] | None = None
        self._langs: list[str] | None = None

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = index + len(self) if index < 0 else index
        row = self._cache.get(i)
        if row is not None:
            return row
        if not 0 <= i < len(self):
            raise IndexError(f"row {index} of {len(self)}")
        try:
            row = json.loads(self._data[self._starts[i] : self._ends[i]])
        except ValueError as exc:
            raise IndexFormatError(f"{self._where} line {i + 1} is not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise IndexFormatError(f"{self._where} line {i + 1} is not a JSON object")
        if len(self._cache) >= _ROW_CACHE:
            self._cache.clear()
        self._cache[i] = row
        return row

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self)):
            yield self[i]

    @property
    def ids(self) -> list[str]:
        """Every row's ``id``, in row order (read without parsing the rows)."""
        if self._ids is None:
            self._ids = self._leading_column(_ID_RE, "id")
        return self._ids

    @property
    def pages(self) -> list[str]:
        """Every row's ``page``, in row order (for scope filters)."""
        if self._pages is None:
            self._pages = self._leading_column(_PAGE_RE, "page")
        return self._pages

    @property
    def langs(self) -> list[str]:
        """Every row's ``lang`` (the page's language, ``""`` when the row has none), in
        row order; an index written before the field existed gives all ``""`` at once."""
        if self._langs is None:
            if b'"lang":"' not in self._data:
                self._langs = [""] * len(self)
            else:
                first = _LANG_RE.match(b"\n" + self._data[: self._ends[0] + 1])
                found = ([first.group(1)] if first else []) + _LANG_RE.findall(self._data)
                if len(found) == len(self):
                    self._langs = [s.decode() for s in found]
                else:  # some rows without it (or another writer): parse
                    self._langs = [str(row.get("lang") or "") for row in self]
        return self._langs

    def row_of(self, row_id: str) -> int:
        """The row number of the row with ``id`` ``row_id`` (KeyError if none)."""
        if self._rows_by_id is None:
            self._rows_by_id = {row_id: i for i, row_id in enumerate(self.ids)}
        return self._rows_by_id[row_id]

    def _leading_column(self, pattern: re.Pattern[bytes], key: str) -> list[str]:
        # Our writer puts "id" (and for chunks "page") first; a regex over the
        # whole file is ~20x faster than parsing 100k rows. Anything else falls
        # back to parsing.
        first = pattern.match(b"\n" + self._data[: self._ends[0] + 1]) if len(self) else None
        found = ([first.group(1)] if first else []) + pattern.findall(self._data)
        if len(found) == len(self):
            return [json.loads(b'"' + s + b'"') if b"\\" in s else s.decode() for s in found]
        return [str(row[key]) for row in self]


class SectionMap(Mapping[str, dict[str, Any]]):
    """Sections by id (``page#anchor``), each parsed when accessed."""

    def __init__(self, rows: JsonlRows) -> None:
        self.rows = rows
        self._by_id = {section_id: i for i, section_id in enumerate(rows.ids)}

    def __getitem__(self, section_id: str) -> dict[str, Any]:
        return self.rows[self._by_id[section_id]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)


@dataclass(frozen=True, eq=False)
class Index:
    """A loaded, checked index: what the query side searches."""

    path: Path
    manifest: Manifest
    chunks: JsonlRows
    sections: SectionMap
    vectors: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]
    bm25: BM25Index

    @property
    def build_id(self) -> str:
        """The content hash that names this build."""
        return self.manifest["build_id"]

    @property
    def model_dir(self) -> Path:
        """The folder holding ``model.onnx``, ``tokenizer.json`` and ``anchored-model.json``."""
        return self.path

    @property
    def model(self) -> dict[str, Any]:
        """The manifest's model record (name, sha256, dim, prefixes, ...)."""
        return self.manifest["model"]

    def dense_scores(self, query_vec: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
        """Dot product of a normalised query vector with every chunk (≈ cosine), float32."""
        query = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        dim = self.vectors.shape[1]
        if query.shape != (dim,):
            raise ValueError(f"query vector has shape {query.shape}, expected ({dim},)")
        n = len(self.vectors)
        scores = np.empty(n, dtype=np.float32)
        # Dequantising in small blocks keeps float32 temporaries in cache (a
        # whole-matrix astype would need 4 bytes per weight).
        for start in range(0, n, _DENSE_ROWS):
            block = self.vectors[start : start + _DENSE_ROWS].astype(np.float32)
            np.dot(block, query, out=scores[start : start + _DENSE_ROWS])
        scores *= self.scales
        return scores


def read_index(
    path: Path,
    *,
    verify: bool = True,
    expected_model_sha256: str | None = None,
    mmap: bool = True,
) -> Index:
    """Open the index at ``path`` after checking its manifest.

    Checks format and version, that every listed file exists with its size
    and (``verify=True``) its sha256, that the model file is the manifest's
    model (and ``expected_model_sha256`` if given), and that the index was
    tokenized like this code tokenizes. Arrays are memory-mapped unless
    ``mmap=False``. Raises ``IndexFormatError`` naming what is wrong.
    """
    path = Path(path)
    howto = (
        "build one with `mkdocs build` (anchored plugin enabled) "
        f"or `anchored index SITE_DIR -o {path}`"
    )
    if not path.is_dir():
        raise IndexFormatError(f"no Anchored index at {path}: {howto}")
    try:
        raw = (path / MANIFEST).read_bytes()
    except FileNotFoundError:
        raise IndexFormatError(
            f"{path} has no {MANIFEST}, so it is not a complete Anchored index: {howto}"
        ) from None
    manifest = parse_manifest(raw, str(path / MANIFEST))
    _check_files(path, manifest, verify)
    _check_model_and_tokenizer(manifest, expected_model_sha256)
    return _load(path, manifest, mmap)


def parse_manifest(raw: bytes, where: str) -> Manifest:
    """Parse and check a manifest (format, version, the shape of each field)."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise IndexFormatError(f"{where} is not valid JSON ({exc}); rebuild the index") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise IndexFormatError(f"{where} is not an Anchored index manifest; rebuild the index")
    version = data.get("version")
    if version != VERSION:
        raise IndexFormatError(
            f"index format version {version} is not supported by this Anchored "
            f"(reads {VERSION}); rebuild the index or upgrade"
        )
    try:
        ok = (
            isinstance(data["build_id"], str)
            and isinstance(data["created"], str)
            and (data["site_url"] is None or isinstance(data["site_url"], str))
            and isinstance(data["model"]["sha256"], str)
            and isinstance(data["model"]["dim"], int)
            and isinstance(data["tokenizer"], dict)
            and isinstance(data["bm25"], dict)
            and all(isinstance(data["counts"][k], int) for k in ("sections", "chunks"))
            and all(
                isinstance(e["sha256"], str) and isinstance(e["size"], int)
                for e in data["files"].values()
            )
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise IndexFormatError(f"{where} lacks {exc}; rebuild the index") from None
    if not ok:
        raise IndexFormatError(f"{where} has a field of the wrong type; rebuild the index")
    manifest: Manifest = data  # type: ignore[assignment]  # checked above
    return manifest


def _check_files(path: Path, manifest: Manifest, verify: bool) -> None:
    files = manifest["files"]
    missing = sorted(REQUIRED_FILES - files.keys())
    if missing:
        raise IndexFormatError(
            f"the manifest of {path} does not list {', '.join(missing)}; rebuild the index"
        )
    if build_id_of(files) != manifest["build_id"]:
        raise IndexFormatError(
            f"the manifest of {path} was altered (its build_id does not match its files); "
            "rebuild the index"
        )
    for name, entry in sorted(files.items()):
        if "/" in name or "\\" in name or name in ("", ".", "..", MANIFEST):
            raise IndexFormatError(f"the manifest of {path} lists a bad file name {name!r}")
        file = path / name
        try:
            size = file.stat().st_size
        except FileNotFoundError:
            raise IndexFormatError(
                f"{name} is missing from the index at {path}; rebuild or re-download the index"
            ) from None
        if size != entry["size"]:
            raise IndexFormatError(
                f"{name} in {path} has {size} bytes, the manifest says {entry['size']}: "
                "the index is incomplete or was modified; rebuild or re-download it"
            )
        if verify and _sha256_file(file) != entry["sha256"]:
            raise IndexFormatError(
                f"{name} in {path} does not match its sha256 in the manifest: "
                "the file was modified or corrupted; rebuild or re-download the index"
            )


def _check_model_and_tokenizer(manifest: Manifest, expected_model_sha256: str | None) -> None:
    model_sha = manifest["model"]["sha256"]
    if manifest["files"][MODEL_FILE]["sha256"] != model_sha:
        raise IndexFormatError(
            f"{MODEL_FILE} is not the model the manifest names ({manifest['model'].get('name')}, "
            f"sha256 {model_sha}); rebuild the index"
        )
    if expected_model_sha256 is not None and expected_model_sha256.lower() != model_sha:
        raise IndexFormatError(
            f"the index was embedded with model {manifest['model'].get('name')!r} "
            f"(sha256 {model_sha}), not the expected one (sha256 {expected_model_sha256}); "
            "rebuild the index with the configured model"
        )
    if manifest["tokenizer"] != TOKENIZER_SETTINGS:
        theirs = manifest["tokenizer"]
        differ = sorted(
            k
            for k in theirs.keys() | TOKENIZER_SETTINGS.keys()
            if theirs.get(k) != TOKENIZER_SETTINGS.get(k)
        )
        raise IndexFormatError(
            f"the index was tokenized with {theirs.get('name')!r} but this Anchored tokenizes "
            f"with {TOKENIZER_SETTINGS['name']!r} (settings differ: {', '.join(differ)}); "
            "rebuild the index"
        )


def _load(path: Path, manifest: Manifest, mmap: bool) -> Index:
    mode: Any = "r" if mmap else None
    counts = manifest["counts"]
    dim = manifest["model"]["dim"]
    chunks = JsonlRows((path / CHUNKS).read_bytes(), str(path / CHUNKS))
    sections = SectionMap(JsonlRows((path / SECTIONS).read_bytes(), str(path / SECTIONS)))
    n = len(chunks)
    if n != counts["chunks"] or len(sections) != counts["sections"]:
        raise IndexFormatError(
            f"{path} holds {n} chunks and {len(sections)} sections, the manifest counts "
            f"{counts['chunks']} and {counts['sections']}; rebuild the index"
        )
    try:
        vectors = np.load(path / VECTORS, mmap_mode=mode, allow_pickle=False)
        scales = np.load(path / SCALES, mmap_mode=mode, allow_pickle=False)
    except ValueError as exc:
        raise IndexFormatError(f"cannot read the vectors in {path} ({exc}); rebuild") from None
    if vectors.dtype != np.int8 or vectors.shape != (n, dim):
        raise IndexFormatError(
            f"{VECTORS} is {vectors.dtype} {vectors.shape}, expected int8 ({n}, {dim}); rebuild"
        )
    if scales.dtype != np.float32 or scales.shape != (n,):
        raise IndexFormatError(
            f"{SCALES} is {scales.dtype} {scales.shape}, expected float32 ({n},)"
        )
    bm25 = BM25Index.load(path, mmap=mmap)
    if bm25.n_chunks != n:
        raise IndexFormatError(f"the BM25 index in {path} covers {bm25.n_chunks} chunks, not {n}")
    return Index(path, manifest, chunks, sections, vectors, scales, bm25)


def _sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
