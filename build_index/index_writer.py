"""Writing an index directory: every file hashed as written, fsynced, then swapped in.

``write_index`` builds the directory beside its destination, fsyncs it and
swaps it into place, so a reader never sees half an index (the format:
:mod:`build_index.index_format`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

import numpy as np
import numpy.typing as npt

from build_index.bm25 import BM25Index
from build_index.errors import IndexFormatError, ModelError
from build_index.index_manifest import (
    CHUNKS,
    FORMAT,
    MANIFEST,
    MODEL_FILE,
    MODEL_JSON,
    MODEL_TOKENIZER,
    SCALES,
    SECTIONS,
    VECTORS,
    VERSION,
    FileEntry,
    Manifest,
    ModelInfo,
    build_id_of,
    model_record,
)
from build_index.tokenizer import TOKENIZER_SETTINGS
from build_index.types import Chunk, Section

__all__ = ["QuantizedVectors", "quantize", "swap_into_place", "write_index"]

_BLOCK: Final = 1 << 20  # bytes hashed/copied at a time
_STALE_TEMP_S: Final = 24 * 3600


def write_index(
    out_dir: Path,
    *,
    sections: Sequence[Section],
    chunks: Sequence[Chunk],
    vectors: npt.NDArray[np.floating[Any]] | QuantizedVectors,
    bm25: BM25Index,
    model: ModelInfo,
    site_url: str | None,
    extra: dict[str, Any] | None = None,
) -> Manifest:
    """Write an index of ``chunks`` (row i = ``vectors[i]`` = BM25 chunk i) to ``out_dir``.

    ``vectors`` are float32 and normalised, one row of ``model.dim`` per chunk, or
    already quantised (:class:`QuantizedVectors`, what the build pipeline fills
    batch by batch): the files are the same bytes either way.
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
                **model_record(model),
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
        swap_into_place(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    written: Manifest = json.loads(text)  # exactly what a reader gets (dates as text)
    return written


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


@dataclass(frozen=True)
class QuantizedVectors:
    """Vectors as the index stores them, filled a block at a time: int8 rows and one
    float32 scale per row, quantised by :func:`quantize` (a row's result depends on
    that row alone, so block by block gives the bytes of the whole matrix at once).

    A build holds these instead of float32 rows: 388 B a chunk, not 1,536.
    """

    vectors: npt.NDArray[np.int8]  # (n, dim)
    scales: npt.NDArray[np.float32]  # (n,)

    @classmethod
    def zeros(cls, n: int, dim: int) -> QuantizedVectors:
        """``n`` rows of ``dim``, all zero until :meth:`put`."""
        return cls(np.zeros((n, dim), dtype=np.int8), np.zeros(n, dtype=np.float32))

    def __len__(self) -> int:
        return len(self.vectors)

    def put(
        self, rows: npt.NDArray[np.intp] | Sequence[int], block: npt.NDArray[np.float32]
    ) -> None:
        """Quantise the float32 ``block`` into ``rows`` (one row index per block row).

        A row that is not finite gets a NaN scale (and zeros), so that
        :func:`write_index` refuses it as it refuses float vectors with NaN.
        """
        at = np.asarray(rows, dtype=np.intp)
        finite = np.asarray(np.isfinite(block).all(axis=1))
        if not finite.all():
            block = np.where(finite[:, None], block, np.float32(0))
        q, scales = quantize(block)
        scales[~finite] = np.nan
        self.vectors[at] = q
        self.scales[at] = scales


def _check_inputs(
    sections: Sequence[Section],
    chunks: Sequence[Chunk],
    vectors: npt.NDArray[np.floating[Any]] | QuantizedVectors,
    bm25: BM25Index,
    model: ModelInfo,
) -> npt.NDArray[np.float32] | QuantizedVectors:
    """The vectors as float32 (n, dim) or as given quantised, after checking that the
    parts fit together."""
    n = len(chunks)
    matrix: npt.NDArray[np.float32] | QuantizedVectors
    if isinstance(vectors, QuantizedVectors):
        matrix = vectors
        q, scales = matrix.vectors, matrix.scales
        if (
            q.dtype != np.int8
            or q.shape != (n, model.dim)
            or scales.dtype != np.float32
            or scales.shape != (n,)
        ):
            raise ValueError(
                f"vectors are {q.dtype} {q.shape} with {scales.dtype} scales {scales.shape}, "
                f"expected int8 ({n}, {model.dim}) and float32 ({n},)"
            )
        finite = bool(np.isfinite(matrix.scales).all())
    else:
        matrix = np.asarray(vectors, dtype=np.float32)
        if n == 0 and matrix.size == 0:
            matrix = matrix.reshape(0, model.dim)
        if matrix.shape != (n, model.dim):
            raise ValueError(f"vectors have shape {matrix.shape}, expected ({n}, {model.dim})")
        finite = bool(np.isfinite(matrix).all())
    if not finite:
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
    matrix: npt.NDArray[np.float32] | QuantizedVectors,
    bm25: BM25Index,
    model: ModelInfo,
) -> dict[str, FileEntry]:
    """Every data file of the index (all but the manifest), fsynced; name -> entry."""
    files: dict[str, FileEntry] = {}
    files[CHUNKS] = _write_jsonl(tmp / CHUNKS, (_chunk_record(c) for c in chunks))
    files[SECTIONS] = _write_jsonl(tmp / SECTIONS, (_section_record(s) for s in sections))
    if isinstance(matrix, QuantizedVectors):
        q, scales = matrix.vectors, matrix.scales
    else:
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


def swap_into_place(tmp: Path, out_dir: Path) -> None:
    """Rename the old folder ``out_dir`` away and ``tmp`` in, then delete the old one (on
    a failed rename the old one is put back). Also what ``versions.py`` copies an index with."""
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
