"""Citation links that land on the passage and highlight it, with or without the widget.

``citation_link(url, highlight)`` turns a citation's ``page/#anchor`` into

    page/?anchored-hl=<spec>#anchor:~:text=<start>,<end>

- ``?anchored-hl=`` is the ask box's own parameter, encoded exactly as
  ``plugin/assets/text.js`` (``specFor`` + ``encodeSpec``) encodes it, so the widget
  on the page highlights the passage precisely (across tables, lists and code);
- ``:~:text=`` is a URL text fragment (https://wicg.github.io/scroll-to-text-fragment/),
  which Chromium, Safari and Firefox scroll to and highlight on their own, for a link
  relayed by a chat bot, the CLI or an agent to a page without the widget.

A text fragment's start and end terms must each sit inside one block of the page, so
they are taken from the first and the last segment of the highlight (segments are
separated by line breaks and by the ``" | "`` the index puts between table cells),
skipping short segments at the start (a one-word table cell would match too early).
The browser takes the first match on the page, so a term that also occurs above the
passage would land there. Given the page's visible text (:class:`OnPage`: every
section of the page from the index, after the page's headings, which the navigation
and the table of contents repeat above the content), the start term is grown word by
word until it occurs nowhere earlier on the page; when even its whole block does, a
``prefix-`` of the words just before the passage is added (spec: ``text=prefix-,start,end``).
The end term is grown until its first occurrence after the start is the passage's end.
Text the index leaves out (the site navigation's page titles, hidden elements) is
not checked; without the page text the terms are only made long enough to be rare.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

HL_PARAM = "anchored-hl"

_WORDS = 6  # words kept from each end of a long passage (text.js: WORDS)
_CAP = 60  # characters kept from each end when words are very long (text.js: CAP)
_SKIP = re.compile("[\\s¶|\u0000-\u0008\u000e-\u001f\u007f\u00ad\u200b-\u200d\u2060\ufeff\ufffd]")
_INVISIBLE = re.compile("[¶\u00ad\u200b-\u200d\u2060\ufeff]")
_SEGMENT = re.compile(r"\s*\n\s*|\s+\|\s+")
_FRAGMENT_WORDS = 4  # words a text-fragment term starts with
_FRAGMENT_MIN_CHARS = 16  # ... grown until it is at least this long (rarer on a page)
_FRAGMENT_MAX_WORDS = 8


def _key_length(text: str) -> int:
    """Length of text.js's matching key, in UTF-16 code units as JavaScript counts."""
    key = _SKIP.sub("", text).lower()
    return len(key.encode("utf-16-le")) // 2


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[\s|]+", _INVISIBLE.sub("", text)) if w]


def highlight_spec(highlight: str) -> tuple[str, str, int] | None:
    """text.js ``specFor``: (start, end, len); end is "" and len 0 for a short passage."""
    w = _words(highlight)
    whole = " ".join(w)
    if not whole:
        return None
    if len(w) <= 2 * _WORDS and len(whole) <= 2 * _CAP:
        return whole, "", 0
    start = " ".join(w[:_WORDS])
    end = " ".join(w[-_WORDS:])
    if len(w) <= 2 * _WORDS or len(start) > _CAP or len(end) > _CAP:
        start = whole[:_CAP].strip()
        end = whole[-_CAP:].strip()
    return start, end, _key_length(whole)


def _enc(s: str) -> str:
    """text.js ``enc``: encodeURIComponent, spaces as '+', ':' '/' ',' '@' kept, '~' escaped."""
    out = urllib.parse.quote(s, safe="!'()*~")
    out = out.replace("%20", "+")
    out = re.sub(r"%(3A|2F|2C|40)", lambda m: chr(int(m.group(1), 16)), out)
    return out.replace("~", "%7E")


def encode_param(highlight: str) -> str:
    """The value of ``?anchored-hl=`` for a highlight ("" when there is nothing to mark)."""
    spec = highlight_spec(highlight)
    if spec is None:
        return ""
    start, end, length = spec
    if not end:
        return _enc(start)
    return _enc(start) + "~" + _enc(end) + (f"~{length}" if length else "")


