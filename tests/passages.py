"""A passage for tests that build one by hand (answerers, spans, support)."""

from __future__ import annotations

from typing import Any

from anchored_query.types import Passage


def make_passage(text: str, **fields: Any) -> Passage:
    """A one-section passage holding ``text`` on ``page/``; ``fields`` override the rest."""
    values: dict[str, Any] = {
        "n": 1,
        "chunk_ids": ["p~0"],
        "section_id": "p",
        "page": "page/",
        "anchor": "p",
        "title": "Page",
        "heading_path": ["Page"],
        "text": text,
        "highlight": text,
    }
    values.update(fields)
    return Passage(**values)
