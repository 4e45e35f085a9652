"""Sections -> child chunks: the small passages that retrieval matches.

How a section becomes chunks:

* Tokens are estimated, not counted with a model tokenizer (``count_tokens``):
  one per word or number, per punctuation mark or symbol, per CJK character.
  On the fixture site and sample docs this is 0.82-1.04x the all-MiniLM-L6-v2
  WordPiece count for prose, code, tables and Chinese alike, where words*1.3
  is off by 2x on code and 5x on Chinese; and it costs one regex pass.
* A section's blocks are packed greedily, in order, into chunks of at most
  ``child_max_tokens``; packing is balanced (a 400-token run becomes two
  ~200-token chunks, not 300 + 100) and a trailing piece below
  ``child_min_tokens`` joins its neighbour when both fit. Chunks never cross a
  section: their parent is the section.
* Text, list and admonition blocks merge freely; a chunk's ``type`` is the type
  holding most of its tokens. A code block merges only when it fits in a child
  chunk whole; a bigger one is a pure ``code`` chunk, kept whole up to
  ``code_max_tokens`` and split on line boundaries beyond. Tables are always
  pure and split by rows; every chunk of a table starts with its header row(s).
* A block too big for one chunk is split on line boundaries (list items, table
  rows, code lines), then sentence ends, then whitespace, then (CJK without
  spaces) anywhere.

Long sections: ``Section.text`` is kept complete, so every chunk's offsets
index into it and a citation always lands in the section its anchor opens.
The parent context sent to the LLM is cut by the query side with
``parent_window``, which centres a ``parent_max_tokens`` window on the matched
chunk; splitting a section into several parents instead would invent ids that
no page carries and cut context at arbitrary build-time boundaries.
"""

from __future__ import annotations

import fnmatch
import gc
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import PageError
from .html import Block, extract_section_blocks, page_name
from .types import Chunk, ChunkType, PageInput, Section

__all__ = [
    "ChunkSettings",
    "chunk_page",
    "count_tokens",
    "is_excluded",
    "page_language",
    "parent_window",
]

_CJK = (
    "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3190-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
)
# One estimated token per CJK character, per letter/digit run (every 10 characters
# of a long run: subword tokenizers cut long words and blobs too), per symbol.
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]{{1,10}}|[^\w\s]|_")
# A sentence ends at a full stop (or ! ? ; :) before whitespace, or at a CJK full stop.
# One character class up front keeps the scan fast; see _split_sentences.
_SENTENCE_END = re.compile(r"[.!?;:。！？；]\s*")
_ASCII_STOPS = frozenset(".!?;:")

_BIG_PAGE = 1_000_000  # characters of HTML
# A BCP 47 language tag as pages carry it (<html lang>, mkdocs-static-i18n locales).
_LANG_TAG = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{1,8}){0,3}")

# One unit of packing: (start, end, tokens, type) in section-text offsets.
_Unit = tuple[int, int, int, ChunkType]


@dataclass(frozen=True)
class ChunkSettings:
    """Chunk sizes, in estimated tokens (see ``count_tokens``).

    ``child_min_tokens`` is a soft floor (a short section is still one short
    chunk) and is capped at ``child_max_tokens``; ``parent_max_tokens`` is the
    budget ``parent_window`` is meant to be called with on the query side.
    """

    child_min_tokens: int = 100
    child_max_tokens: int = 300
    parent_max_tokens: int = 1000
    code_max_tokens: int = 600
    # Reference tables (options, defaults) are dense with facts: a few rows
    # under their header match a question far better than a whole table does.
    table_max_tokens: int = 120

    def __post_init__(self) -> None:
        for name in (
            "child_min_tokens",
            "child_max_tokens",
            "parent_max_tokens",
            "code_max_tokens",
            "table_max_tokens",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"chunk sizes: {name} must be a positive integer, got {value!r}")


def count_tokens(text: str) -> int:
    """Estimated model tokens: one per word or number, punctuation mark or CJK character."""
    return _TOKEN.subn("", text)[1]


def is_excluded(page: PageInput, patterns: Sequence[str] = ()) -> bool:
    """True if the page opts out (``search: {exclude: true}``) or its URL matches a glob.

    Patterns match the page URL relative to the site root (``drafts/*``,
    ``*/internal/*``); a leading ``/`` is ignored and ``drafts`` also matches
    the directory URL ``drafts/``. ``*`` matches across ``/``.
    """
    search = page.meta.get("search")
    if isinstance(search, dict) and search.get("exclude") in (True, "true", "yes"):
        return True
    url = page.url.lstrip("/")
    candidates = {url, url.rstrip("/")}
    for pattern in patterns:
        pattern = pattern.lstrip("/")
        if any(fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates):
            return True
    return False


def page_language(page: PageInput) -> str:
    """The page's language tag, lower case with ``-`` (``zh_CN`` -> ``zh-cn``), from
    ``meta["lang"]`` (the MkDocs plugin and ``anchored index`` set it); ``""`` when the
    page names none or something that is not a language tag."""
    lang = str(page.meta.get("lang") or "").strip().lower().replace("_", "-")
    return lang if _LANG_TAG.fullmatch(lang) else ""


