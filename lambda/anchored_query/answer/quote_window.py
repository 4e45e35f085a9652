"""The sections a quote is taken from, and the window of one that is quoted.

1. **Sections** (:func:`read_sections`): the best :data:`MAX_SECTIONS` distinct
   sections by retrieval, each read whole from the index with its chunks'
   types (:func:`anchored_query.citations.units.section_units`: prose, code runs, table
   rows); without an index, a passage's text is read as its section, its
   runs of ``" | "`` lines as tables. A section under a version heading (a
   changelog's) is marked as a release note.
2. **The window** (:func:`quote_window`): the best unit with the structure
   around it: a lead-in that ends with ":" brings the code block, rows or list
   lines that follow (content tabs: their labels, then one block each), also
   when the quote takes it in as the line above a list line or label; code
   brings the line that introduces it, and prose its code example (directly
   after it or behind a short "For example:"); a line opening with "it" or
   "this" brings the line before; later units join while they add more relevance
   than they cost (:data:`_UNIT_COST`), up to :data:`MAX_QUOTE_CHARS`; a short
   section (:data:`SHORT_SECTION`) is quoted whole; a table row is shown with
   its table's header and with only the rows that match the question about as
   well (:data:`ROW_MATCH`); an option's section brings its ``default:`` line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anchored_query.citations.units import Unit, section_units
from anchored_query.types import Passage
from build_index.index_format import Index
from build_index.tokenizer import tokenize

__all__ = [
    "MAX_FOLLOWING",
    "MAX_QUOTE_CHARS",
    "MAX_SECTIONS",
    "SHORT_SECTION",
    "Section",
    "is_label",
    "quote_window",
    "read_sections",
]

MAX_SECTIONS = 5  # sections read, best first by retrieval
MAX_QUOTE_CHARS = 900  # a quote grows by neighbours only up to this size
ROW_MATCH = 0.6  # of the best row's score: a table row quoted beside it
MAX_FOLLOWING = 6  # lines a lead-in brings
# Characters: a section this short is quoted whole (within MAX_QUOTE_CHARS, so nothing
# of it, code or default, is left out). 400 before round 7; 800 was chosen on the dev sets.
SHORT_SECTION = 800
_TAB_LABEL_WORDS = 8  # a content tab's label is at most this many words, without a stop
_UNIT_COST = 0.35  # a further unit joins the quote when it is worth this share of the best
_VERSION_HEADING = re.compile(r"^(?:version|release|v)?\s*\d+(?:\.\d+)+\b", re.I)
_DEFAULT_LINE = re.compile(r"^(?:\*\*)?(?:default|defaults to|默认值?)(?:\*\*)?\s*[:：=]", re.I)
_ANAPHORA = re.compile(r"^(?:it|its|this|these|that|those|they|such|then)\b", re.I)


@dataclass
class Section:
    """A section read for quoting: its passage, whole text and units, the terms of
    its headings and its retrieval score relative to the best (``prior``)."""

    passage: Passage
    text: str
    units: list[Unit]
    heading_terms: frozenset[str]
    prior: float
    release_note: bool = False  # under a version heading ("Version 1.6.0 (2024-04-20)")


def read_sections(pool: Sequence[Passage], index: Index | None) -> list[Section]:
    """The best :data:`MAX_SECTIONS` distinct sections, best first, as units."""
    ordered = sorted(enumerate(pool), key=lambda ip: (-ip[1].score, ip[0]))
    top = max((p.score for p in pool), default=0.0) or 1.0
    out: list[Section] = []
    seen: set[str] = set()
    for _, p in ordered:
        if p.section_id in seen:
            continue
        seen.add(p.section_id)
        text, chunks, code = _section_source(p, index)
        units = section_units(text, chunks, code)
        if not units:
            continue
        heading = frozenset(tokenize(" ".join([p.title, *p.heading_path])))
        prior = max(0.0, p.score / top) if p.score > 0 else 1.0 / (1 + len(out))
        release_note = any(_VERSION_HEADING.match(h) for h in p.heading_path[1:])
        out.append(Section(p, text, units, heading, prior, release_note))
        if len(out) >= MAX_SECTIONS:
            break
    return out


def _section_source(
    p: Passage, index: Index | None
) -> tuple[str, list[Mapping[str, Any]], list[Any] | None]:
    """The section's whole text, its chunks and its code blocks (``meta.code``: None
    for an index built before it was recorded), from the index when there is one."""
    if index is not None and p.chunk_ids:
        try:
            section = index.sections[p.section_id]
            row = index.chunks.row_of(p.chunk_ids[0])
        except KeyError:
            section = None
        if section is not None:
            chunks = index.chunks
            lo = row
            while lo > 0 and chunks[lo - 1]["parent"] == p.section_id:
                lo -= 1
            hi = row
            while hi + 1 < len(chunks) and chunks[hi + 1]["parent"] == p.section_id:
                hi += 1
            code = (section.get("meta") or {}).get("code")
            rows: list[Mapping[str, Any]] = [chunks[i] for i in range(lo, hi + 1)]
            return str(section["text"]), rows, code if isinstance(code, list) else None
    return p.text, _table_runs(p.text), None


def _table_runs(text: str) -> list[Mapping[str, Any]]:
    """Pseudo-chunks for a bare passage: runs of lines with as many ``" | "`` cells."""
    out: list[Mapping[str, Any]] = []
    offset = 0
    run: list[tuple[int, int, int]] = []
    for line in [*text.split("\n"), ""]:
        width = len(line.split(" | ")) if " | " in line else 0
        if run and width != run[-1][2]:
            if len(run) >= 2:
                out.append({"type": "table", "offsets": (run[0][0], run[-1][1])})
            run = []
        if width:
            run.append((offset, offset + len(line), width))
        offset += len(line) + 1
    return out


def is_label(u: Unit) -> bool:
    """A short line without a full stop: a label ("Python version"), rarely an answer."""
    words = u.text.split()
    return u.kind == "prose" and len(words) < 4 and not u.text.endswith((".", "!", "?", "。"))


def quote_window(section: Section, best: Unit, scores: dict[int, float], top: float) -> list[Unit]:
    """The best unit with the structure around it (see the module docstring)."""
    units = section.units
    if sum(len(u.text) for u in units) <= SHORT_SECTION:
        # A short section is quoted whole, but of a table only the rows that match.
        return _matching_rows([u for u in units if u.kind != "header"], best, scores, top)
    i = j = best.index
    if best.kind == "code" and i > 0 and units[i - 1].kind == "prose":
        i -= 1  # code with the line that introduces it
    if best.kind == "row":
        while i > 0 and units[i - 1].kind == "row" and scores.get(id(units[i - 1]), 0) >= top:
            i -= 1
    if best.kind == "prose" and i > 0 and units[i - 1].lead_in and best.text[-1:] not in ":：":
        i -= 1  # a list line with the lead-in above it
    if best.kind == "prose" and _ANAPHORA.match(best.text) and i > 0:
        i -= units[i - 1].kind == "prose"  # "It defaults to 8000." needs what "it" is
    j = _following(units, j)
    if i < best.index and units[i].lead_in:
        j = max(j, _following(units, i))  # a lead-in in the quote brings what it leads to
    # The quote grows to the contiguous run with the most relevance to spare:
    # each unit adds its own relevance less _UNIT_COST of the best unit's, so a
    # weak line is crossed only to reach a good one, within MAX_QUOTE_CHARS.
    size = sum(len(u.text) for u in units[i : j + 1])
    gain, best_gain, end = 0.0, 0.0, j
    for k in range(j + 1, len(units)):
        size += len(units[k].text)
        if size > MAX_QUOTE_CHARS:
            break
        gain += scores.get(id(units[k]), 0.0) - _UNIT_COST * top
        if gain > best_gain:
            best_gain, end = gain, k
    j = _following(units, end) if end > j else j
    window = [u for u in units[i : j + 1] if u.kind != "header"]
    defaults = [u for u in units if _DEFAULT_LINE.match(u.text.strip()) and u not in window]
    return _matching_rows(sorted(window + defaults[:1], key=lambda u: u.index), best, scores, top)


def _matching_rows(
    window: list[Unit], best: Unit, scores: dict[int, float], top: float
) -> list[Unit]:
    """``window`` with, when a table row is the answer, only the rows that match the
    question about as well (:data:`ROW_MATCH` of the best): the row asked about, not
    the whole table. A lead-in's table (the answer is the prose above it) stays whole."""
    if best.kind != "row":
        return window
    return [
        u
        for u in window
        if u.kind != "row" or u is best or scores.get(id(u), 0.0) >= ROW_MATCH * top
    ]