def _fragment_enc(s: str) -> str:
    """Percent-encode a text-fragment term: '-', ',' and '&' have a meaning there."""
    return urllib.parse.quote(s, safe="").replace("-", "%2D")


def _term(words: list[str], from_end: bool) -> list[str]:
    """A few words from one end, grown until the term is not too short to be rare."""
    n = min(_FRAGMENT_WORDS, len(words))
    while n < min(len(words), _FRAGMENT_MAX_WORDS):
        picked = words[-n:] if from_end else words[:n]
        if len(" ".join(picked)) >= _FRAGMENT_MIN_CHARS:
            break
        n += 1
    return words[-n:] if from_end else words[:n]


def text_fragment(highlight: str) -> str:
    """``text=start,end`` (or ``text=whole``) for a highlight; "" when there is no text."""
    segments = [_words(s) for s in _SEGMENT.split(_INVISIBLE.sub("", highlight))]
    segments = [s for s in segments if s]
    if not segments:
        return ""
    # A one-word table cell would match too early on the page: the start term comes from
    # the first segment long enough to be rare, if there is one. The end term is searched
    # only after the start, so the last segment serves whatever its length.
    rare = [i for i, s in enumerate(segments) if len(" ".join(s)) >= _FRAGMENT_MIN_CHARS]
    segments = segments[rare[0] :] if rare else segments
    first, last = segments[0], segments[-1]
    if len(segments) == 1 and len(first) <= 2 * _FRAGMENT_WORDS:
        return "text=" + _fragment_enc(" ".join(first))
    start = _term(first, from_end=False)
    end = _term(last, from_end=True)
    if len(segments) == 1 and len(start) + len(end) > len(first):
        # one short block: the ends would overlap, so mark it whole
        return "text=" + _fragment_enc(" ".join(first))
    return "text=" + _fragment_enc(" ".join(start)) + "," + _fragment_enc(" ".join(end))


@dataclass(frozen=True)
class OnPage:
    """Where a highlight is on its page: the page's visible text (blocks on their own
    lines, table cells joined by ``" | "``, as the index keeps section text) and the
    highlight's ``[start, end)`` in it."""

    text: str
    start: int
    end: int


_PREFIX_WORDS = 3  # words of context put before the start term when it is not unique


def _term_pattern(term: str) -> re.Pattern[str]:
    """How a browser matches a term: case-insensitive, whitespace runs alike, whole words."""
    body = r"\s+".join(re.escape(w) for w in term.split())
    lead = r"(?<!\w)" if re.match(r"\w", term) else ""
    tail = r"(?!\w)" if re.search(r"\w$", term) else ""
    return re.compile(lead + body + tail, re.IGNORECASE)


def _occurs_before(text: str, term: str, pos: int, low: str | None = None) -> bool:
    """Whether ``term`` matches anywhere in ``text`` starting before ``pos``.

    ``low`` is ``text.lower()`` when it keeps the offsets: then the search is a plain
    substring search with the words' boundaries checked (the index collapses whitespace
    runs in prose to one space); otherwise the browser's matching as a regular expression.
    """
    if low is not None and len(low) == len(text):
        needle = " ".join(term.split()).lower()
        at = low.find(needle, 0, pos)
        while at >= 0:
            before = text[at - 1] if at else " "
            after = text[at + len(needle)] if at + len(needle) < len(text) else " "
            lead_ok = not (needle[0].isalnum() or needle[0] == "_") or not (
                before.isalnum() or before == "_"
            )
            tail_ok = not (needle[-1].isalnum() or needle[-1] == "_") or not (
                after.isalnum() or after == "_"
            )
            if lead_ok and tail_ok:
                return True
            at = low.find(needle, at + 1, pos)
        return False
    m = _term_pattern(term).search(text)
    return m is not None and m.start() < pos