def chunk_page(
    page: PageInput, settings: ChunkSettings | None = None
) -> tuple[list[Section], list[Chunk]]:
    """Sections and child chunks of one rendered page.

    Returns only sections that have at least one chunk; every chunk's
    ``parent`` is one of them and ``chunk.text == section.text[start:end]``
    unless ``chunk.header`` is set (a table continuation), in which case
    ``chunk.text == header + "\\n" + section.text[start:end]``. A page whose
    front matter says ``search: {exclude: true}`` yields nothing. Raises
    ``PageError`` naming the page when it cannot be read at all.
    """
    settings = settings or ChunkSettings()
    if is_excluded(page):
        return [], []
    # A big page allocates millions of short-lived objects and no cycles; the
    # cyclic collector's passes over them would cost a third of the time.
    pause_gc = len(page.html) > _BIG_PAGE and gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        return _chunk_page(page, settings)
    except PageError:
        raise
    except Exception as exc:  # a bug on odd input must cost one page, not the build
        raise PageError(
            f"{page_name(page)}: could not be chunked ({type(exc).__name__}: {exc})"
        ) from exc
    finally:
        if pause_gc:
            gc.enable()


def _chunk_page(page: PageInput, settings: ChunkSettings) -> tuple[list[Section], list[Chunk]]:
    sections: list[Section] = []
    chunks: list[Chunk] = []
    lang = page_language(page)
    for section, blocks in extract_section_blocks(page):
        spans = _section_spans(section.text, blocks, settings)
        if not spans:
            continue
        sections.append(section)
        for n, (start, end, chunk_type, header) in enumerate(spans):
            body = section.text[start:end]
            chunks.append(
                Chunk(
                    id=f"{section.id}~{n}",
                    page=section.page,
                    anchor=section.anchor,
                    title=section.title,
                    heading_path=list(section.heading_path),
                    type=chunk_type,
                    text=f"{header}\n{body}" if header else body,
                    parent=section.id,
                    offsets=(start, end),
                    header=header,
                    lang=lang,
                )
            )
    return sections, chunks


def parent_window(text: str, offsets: tuple[int, int], max_tokens: int) -> tuple[int, int]:
    """The span of ``text`` (a section) to show as a chunk's parent context.

    The whole section when it fits in ``max_tokens``; otherwise the chunk grown
    by whole lines on both sides, alternately, while the budget allows.
    """
    start, end = offsets
    if count_tokens(text) <= max_tokens:
        return 0, len(text)
    budget = max_tokens - count_tokens(text[start:end])
    grow_left = grow_right = True
    while budget > 0 and (grow_left or grow_right):
        if grow_left:
            new_start = text.rfind("\n", 0, max(start - 1, 0)) + 1 if start > 0 else 0
            cost = count_tokens(text[new_start:start])
            if start == 0 or cost > budget:
                grow_left = False
            else:
                start, budget = new_start, budget - cost
        if grow_right and budget > 0:
            found = text.find("\n", end + 1)
            new_end = len(text) if found < 0 else found
            cost = count_tokens(text[end:new_end])
            if end >= len(text) or cost > budget:
                grow_right = False
            else:
                end, budget = new_end, budget - cost
    return start, end


def _section_spans(
    text: str, blocks: list[Block], settings: ChunkSettings
) -> list[tuple[int, int, ChunkType, str]]:
    """(start, end, type, repeated header) of every chunk of one section, in order."""
    spans: list[tuple[int, int, ChunkType, str]] = []
    run: list[_Unit] = []  # consecutive mergeable units awaiting packing
    min_tokens = min(settings.child_min_tokens, settings.child_max_tokens)

    def flush_run() -> None:
        for group in _pack(run, settings.child_max_tokens, min_tokens):
            spans.append((group[0][0], group[-1][1], _dominant(group), ""))
        run.clear()

    for block in blocks:
        tokens = count_tokens(text[block.start : block.end])
        if tokens == 0:
            continue
        if block.type == "table":
            flush_run()
            spans.extend(_table_spans(text, block, settings))
        elif block.type == "code" and tokens > settings.child_max_tokens:
            flush_run()
            if tokens <= settings.code_max_tokens:
                spans.append((block.start, block.end, "code", ""))
            else:
                units = _split(
                    text, block.start, block.end, settings.code_max_tokens, "code", tokens
                )
                for group in _pack(units, settings.code_max_tokens, min_tokens):
                    spans.append((group[0][0], group[-1][1], "code", ""))
        elif tokens <= settings.child_max_tokens:
            run.append((block.start, block.end, tokens, block.type))
        else:
            run.extend(
                _split(text, block.start, block.end, settings.child_max_tokens, block.type, tokens)
            )
    flush_run()
    return spans


