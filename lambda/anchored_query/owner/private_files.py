"""Files only their owner reads: the question log's batches and readers' feedback.

Questions and comments are what readers typed, so a local copy does not follow the
umask: every file is written ``0600`` (atomically, synced) in folders ``0700``, and a
folder left wider by an earlier version is narrowed when it is written into again.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700


def private_folder(path: Path, root: Path) -> None:
    """Make ``path`` (``root`` or a folder under it); it and each folder up to ``root``
    end up ``0700`` (``mkdir``'s mode reaches only the last folder it makes)."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    folder = path
    while folder == root or root in folder.parents:
        with contextlib.suppress(OSError):  # not ours to change: left as it is
            if folder.stat().st_mode & 0o077:
                folder.chmod(PRIVATE_FOLDER)
        folder = folder.parent


def write_private(path: Path, data: bytes, root: Path) -> None:
    """Write ``data`` to ``path`` under ``root``: a ``0600`` temporary file, synced, then
    renamed (a failed write leaves no partial file), and the folder synced."""
    private_folder(path.parent, root)
    tmp = path.with_name(f".{path.stem}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        with open(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