def _segment_words(text: str, start: int, end: int) -> list[list[tuple[int, int]]]:
    """The words (absolute offsets) of each block segment of ``text[start:end]``."""
    bounds = [start]
    for m in _SEGMENT.finditer(text, start, end):
        bounds += [m.start(), m.end()]
    bounds.append(end)
    out = []
    for a, b in zip(bounds[::2], bounds[1::2], strict=True):
        words = [(m.start(), m.end()) for m in re.finditer(r"[^\s|]+", text[a:b])]
        if words:
            out.append([(a + s, a + e) for s, e in words])
    return out


def _grow(words: list[tuple[int, int]], from_end: bool) -> int:
    """How many words a term starts with: _FRAGMENT_WORDS, more until it is not too short."""
    n = min(_FRAGMENT_WORDS, len(words))
    while n < min(len(words), _FRAGMENT_MAX_WORDS):
        picked = words[-n:] if from_end else words[:n]
        if picked[-1][1] - picked[0][0] >= _FRAGMENT_MIN_CHARS:
            break
        n += 1
    return n


def _prefix(text: str, pos: int, term: str, low: str | None = None) -> str:
    """Words just before ``pos`` that make ``prefix term`` unique up to there ("" if none do)."""
    before = list(re.finditer(r"[^\s|]+", text[max(0, pos - 300) : pos]))
    offset = max(0, pos - 300)
    for k in range(1, min(_PREFIX_WORDS, len(before)) + 1):
        first = before[-k].start() + offset
        prefix = " ".join(m.group(0) for m in before[-k:])
        if not _occurs_before(text, prefix + " " + term, first, low):
            return prefix
    return ""


def _fragment_on_page(page: OnPage) -> str:
    text = page.text
    low = text.lower()
    segments = _segment_words(text, page.start, page.end)
    if not segments:
        return ""
    # Unlike the fragment made without the page, a short first cell is kept: if it occurs
    # earlier on the page, the words before it become the prefix.
    first, last = segments[0], segments[-1]
    pos = first[0][0]

    def term(words: list[tuple[int, int]]) -> str:
        return " ".join(text[s:e] for s, e in words)

    whole = len(segments) == 1 and len(first) <= 2 * _FRAGMENT_WORDS
    n = len(first) if whole else _grow(first, False)
    while n < len(first) and _occurs_before(text, term(first[:n]), pos, low):
        n += 1
    start = term(first[:n])
    prefix = _prefix(text, pos, start, low) if _occurs_before(text, start, pos, low) else ""
    lead = _fragment_enc(prefix) + "-," if prefix else ""
    if whole or (len(segments) == 1 and n + _grow(last, True) > len(first)):
        return "text=" + lead + _fragment_enc(term(first))
    # The end term: its first match after the start must end where the passage ends.
    after = first[n - 1][1]
    m = _grow(last, True)
    while m < len(last):
        if len(segments) == 1 and n + m >= len(first):
            break
        hit = _term_pattern(term(last[-m:])).search(text, after, min(len(text), last[-1][1] + 1))
        if hit is not None and hit.end() == last[-1][1]:
            break
        m += 1
    if len(segments) == 1 and n + m > len(first):
        return "text=" + lead + _fragment_enc(term(first))
    return "text=" + lead + _fragment_enc(start) + "," + _fragment_enc(term(last[-m:]))


def citation_link(url: str, highlight: str, on_page: OnPage | None = None) -> str:
    """``url`` (``page/#anchor``, relative or absolute) with both highlight mechanisms.

    With ``on_page`` (the highlight's place in its page's text) the text fragment's
    terms are chosen to match there and nowhere earlier (see the module docstring).
    """
    base, _, anchor = url.partition("#")
    param = encode_param(highlight)
    if param:
        path, _, query = base.partition("?")
        kept = [p for p in query.split("&") if p and not p.startswith(HL_PARAM + "=")]
        base = path + "?" + "&".join([*kept, f"{HL_PARAM}={param}"])
    fragment = _fragment_on_page(on_page) if on_page is not None else ""
    fragment = fragment or text_fragment(highlight)
    hash_part = anchor + (":~:" + fragment if fragment else "")
    return base + ("#" + hash_part if hash_part else "")