def _tab_label(u: Unit) -> bool:
    """A content tab's label ("View source of this page"): a short line without a stop."""
    return (
        u.kind == "prose"
        and len(u.text.split()) <= _TAB_LABEL_WORDS
        and not u.text.endswith(_STOPS)
    )


_SHORT_LEAD_IN = 60  # characters: "For example:", "Like so:", "As follows:"
_STOPS = (".", "!", "?", ":", "。", "！", "？", "：")


def _following(units: list[Unit], j: int) -> int:
    """The last unit a unit brings: a lead-in its block, prose its code example."""
    u = units[j]
    if u.lead_in:
        k = j + 1
        if k < len(units) and units[k].kind == "header":
            k += 1
        # Content tabs: their labels ("Set language", "Add further languages") come
        # before their panels; the lead-in brings the labels and one block each.
        labels = 0
        while k < len(units) and _tab_label(units[k]) and labels < MAX_FOLLOWING:
            k, labels = k + 1, labels + 1
        kind = units[k].kind if k < len(units) else ""
        if kind in ("code", "row"):
            end = k
            while end + 1 < len(units) and units[end + 1].kind == kind and end - k < MAX_FOLLOWING:
                if kind == "code" and end - k + 1 >= labels:
                    break
                end += 1
            return end
        end = j
        size = 0
        while end + 1 < len(units) and end - j < MAX_FOLLOWING and units[end + 1].kind == "prose":
            size += len(units[end + 1].text)
            if size > MAX_QUOTE_CHARS or units[end + 1].lead_in:
                break
            end += 1
        return end
    nxt = units[j + 1] if j + 1 < len(units) else None
    if u.kind == "prose" and nxt is not None and nxt.kind == "code" and nxt.text.count("\n") < 15:
        return j + 1
    if u.kind == "prose" and nxt is not None and nxt.lead_in and len(nxt.text) <= _SHORT_LEAD_IN:
        # Its example behind a short lead-in: "… use this request extension." /
        # "For example:" / the code.
        after = _following(units, j + 1)
        if after > j + 1 and units[after].kind == "code":
            return after
    return j
