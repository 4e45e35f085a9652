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
passage lands there: the widget's parameter, when the widget is on the page, wins.
"""

from __future__ import annotations

import re
import urllib.parse

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


def citation_link(url: str, highlight: str) -> str:
    """``url`` (``page/#anchor``, relative or absolute) with both highlight mechanisms."""
    base, _, anchor = url.partition("#")
    param = encode_param(highlight)
    if param:
        path, _, query = base.partition("?")
        kept = [p for p in query.split("&") if p and not p.startswith(HL_PARAM + "=")]
        base = path + "?" + "&".join([*kept, f"{HL_PARAM}={param}"])
    fragment = text_fragment(highlight)
    hash_part = anchor + (":~:" + fragment if fragment else "")
    return base + ("#" + hash_part if hash_part else "")
