"""The SHA-256 of a file: what a manifest records and every reader checks."""

from __future__ import annotations

import hashlib
import os


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of the file at ``path``, read in blocks (never whole into memory)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()