def _table_spans(
    text: str, block: Block, settings: ChunkSettings
) -> list[tuple[int, int, ChunkType, str]]:
    """Chunks of a table: rows packed under the header, which every chunk repeats."""
    header = text[block.start : block.header_end]
    header_tokens = count_tokens(header)
    rows_start = block.header_end + 1 if header else block.start
    if rows_start >= block.end:
        return [(block.start, block.end, "table", "")]
    limit = min(settings.table_max_tokens, settings.child_max_tokens)
    budget = max(limit - header_tokens, limit // 2, 1)  # 1: a 1-token limit must not give 0
    units = _split(text, rows_start, block.end, budget, "table")
    spans: list[tuple[int, int, ChunkType, str]] = []
    for group in _pack(units, budget, min(settings.child_min_tokens, budget)):
        start, end = group[0][0], group[-1][1]
        if not spans and header and start == rows_start:
            spans.append((block.start, end, "table", ""))  # the page's own header + rows
        else:
            spans.append((start, end, "table", header))
    return spans


def _split(
    text: str, start: int, end: int, limit: int, kind: ChunkType, tokens: int = -1
) -> list[_Unit]:
    """Units of at most ``limit`` tokens: lines, else sentences, else word/character runs.

    ``tokens`` is the count of the whole range when the caller already has it.
    """
    units: list[_Unit] = []
    line_start = start
    while line_start < end:
        found = text.find("\n", line_start, end)
        line_end = end if found < 0 else found
        if line_start == start and line_end == end and tokens >= 0:
            line_tokens = tokens  # one line: already counted
        else:
            line_tokens = count_tokens(text[line_start:line_end])
        if line_tokens <= limit:
            if line_tokens:
                units.append((line_start, line_end, line_tokens, kind))
        elif kind == "code":
            units.extend(_hard_split(text, line_start, line_end, limit, kind, line_tokens))
        else:
            units.extend(_split_sentences(text, line_start, line_end, limit, kind))
        line_start = line_end + 1
    return units


def _split_sentences(text: str, start: int, end: int, limit: int, kind: ChunkType) -> list[_Unit]:
    units: list[_Unit] = []
    piece_start = start
    for match in _SENTENCE_END.finditer(text, start, end):
        if match.end() == match.start() + 1 and match.group() in _ASCII_STOPS:
            continue  # "3.14", "e.g.x": an ASCII stop ends a sentence only before a space
        piece_end = match.start() + 1  # keep the full stop with its sentence
        if piece_end > piece_start:
            units.extend(_piece(text, piece_start, piece_end, limit, kind))
        piece_start = max(piece_start, match.end())
    if piece_start < end:
        units.extend(_piece(text, piece_start, end, limit, kind))
    return units


def _piece(text: str, start: int, end: int, limit: int, kind: ChunkType) -> list[_Unit]:
    tokens = count_tokens(text[start:end])
    if tokens <= limit:
        return [(start, end, tokens, kind)] if tokens else []
    return _hard_split(text, start, end, limit, kind, tokens)


def _hard_split(
    text: str, start: int, end: int, limit: int, kind: ChunkType, total: int
) -> list[_Unit]:
    """Cut a run with no line or sentence break into pieces of at most ``limit`` tokens."""
    units: list[_Unit] = []
    # Even-sized first guess; a piece over the limit is halved until it fits.
    window = max(1, math.ceil((end - start) / math.ceil(total / limit)))
    pos = start
    while pos < end:
        cut = min(end, pos + window)
        while True:
            if cut < end:
                space = _last_space(text, pos + (cut - pos) // 2, cut)
                if space > pos:
                    cut = space
            tokens = count_tokens(text[pos:cut])
            if tokens <= limit or cut - pos <= 1:
                break
            cut = pos + max(1, (cut - pos) // 2)
        piece_start, piece_end = _strip(text, pos, cut)  # whitespace holds no tokens
        if piece_end > piece_start:
            units.append((piece_start, piece_end, tokens, kind))
        pos = cut
    return units


def _last_space(text: str, lo: int, hi: int) -> int:
    """Index of the last space, tab or newline in ``text[lo:hi]``, or -1."""
    return max(text.rfind(" ", lo, hi), text.rfind("\t", lo, hi), text.rfind("\n", lo, hi))


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _pack(units: list[_Unit], max_tokens: int, min_tokens: int) -> list[list[_Unit]]:
    """Greedy, balanced grouping of consecutive units into chunks of <= ``max_tokens``."""
    if not units:
        return []
    total = sum(unit[2] for unit in units)
    target = total / math.ceil(total / max_tokens)
    groups: list[list[_Unit]] = []
    current: list[_Unit] = []
    size = 0
    for unit in units:
        if current and (size + unit[2] > max_tokens or size >= target):
            groups.append(current)
            current, size = [], 0
        current.append(unit)
        size += unit[2]
    groups.append(current)
    if len(groups) > 1 and size < min_tokens:
        previous = sum(unit[2] for unit in groups[-2])
        if previous + size <= max_tokens:
            groups[-2].extend(groups.pop())
    return groups


def _dominant(group: list[_Unit]) -> ChunkType:
    """The type holding most tokens of a chunk (first seen wins a tie)."""
    weights: dict[ChunkType, int] = {}
    for _, _, tokens, kind in group:
        weights[kind] = weights.get(kind, 0) + tokens
    return max(weights, key=lambda kind: weights[kind])
