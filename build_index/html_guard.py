"""What a page's HTML must be before it is parsed: text, not binary data, not too big,
and nothing that makes the HTML parser slow (quadratic) on it.

Each refusal is a ``PageError`` naming the page and what to do; the build skips the
page with a warning (or stops, in strict mode).
"""

from __future__ import annotations

import re

from .errors import PageError
from .types import PageInput

__all__ = ["MAX_ATTRIBUTES", "MAX_PAGE_CHARS", "check_html", "page_name"]

# Control characters and U+FFFD: a "page" made mostly of them is binary data.
_JUNK = re.compile(r"[\x00-\x08\x0e-\x1f\x7f\ufffd]")
# lexbor checks the open-element stack for every block start tag, so parsing
# thousands of nested blocks is quadratic; refuse such pages before parsing.
_MAX_BLOCK_NESTING = 10_000
_NESTING_TAG = re.compile(
    r"<(/?)(?:div|section|article|aside|blockquote|center|details|dialog|dir|dl|fieldset|"
    r"figure|figcaption|footer|header|hgroup|main|menu|nav|ol|ul|form|search|summary|address)"
    r"(?=[\s/>])",
    re.IGNORECASE,
)
_NESTING_OPEN = re.compile(_NESTING_TAG.pattern.replace("(/?)", "", 1), re.IGNORECASE)
# lexbor checks every attribute of an element against the ones before it (50,000
# attributes on one element: 10 s), so such a page is refused before parsing; and a
# page over MAX_PAGE_CHARS is refused outright. Either costs the build one warning.
MAX_ATTRIBUTES = 2_000
MAX_PAGE_CHARS = 20_000_000
# A start tag, or text no tag can be in (comments, scripts, styles: skipped).
_TAG = re.compile(r"<!--.*?-->|<(script|style)\b.*?</\1\s*>|<[A-Za-z][^>]*", re.I | re.S)
_ATTRIBUTE_START = re.compile(r"[\s\"'/]+[^\s\"'/=>]")
_JUNK_SAMPLE = 100_000
_MAX_JUNK_RATIO = 0.3


def check_html(page: PageInput) -> str:
    """``page.html`` when it can be parsed; raises ``PageError`` naming the page when it
    is not text, looks like binary data, is over ``MAX_PAGE_CHARS`` or has an element
    with about ``MAX_ATTRIBUTES`` attributes or blocks nested deeper than the parser
    handles in linear time. Empty (or blank) HTML passes."""
    html = page.html
    if not isinstance(html, str):
        raise PageError(f"{page_name(page)}: HTML must be text, got {type(html).__name__}")
    if not html.strip():
        return html  # nothing to parse
    sample = html[:_JUNK_SAMPLE]
    if len(_JUNK.findall(sample)) > _MAX_JUNK_RATIO * len(sample):
        raise PageError(
            f"{page_name(page)}: looks like binary data, not HTML; exclude it from the index"
        )
    if len(html) > MAX_PAGE_CHARS:
        raise PageError(
            f"{page_name(page)}: {len(html)} characters of HTML (limit {MAX_PAGE_CHARS}); "
            "split the page or exclude it from the index"
        )
    attributes = _most_attributes(html)
    if attributes > MAX_ATTRIBUTES:
        raise PageError(
            f"{page_name(page)}: an element has about {attributes} attributes "
            f"(limit {MAX_ATTRIBUTES}); fix the page or exclude it from the index"
        )
    depth = _block_nesting(html)
    if depth > _MAX_BLOCK_NESTING:
        raise PageError(
            f"{page_name(page)}: HTML nests {depth} blocks deep "
            f"(limit {_MAX_BLOCK_NESTING}); fix the page or exclude it from the index"
        )
    return html


def page_name(page: PageInput) -> str:
    """The page as error messages name it: ``page 'guide/'`` or ``the home page``."""
    return f"page {page.url!r}" if page.url else "the home page"


def _most_attributes(html: str) -> int:
    """About the most attributes one start tag has (a cheap upper bound; 0 when small)."""
    if html.count("=") + html.count(" ") < MAX_ATTRIBUTES:
        return 0
    most = 0
    for tag in _TAG.finditer(html):
        skipped = tag.group(1) is not None or html.startswith("<!--", tag.start())
        if not skipped and tag.end() - tag.start() > 2 * MAX_ATTRIBUTES:  # shorter: fewer
            most = max(most, len(_ATTRIBUTE_START.findall(html, tag.start() + 1, tag.end())))
    return most


def _block_nesting(html: str) -> int:
    """Deepest nesting of block elements (cheap upper-bound scan, only for big pages)."""
    if html.count("<") < _MAX_BLOCK_NESTING or (
        _NESTING_OPEN.subn("", html)[1] < _MAX_BLOCK_NESTING
    ):
        return 0  # fewer block tags than the limit: cannot nest deeper
    depth = peak = 0
    for match in _NESTING_TAG.finditer(html):
        if match.group(1):
            depth = max(depth - 1, 0)
        else:
            depth += 1
            peak = max(peak, depth)
    return peak
