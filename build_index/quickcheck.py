"""Is the index already up to date? Answered with the standard library only.

An unchanged ``mkdocs build`` should cost almost nothing, so this check runs
before numpy, onnxruntime, the tokenizers or the HTML parser are imported: the
caller hashes its pages and settings (:func:`inputs_digest`) and compares the
digest with the stamp file the last successful build wrote
(:func:`write_stamp`). The stamp also records the index's build id and file
sizes and the size and mtime of the model files, so a deleted or replaced
index or a reinstalled model is noticed by a few ``stat`` calls. Readers still
verify every checksum before they use an index.

Stamp file (JSON)::

    {"format": "anchored-build-stamp", "version": 1, "inputs": <hex>,
     "index": <index dir>, "build_id": <id>, "files": {name: size},
     "model_files": {path: [size, mtime_ns]}, "chunks": n, "pages": n,
     "pages_skipped": n, "warnings": [...]}
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = ["Stamp", "inputs_digest", "read_unchanged", "write_stamp"]

STAMP_FORMAT = "anchored-build-stamp"
STAMP_VERSION = 1


class _PageLike(Protocol):
    @property
    def url(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def html(self) -> str: ...
    @property
    def meta(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Stamp:
    """What the last build left behind, as far as an unchanged rebuild needs it."""

    build_id: str
    chunks: int = 0
    pages: int = 0
    pages_skipped: int = 0
    warnings: list[str] = field(default_factory=list)


def inputs_digest(pages: Iterable[_PageLike], settings: Mapping[str, Any]) -> str:
    """sha256 over ``settings`` (JSON, sorted keys) and every page (sorted by URL)."""
    digest = hashlib.sha256()
    digest.update(json.dumps(dict(settings), sort_keys=True, default=str).encode())
    for page in sorted(pages, key=lambda p: p.url):
        meta = json.dumps(page.meta, sort_keys=True, default=str)
        for part in (page.url, page.title, meta, page.html):
            digest.update(b"\0" + part.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _file_stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def write_stamp(
    stamp_file: Path,
    digest: str,
    index_dir: Path,
    manifest: Mapping[str, Any],
    *,
    model_files: Sequence[str | os.PathLike[str]] = (),
    pages: int = 0,
    pages_skipped: int = 0,
    warnings: Sequence[str] = (),
) -> None:
    """Record that ``index_dir`` (with ``manifest``) is the index of inputs ``digest``.

    Written atomically; failing to write only costs the next build its shortcut.
    """
    data = {
        "format": STAMP_FORMAT,
        "version": STAMP_VERSION,
        "inputs": digest,
        "index": str(Path(index_dir).absolute()),
        "build_id": manifest["build_id"],
        "files": {name: int(entry["size"]) for name, entry in manifest["files"].items()},
        "model_files": {str(p): _file_stat(str(p)) for p in model_files},
        "chunks": int(manifest["counts"]["chunks"]),
        "pages": pages,
        "pages_skipped": pages_skipped,
        "warnings": list(warnings),
    }
    tmp = stamp_file.with_name(stamp_file.name + ".tmp")
    try:
        stamp_file.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, stamp_file)
    except OSError:
        tmp.unlink(missing_ok=True)


def read_unchanged(stamp_file: Path, digest: str, index_dir: Path) -> Stamp | None:
    """The stamp when ``index_dir`` is still the index of inputs ``digest``, else None.

    Checks: same digest and index folder; the folder's manifest names the same
    build and every file has its recorded size; the model files have their
    recorded size and mtime. Any doubt (missing, unreadable, other) is None.
    """
    try:
        data = json.loads(stamp_file.read_text(encoding="utf-8"))
        if data.get("format") != STAMP_FORMAT or data.get("version") != STAMP_VERSION:
            return None
        if data["inputs"] != digest or data["index"] != str(Path(index_dir).absolute()):
            return None
        manifest = json.loads((index_dir / "manifest.json").read_text("utf-8"))
        if manifest.get("build_id") != data["build_id"]:
            return None
        files = {name: entry["size"] for name, entry in manifest["files"].items()}
        if files != data["files"]:
            return None
        for name, size in files.items():
            if (index_dir / name).stat().st_size != size:
                return None
        for path, recorded in data["model_files"].items():
            if recorded is None or _file_stat(path) != recorded:
                return None
        return Stamp(
            build_id=str(data["build_id"]),
            chunks=int(data["chunks"]),
            pages=int(data["pages"]),
            pages_skipped=int(data["pages_skipped"]),
            warnings=[str(w) for w in data["warnings"]],
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
