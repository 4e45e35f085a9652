"""Reading an index directory: the manifest checked first, rows parsed when accessed.

``read_index`` checks the manifest (format, version, every file's size and
sha256, the model hash, the tokenizer settings) before it touches any array,
and refuses a mismatch with a message that names it (the format:
:mod:`build_index.index_format`). No pickle anywhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, overload

import numpy as np
import numpy.typing as npt

from build_index.bm25 import BM25Index
from build_index.errors import IndexFormatError
from build_index.hashing import sha256_file
from build_index.index_manifest import (
    CHUNKS,
    MANIFEST,
    MODEL_FILE,
    REQUIRED_FILES,
    SCALES,
    SECTIONS,
    VECTORS,
    Manifest,
    build_id_of,
    parse_manifest,
)
from build_index.tokenizer import TOKENIZER_SETTINGS

__all__ = ["Index", "JsonlRows", "SectionMap", "read_index"]

_DENSE_ROWS: Final = 1024  # int8 rows dequantised at a time: 1.5 MB float32, stays in cache

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
        if verify and sha256_file(file) != entry["sha256"]:
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
