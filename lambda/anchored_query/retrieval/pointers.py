"""Lines that point to another part of the docs instead of answering.

"See Getting started for the details, and Deploy to AWS to put the query
function online." holds every word of "How do I deploy the query function to
AWS?" and answers none of it: its words are the names of other pages. Docs
name the page they link to by its title, so a short prose line that holds the
title of *another* page (two words or more, a title of words only) names that
page. :func:`named_headings` gives the search terms of the titles a line
names; the extractive answerer counts such a line at :data:`POINTER` of its
score when most of its match with the question (by weight) is those names, so
the page it points to (or any line that answers) comes first.

Only page titles count: a section's heading is often a phrase of the text
elsewhere ("Make the build fail on warnings" in a changelog, "Set strict to
make the build fail on warnings" in the reference), and counting them made
such lines pointers (measured: one answer lost on the dev sets).

The titles are the index's own: the start of the heading path of a page's
first section, when that path starts at the page's h1 (or is the page's title,
for the text above its first heading), read once per index on the first
question, so this knows no language and no site.
"""

from __future__ import annotations

import re
import threading
import weakref
from typing import Final

from build_index.index_format import Index
from build_index.tokenizer import tokenize

__all__ = ["MAX_WORDS", "POINTER", "named_headings"]

POINTER: Final = 0.5  # a pointer's share of its score
MAX_WORDS: Final = 25  # a longer line is more than a pointer
_MIN_HEADING_WORDS: Final = 2  # "Configuration" alone is an ordinary word
_WORDS = re.compile(r"\w+")

# Per index: first word -> [(title words, the pages of that title)].
_Headings = dict[str, list[tuple[tuple[str, ...], frozenset[str]]]]
_by_index: weakref.WeakKeyDictionary[Index, _Headings] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def named_headings(text: str, page: str, own: tuple[str, ...], index: Index) -> frozenset[str]:
    """The search terms of the other pages' titles that ``text`` names.

    ``page`` is the line's own page and ``own`` its section's heading path: a line
    naming its own page is not pointing away. Empty for a line over :data:`MAX_WORDS`.
    """
    words = _WORDS.findall(text.casefold())
    if not words or len(words) > MAX_WORDS:
        return frozenset()
    mine = {tuple(_WORDS.findall(h.casefold())) for h in own}
    found: set[str] = set()
    headings = _headings(index)
    for i, word in enumerate(words):
        for heading, pages in headings.get(word, ()):
            if (
                tuple(words[i : i + len(heading)]) == heading
                and heading not in mine
                and page not in pages
            ):
                found.update(tokenize(" ".join(heading)))
    return frozenset(found)


def _headings(index: Index) -> _Headings:
    with _lock:
        found = _by_index.get(index)
    if found is not None:
        return found
    pages: dict[tuple[str, ...], set[str]] = {}
    rows = index.sections.rows
    first: dict[str, int] = {}
    for i, page in enumerate(rows.pages):  # read without parsing the rows
        first.setdefault(page, i)
    for page, i in first.items():  # a page's first section starts with its title
        row = rows[i]
        path = row.get("heading_path") or []
        level = (row.get("meta") or {}).get("level")
        lead = str(row.get("id", "")).endswith("#")  # the text above the first heading
        # The path starts at the page's h1 when it holds one heading a level (an h2 under
        # the h1: level 2, two headings); a page without an h1 or lead text has no title.
        if not path or not (lead or level == len(path)):
            continue
        raw = str(path[0])
        words = tuple(_WORDS.findall(raw.casefold()))
        # Titles of words only: "mkdocs.yml" or "ANCHORED_INDEX" are names, not titles.
        prose = " ".join(words) == " ".join(raw.casefold().split())
        if len(words) >= _MIN_HEADING_WORDS and prose:
            pages.setdefault(words, set()).add(page)
    built: _Headings = {}
    for words, on in pages.items():
        built.setdefault(words[0], []).append((words, frozenset(on)))
    with _lock:
        _by_index[index] = built
    return built
