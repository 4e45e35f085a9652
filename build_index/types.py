"""The plain records that flow through the pipeline (no behaviour here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ChunkType = Literal["text", "list", "table", "code", "admonition"]


@dataclass(frozen=True)
class PageInput:
    """One rendered page handed to the indexer.

    ``url`` is relative to the site root with no leading slash, exactly as the
    page is published (``user-guide/configuration/`` or ``guide.html``; ``""``
    for the home page).
    """

    url: str
    html: str
    title: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Section:
    """The visible text between one heading and the next, on one page.

    ``id`` is ``f"{page}#{anchor}"``. ``text`` is the section's complete
    visible text (blocks joined by ``\\n``), never truncated, so chunk
    ``offsets`` always index into it; a reader cuts a long parent to its own
    budget (``chunking.parent_window``).
    """

    id: str
    page: str
    anchor: str
    title: str
    heading_path: list[str]
    text: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Chunk:
    """A small, matchable passage: a child of one section.

    ``id`` is ``f"{page}#{anchor}~{n}"`` (n = position within the section).
    ``text`` equals ``section.text[offsets[0]:offsets[1]]`` exactly, except for
    table chunks after the first, whose text starts with the repeated header row
    (then ``offsets`` cover the rows only and ``header`` holds the header text).
    ``lang`` is the page's language tag, lower case (``en``, ``zh``, ``pt-br``;
    ``chunking.page_language``), ``""`` when unknown.
    """

    id: str
    page: str
    anchor: str
    title: str
    heading_path: list[str]
    type: ChunkType
    text: str
    parent: str
    offsets: tuple[int, int]
    header: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    lang: str = ""
