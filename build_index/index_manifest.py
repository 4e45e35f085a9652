"""The names and records of index format version 1: its files, its manifest, its model.

:mod:`build_index.index_writer` writes an index with these names and
:mod:`build_index.index_reader` reads it back; :mod:`build_index.index_format`
describes the format and is where both are imported from.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NotRequired, Protocol, TypedDict

from build_index.bm25 import BM25_FILES
from build_index.errors import IndexFormatError

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
MODEL_DESCRIPTOR_FORMAT: Final = "anchored-model"
MODEL_DESCRIPTOR_VERSION: Final = 1
REQUIRED_FILES: Final[frozenset[str]] = frozenset(
    {CHUNKS, SECTIONS, VECTORS, SCALES, MODEL_FILE, MODEL_TOKENIZER, MODEL_JSON, *BM25_FILES}
)


class ModelRecordLike(Protocol):
    """The fields of a model's record (:func:`model_record`)."""

    @property
    def name(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def dim(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def pooling(self) -> str: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def query_prefix(self) -> str: ...
    @property
    def passage_prefix(self) -> str: ...
    @property
    def compute(self) -> str: ...


class ModelSpecLike(ModelRecordLike, Protocol):
    """What the index code reads of the embedder's (frozen) ``ModelSpec`` (``ModelInfo.from_spec``,
    ``reuse``), without importing the embedder."""

    @property
    def vectors_id(self) -> str: ...
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
    compute: str = ""

    @classmethod
    def from_spec(cls, spec: ModelSpecLike) -> ModelInfo:
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
            compute=spec.compute,
        )

    @property
    def dtype(self) -> str:
        """The ``dtype`` index format version 1 has always recorded: ``int8``, whatever
        the model file's own descriptor says (multilingual-e5-small's: ``q4``)."""
        return "int8"

    def descriptor(self) -> dict[str, Any]:
        """``anchored-model.json``: the model's descriptor without local paths."""
        return model_descriptor(self)


def model_descriptor(model: ModelRecordLike) -> dict[str, Any]:
    """``anchored-model.json`` of a model folder or an index: its record and the names
    of its two files (``model.onnx``, ``tokenizer.json``)."""
    return {
        "format": MODEL_DESCRIPTOR_FORMAT,
        "version": MODEL_DESCRIPTOR_VERSION,
        **model_record(model),
        "onnx": MODEL_FILE,
        "tokenizer": MODEL_TOKENIZER,
    }


def model_record(model: ModelRecordLike) -> dict[str, Any]:
    """What identifies a model's vectors: the manifest's ``model`` record and the
    descriptor's fields, without file names or paths (one writer for both, and for
    ``ModelSpec.describe``). ``compute`` is left out when empty, so records of models
    without it stay as they were."""
    record: dict[str, Any] = {
        "name": model.name,
        "sha256": model.sha256,
        "dim": int(model.dim),
        "dtype": model.dtype,
        "pooling": model.pooling,
        "max_tokens": int(model.max_tokens),
        "query_prefix": model.query_prefix,
        "passage_prefix": model.passage_prefix,
    }
    if model.compute:
        record["compute"] = model.compute
    return record


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


def build_id_of(files: Mapping[str, FileEntry]) -> str:
    """The content hash of an index: sha256 over its sorted (name, sha256) pairs, 16 hex."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{files[name]['sha256']}\n".encode())
    return digest.hexdigest()[:16]


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
