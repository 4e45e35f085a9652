"""Private, verified copies of a local index folder, so no one can change a file under a reader.

The query side memory-maps index files. A file changed in place under a mapping
(``truncate -s 128 vectors.npy`` while ``anchored serve`` runs) kills the
process with SIGBUS on the next read, and a same-size overwrite would be served
unverified. So a local index is never read where it lies: it is copied into a
snapshot folder of this process, every file hashed against the manifest as it
is copied (a torn or tampered copy is refused and removed), and only the
verified copy is opened. Nobody else writes into a snapshot.

A change of the source folder is noticed by its :func:`signature` (size,
mtime and inode of the manifest and of every file it lists): a new snapshot is
then made and verified; if it fails, the previous snapshot stays in use.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import shutil
import threading
import uuid
from pathlib import Path

from build_index.errors import IndexFormatError
from build_index.publish import MANIFEST, ManifestFiles

log = logging.getLogger(__name__)

Signature = tuple[tuple[str, int, int, int], ...]

_BLOCK = 1 << 20
_lock = threading.Lock()
_made: set[Path] = set()  # this process's snapshots, removed at exit


def read_manifest(raw: bytes, where: str) -> ManifestFiles:
    """A manifest's files, refusing names no file system takes (NUL, control characters)."""
    manifest = ManifestFiles.from_json(raw, where)
    for name in manifest.files:
        if any(ord(ch) < 0x20 or ch == "\x7f" for ch in name):
            raise IndexFormatError(
                f"{where}: file name {name!r} holds a control character; publish the index again"
            )
    return manifest


def signature(directory: Path) -> tuple[bytes, ManifestFiles, Signature]:
    """The manifest of ``directory`` and the stat signature of it and its files.

    Raises FileNotFoundError without a manifest, IndexFormatError for a bad one.
    """
    raw = (directory / MANIFEST).read_bytes()
    manifest = read_manifest(raw, str(directory / MANIFEST))
    parts = []
    for name in (MANIFEST, *sorted(manifest.files)):
        try:
            st = (directory / name).stat()
            parts.append((name, st.st_size, st.st_mtime_ns, st.st_ino))
        except FileNotFoundError:
            parts.append((name, -1, 0, 0))
    return raw, manifest, tuple(parts)


def make_snapshot(directory: Path, root: Path) -> tuple[Path, ManifestFiles, Signature]:
    """Copy ``directory``'s index into a new folder under ``root``, verifying every file.

    Raises IndexFormatError (naming the file) when a file is missing, has another
    size or hash than the manifest says, or the folder changed during the copy;
    nothing is left behind then.
    """
    raw, manifest, before = signature(directory)
    _remove_orphans(root)
    dest = root / f"{os.getpid()}-{manifest.build_id}-{uuid.uuid4().hex[:8]}"
    dest.mkdir(parents=True)
    with _lock:
        _made.add(dest)
    try:
        for name, (sha, size) in sorted(manifest.files.items()):
            _copy_verified(directory / name, dest / name, sha, size)
        (dest / MANIFEST).write_bytes(raw)
        _, _, after = signature(directory)
        if after != before:
            raise IndexFormatError(
                f"the index at {directory} changed while it was being read; "
                "the previous build stays in use"
            )
    except BaseException:
        discard(dest)
        raise
    return dest, manifest, before


def _copy_verified(source: Path, dest: Path, sha: str, size: int) -> None:
    digest, count = hashlib.sha256(), 0
    try:
        with source.open("rb") as src, dest.open("wb") as out:
            while block := src.read(_BLOCK):
                count += len(block)
                if count > size:
                    break
                digest.update(block)
                out.write(block)
    except FileNotFoundError:
        raise IndexFormatError(
            f"{source.name} is missing from the index at {source.parent}; rebuild the index"
        ) from None
    if count != size or digest.hexdigest() != sha:
        raise IndexFormatError(
            f"{source} does not match its manifest (got {count} bytes with sha256 "
            f"{digest.hexdigest()[:12]}…, expected {size} bytes with sha256 {sha[:12]}…): "
            "it was modified or is being rebuilt; the previous build stays in use"
        )


def discard(snapshot: Path) -> None:
    """Remove one snapshot (a reader that still maps a file keeps its inode)."""
    shutil.rmtree(snapshot, ignore_errors=True)
    with _lock:
        _made.discard(snapshot)


def _remove_orphans(root: Path) -> None:
    """Remove snapshots left by processes that are gone (killed before their atexit)."""
    if not root.is_dir():
        return
    for path in root.iterdir():
        pid = path.name.split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass  # alive (another user's process): leave it


@atexit.register
def _remove_all() -> None:
    with _lock:
        made = list(_made)
    for path in made:
        with contextlib.suppress(OSError):
            shutil.rmtree(path)
