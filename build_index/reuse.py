"""The published build is the cache: reuse its vectors for chunks whose text is unchanged.

A fresh CI runner has no ``.anchored/cache``; it does have the store. Before
embedding, the pipeline opens the build that is live there (``current.json`` →
its manifest → ``chunks.jsonl``, ``vectors.npy``, ``vector_scales.npy``; or the
same three files of an index folder) and takes the vector of every chunk whose
embedded text is the same and whose model is the same. Only the rest is embedded.

Nothing is taken on trust. A published build is refused (:class:`ReuseRefused`,
whose message names why) unless: the manifest matches the checksum
``current.json`` gives and its ``build_id`` matches its file list; it was
embedded with the same model file (sha256), dimension, pooling, token limit,
passage prefix and compute, and with the same embedded-text layout; each of the three files
has the size and sha256 the manifest lists; the arrays have the manifest's
shape and dtype; and every row is a finite unit vector once dequantised.

The index stores vectors as int8 with a per-row scale. Quantising a
dequantised row again gives the same int8 row, so a reused chunk ends up in the
new index exactly as the published build held it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from build_index.cache import cache_key
from build_index.errors import AnchoredError, IndexFormatError
from build_index.hashing import sha256_file
from build_index.index_format import (
    CHUNKS,
    MANIFEST,
    MODEL_FILE,
    SCALES,
    VECTORS,
    build_id_of,
    parse_manifest,
)
from build_index.index_manifest import ModelSpecLike
from build_index.types import Chunk

__all__ = ["PublishedVectors", "ReuseRefused", "chunk_from_record", "open_published"]

log = logging.getLogger("anchored")

TextOf = Callable[[Chunk], str]
#: |norm - 1| allowed for a dequantised row (int8 rounding moves it by ~1e-3).
NORM_TOLERANCE = 0.02
_ROWS = 1024  # rows checked at a time (float32 temporaries of 1.5 MB each)


class ReuseRefused(AnchoredError):
    """The published build cannot be used as a cache; the message says why."""


@dataclass
class PublishedVectors:
    """The vectors of one published build, keyed like the embedding cache."""

    where: str
    build_id: str
    rows: dict[str, int]  # cache_key(model, embedded text) -> row
    vectors: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]

    def __len__(self) -> int:
        return len(self.rows)

    def lookup(self, keys: Sequence[str]) -> list[npt.NDArray[np.float32] | None]:
        """The dequantised float32 vector for each key, or None where the build has none."""
        out: list[npt.NDArray[np.float32] | None] = []
        for key in keys:
            row = self.rows.get(key)
            if row is None:
                out.append(None)
            else:
                out.append(self.vectors[row].astype(np.float32) * self.scales[row])
        return out


def chunk_from_record(record: dict[str, Any]) -> Chunk:
    """A :class:`Chunk` from a ``chunks.jsonl`` row (what embedding_text needs)."""
    return Chunk(
        id=str(record["id"]),
        page=str(record["page"]),
        anchor=str(record.get("anchor", "")),
        title=str(record.get("title", "")),
        heading_path=[str(h) for h in record.get("heading_path", [])],
        type=record.get("type", "text"),
        text=str(record["text"]),
        parent=str(record.get("parent", "")),
        offsets=(0, 0),
        header=str(record.get("header", "")),
    )


def _check_manifest(
    raw: bytes, where: str, spec: ModelSpecLike, text_version: int, build_id: str | None
) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = dict(parse_manifest(raw, where))
    except IndexFormatError as exc:
        raise ReuseRefused(str(exc)) from None
    files = manifest["files"]
    if build_id is not None and manifest["build_id"] != build_id:
        raise ReuseRefused(f"{where} names build {manifest['build_id']}, current.json {build_id}")
    if build_id_of(files) != manifest["build_id"]:
        raise ReuseRefused(f"{where} was altered: its build_id does not match its file list")
    for name in (CHUNKS, VECTORS, SCALES, MODEL_FILE):
        if name not in files:
            raise ReuseRefused(f"{where} does not list {name}")
    model = manifest["model"]
    ours = {
        "sha256": spec.sha256,
        "dim": spec.dim,
        "pooling": spec.pooling,
        "max_tokens": spec.max_tokens,
        "passage_prefix": spec.passage_prefix,
        "compute": spec.compute,
    }
    differ = [k for k, v in ours.items() if model.get(k, "" if k == "compute" else None) != v]
    if differ:
        raise ReuseRefused(
            f"it was embedded with another model ({model.get('name')!r}, sha256 "
            f"{str(model.get('sha256'))[:12]}…; differs in {', '.join(differ)}) than this "
            f"build's {spec.name!r} ({spec.sha256[:12]}…)"
        )
    if files[MODEL_FILE]["sha256"] != spec.sha256:
        raise ReuseRefused(f"its {MODEL_FILE} is not the model its manifest names")
    extra = manifest.get("extra")
    theirs = extra.get("embedding_text") if isinstance(extra, dict) else None
    if theirs != text_version:
        raise ReuseRefused(
            f"its chunks were embedded with text layout {theirs!r}, this Anchored uses "
            f"{text_version} (built by another version)"
        )
    return manifest


def _load(
    folder: Path, manifest: dict[str, Any], where: str, spec: ModelSpecLike, text_of: TextOf
) -> PublishedVectors:
    """Check the three files in ``folder`` against ``manifest`` and key their rows."""
    for name in (CHUNKS, VECTORS, SCALES):
        entry = manifest["files"][name]
        path = folder / name
        try:
            size = path.stat().st_size
        except OSError:
            raise ReuseRefused(f"{name} is missing from {where}") from None
        if size != entry["size"] or sha256_file(path) != entry["sha256"]:
            raise ReuseRefused(f"{name} in {where} does not match its sha256 in the manifest")
    n = int(manifest["counts"]["chunks"])
    try:
        vectors = np.load(folder / VECTORS, allow_pickle=False)
        scales = np.load(folder / SCALES, allow_pickle=False)
    except ValueError as exc:
        raise ReuseRefused(f"cannot read the vectors of {where} ({exc})") from None
    if vectors.dtype != np.int8 or vectors.shape != (n, spec.dim):
        raise ReuseRefused(
            f"{VECTORS} is {vectors.dtype} {vectors.shape}, not int8 ({n}, {spec.dim})"
        )
    if scales.dtype != np.float32 or scales.shape != (n,):
        raise ReuseRefused(f"{SCALES} is {scales.dtype} {scales.shape}, not float32 ({n},)")
    if not np.isfinite(scales).all():
        raise ReuseRefused(f"{SCALES} of {where} holds NaN or infinity")
    for start in range(0, n, _ROWS):
        block = vectors[start : start + _ROWS].astype(np.float32)
        norms = np.linalg.norm(block, axis=1) * scales[start : start + _ROWS]
        bad = np.flatnonzero(np.abs(norms - 1.0) > NORM_TOLERANCE)
        if bad.size:
            row = start + int(bad[0])
            raise ReuseRefused(
                f"row {row} of {where} is not a unit vector (norm {norms[bad[0]]:.3f})"
            )
    rows: dict[str, int] = {}
    count = 0
    with (folder / CHUNKS).open("rb") as fh:
        for i, line in enumerate(fh):
            count += 1
            if i >= n:
                raise ReuseRefused(f"{CHUNKS} of {where} has more rows than the manifest counts")
            try:
                chunk = chunk_from_record(json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise ReuseRefused(f"row {i} of {CHUNKS} in {where} is malformed ({exc})") from None
            rows.setdefault(cache_key(spec.vectors_id, text_of(chunk)), i)
    if count != n:
        raise ReuseRefused(f"{CHUNKS} of {where} has {count} rows, the manifest counts {n}")
    return PublishedVectors(where, str(manifest["build_id"]), rows, vectors, scales)


def open_local(
    folder: Path, spec: ModelSpecLike, text_of: TextOf, text_version: int
) -> PublishedVectors:
    """The vectors of the index in ``folder``; raises ReuseRefused naming what is wrong."""
    where = str(folder)
    try:
        raw = (folder / MANIFEST).read_bytes()
    except OSError as exc:
        raise ReuseRefused(f"cannot read {folder / MANIFEST} ({exc.strerror or exc})") from None
    manifest = _check_manifest(raw, str(folder / MANIFEST), spec, text_version, None)
    return _load(folder, manifest, where, spec, text_of)


def open_s3(
    url: str,
    spec: ModelSpecLike,
    text_of: TextOf,
    text_version: int,
    *,
    client: Any = None,
    skip: frozenset[str] = frozenset(),
) -> PublishedVectors | None:
    """The vectors of the build live at ``url`` (None when nothing is published there,
    or when the live build is one of ``skip``, already read from elsewhere).

    Downloads only the manifest, ``chunks.jsonl`` and the two vector files.
    Raises ReuseRefused naming what is wrong (unreadable store included).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    from build_index.publish import BUILDS, S3Location, make_client, read_pointer

    loc = S3Location.parse(url)
    s3 = client or make_client()
    try:
        pointer, _ = read_pointer(s3, loc)
        if pointer is None or pointer.build_id in skip:
            return None
        raw = s3.get_object(Bucket=loc.bucket, Key=loc.key(pointer.manifest))["Body"].read()
        where = loc.url(pointer.manifest)
        if hashlib.sha256(raw).hexdigest() != pointer.manifest_sha256:
            raise ReuseRefused(f"{where} does not match the checksum current.json gives for it")
        manifest = _check_manifest(raw, where, spec, text_version, pointer.build_id)
        with tempfile.TemporaryDirectory(prefix="anchored-reuse-") as tmp:
            for name in (CHUNKS, VECTORS, SCALES):
                key = loc.key(BUILDS, pointer.build_id, name)
                body = s3.get_object(Bucket=loc.bucket, Key=key)["Body"]
                with open(Path(tmp) / name, "wb") as out:
                    while block := body.read(1 << 20):
                        out.write(block)
            return _load(Path(tmp), manifest, loc.url(BUILDS, pointer.build_id), spec, text_of)
    except (ClientError, BotoCoreError, AnchoredError, OSError) as exc:
        if isinstance(exc, ReuseRefused):
            raise
        raise ReuseRefused(f"cannot read it ({exc})") from None


def open_published(
    source: str | Path,
    spec: ModelSpecLike,
    text_of: TextOf,
    text_version: int,
    *,
    client: Any = None,
    skip: frozenset[str] = frozenset(),
) -> PublishedVectors | None:
    """:func:`open_s3` for ``s3://`` sources, :func:`open_local` for folders (None if empty)."""
    if str(source).startswith("s3://"):
        return open_s3(str(source), spec, text_of, text_version, client=client, skip=skip)
    folder = Path(source)
    if not (folder / MANIFEST).is_file():
        return None
    return open_local(folder, spec, text_of, text_version)
