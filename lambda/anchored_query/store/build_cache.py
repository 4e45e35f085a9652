"""The local cache of downloaded index builds (``/tmp/anchored/<build_id>/`` on Lambda).

A file with its final name in a build folder is always a verified one (it is
written under a temporary :func:`part_name`, checked, then renamed); the
build's manifest is written last and marks the build complete. Every build
folder the cache creates carries :data:`CACHE_MARKER`, written before anything
else: eviction deletes only folders that carry it, so nothing else kept under
the cache directory (feedback, another tool's files) is ever removed. What
fills a build folder (the S3 downloads) is :mod:`anchored_query.store.s3_source`.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import uuid
from pathlib import Path

from anchored_query.store import snapshot
from anchored_query.store.source import NO_SPACE, IndexStoreError
from build_index.errors import IndexFormatError
from build_index.publish import MANIFEST

CACHE_MARKER = ".anchored-cache-build"
_SPACE_MARGIN = 16 * 1024 * 1024  # leave some room in /tmp for everything else


class BuildCache:
    """The build folders under ``directory``, at most ``max_builds`` of them kept."""

    def __init__(self, directory: Path, max_builds: int = 2) -> None:
        self.directory = directory
        self.max_builds = max(1, max_builds)

    def is_complete(self, build_dir: Path, manifest_sha256: str) -> bool:
        """True when a cached build has the pointer's manifest and every file at its size."""
        try:
            raw = (build_dir / MANIFEST).read_bytes()
            manifest = snapshot.read_manifest(raw, str(build_dir / MANIFEST))
        except (OSError, IndexFormatError):
            return False
        if hashlib.sha256(raw).hexdigest() != manifest_sha256:
            return False
        return all(has(build_dir / name, size) for name, (_, size) in manifest.files.items())

    def verified_files(self, exclude: Path) -> dict[tuple[str, int], Path]:
        """(sha256, size) -> path of every verified file in the other cached builds."""
        found: dict[tuple[str, int], Path] = {}
        for other in self.builds():
            if other == exclude:
                continue
            try:
                raw = (other / MANIFEST).read_bytes()
                files = snapshot.read_manifest(raw, str(other / MANIFEST)).files
            except (OSError, IndexFormatError):
                continue  # incomplete: its files are not known to be verified
            for name, (sha, size) in files.items():
                if has(other / name, size):
                    found.setdefault((sha, size), other / name)
        return found

    def builds(self) -> list[Path]:
        """The build folders this cache created (named by their build id, with the marker)."""
        if not self.directory.is_dir():
            return []
        return [
            p
            for p in self.directory.iterdir()
            if not p.name.startswith(".") and not p.is_symlink() and p.is_dir() and _is_marked(p)
        ]

    def evict(self, keep: set[str]) -> None:
        """Delete cached builds other than ``keep`` (so at most ``max_builds`` remain).

        Only folders the cache created itself (:data:`CACHE_MARKER`) are candidates.
        """
        builds = sorted(self.builds(), key=lambda p: p.stat().st_mtime, reverse=True)
        room = self.max_builds - len(keep)
        for build_dir in builds:
            if build_dir.name in keep:
                continue
            if room > 0 and (build_dir / MANIFEST).is_file():
                room -= 1
                continue
            shutil.rmtree(build_dir, ignore_errors=True)

    def check_space(self, build_id: str, needed: int) -> None:
        """Raise :class:`IndexStoreError` (``NO_SPACE``) unless ``needed`` bytes fit."""
        free = shutil.disk_usage(self.directory).free
        if needed + _SPACE_MARGIN > free:
            raise IndexStoreError(
                f"no space left in {self.directory} for index build {build_id}: it needs "
                f"{needed} bytes, {free} are free; give the function more ephemeral storage "
                "(EphemeralStorage in template.yaml)",
                NO_SPACE,
            )


def make_build_dir(build_dir: Path, build_id: str) -> None:
    """Create (or adopt, when it is the cache's own) the folder of one cached build."""
    if build_dir.is_symlink() or (build_dir.exists() and not build_dir.is_dir()):
        raise IndexStoreError(f"{build_dir} is in the way of the index cache; remove it")
    # Another instance sharing the cache may be writing the marker this instant: its
    # temporary file (part_name) is there before the marker is. That is not foreign.
    if (
        build_dir.is_dir()
        and not _is_marked(build_dir)
        and any(not _is_part(p) for p in build_dir.iterdir())
    ):
        raise IndexStoreError(
            f"{build_dir} holds files the index cache did not write; move them away or "
            "set ANCHORED_CACHE_DIR to a folder of its own"
        )
    build_dir.mkdir(parents=True, exist_ok=True)
    marker = build_dir / CACHE_MARKER
    if not marker.is_file():
        write_atomic(marker, f"anchored index cache: build {build_id}\n".encode())


def _is_marked(build_dir: Path) -> bool:
    return (build_dir / CACHE_MARKER).is_file()


def _is_part(path: Path) -> bool:
    """Whether ``path`` is named as :func:`part_name` names a file being written."""
    return path.name.startswith(".") and path.name.endswith(".part")


def has(path: Path, size: int) -> bool:
    """A cached file with its final name exists and has its size (it was verified on write)."""
    try:
        return path.stat().st_size == size
    except OSError:
        return False


def part_name(dest: Path) -> Path:
    """The temporary name ``dest`` is written under before it is renamed into place."""
    return dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.part")


def link_or_copy(source: Path, dest: Path) -> None:
    """Hard-link ``source`` to ``dest`` (same file system, no extra space), else copy it."""
    tmp = part_name(dest)
    try:
        try:
            os.link(source, tmp)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise
            shutil.copyfile(source, tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` under a temporary name, then rename it into place."""
    tmp = part_name(path)
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
