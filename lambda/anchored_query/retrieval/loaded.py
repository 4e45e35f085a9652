"""One loaded build, as every stage after loading reads it: the index and its retriever
(the engine loads and swaps it; ``versions`` sets the version it serves)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from anchored_query.retrieval.ranking import Retriever
from build_index.index_format import Index


@dataclass(frozen=True)
class Loaded:
    """One loaded build: everything a request needs, swapped as a unit."""

    index: Index
    retriever: Retriever
    path: Path
    loaded_at: float
    version: str | None = None  # the version it serves (versions.py), None: unversioned
