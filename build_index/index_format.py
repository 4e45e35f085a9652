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

:mod:`build_index.index_manifest` names these files and the manifest's
records, :mod:`build_index.index_writer` writes an index and
:mod:`build_index.index_reader` reads one; this module is where the rest of
the code imports them from.

``write_index`` builds the directory beside its destination, fsyncs it and
swaps it into place, so a reader never sees half an index. ``read_index``
checks the manifest (format, version, every file's size and sha256, the model
hash, the tokenizer settings) before it touches any array, and refuses a
mismatch with a message that names it. No pickle anywhere.
"""

from __future__ import annotations

from build_index.index_manifest import (
    CHUNKS,
    FORMAT,
    MANIFEST,
    MODEL_FILE,
    MODEL_JSON,
    MODEL_TOKENIZER,
    REQUIRED_FILES,
    SCALES,
    SECTIONS,
    VECTORS,
    VERSION,
    FileEntry,
    Manifest,
    ModelInfo,
    build_id_of,
    parse_manifest,
)
from build_index.index_reader import Index, JsonlRows, SectionMap, read_index
from build_index.index_writer import quantize, write_index

__all__ = [
    "CHUNKS",
    "FORMAT",
    "MANIFEST",
    "MODEL_FILE",
    "MODEL_JSON",
    "MODEL_TOKENIZER",
    "REQUIRED_FILES",
    "SCALES",
    "SECTIONS",
    "VECTORS",
    "VERSION",
    "FileEntry",
    "Index",
    "JsonlRows",
    "Manifest",
    "ModelInfo",
    "SectionMap",
    "build_id_of",
    "parse_manifest",
    "quantize",
    "read_index",
    "write_index",
]
