"""Sentence splitting shared by the citation parser and the extractive answerer.

Documentation text is not prose: it carries file names (``mkdocs.yml``),
versions (``1.2.3``), abbreviations (``e.g.``), inline code, fenced code blocks,
list items and Chinese punctuation. The splitter is a single left-to-right scan
that never cuts inside code, treats every line break as a boundary (list items,
table rows and the blocks of a section are separate lines), and keeps citation
markers that follow a full stop (``… 8000. [1]``) with the sentence they cite.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

# A citation marker in brackets, in the forms models write: [1], [1, 2], [1-3],
# [1 and 2], [^1], [#1], [Source: 1], [doc 1], [Passage 1, Passage 2],
# [1: Configuration], [1†source]; [1][2] is two markers. Full-width brackets
# (【1】, ［1］) too, because models writing Chinese produce them. Markers in
# parentheses, which are ambiguous in prose, are recognised by the citation parser.
MARKER_LABEL = (
    r"(?:sources?|passages?|refs?\.?|references?|docs?\.?|documents?|citations?|"
    r"来源|参考|段落|文档)"
)
MARKER_NUMBERS = (
    r"[#^]?\d{1,4}(?:\s*(?:[,，;、&\-–—~]|\band\b|和|与)\s*(?:"
    + MARKER_LABEL
    + r"\s*[:：]?\s*)?[#^]?\d{1,4})*"
)
CITATION_MARKER = re.compile(
    r"[\[【［]\s*(?:" + MARKER_LABEL + r"\s*[:：]?\s*)?" + MARKER_NUMBERS + r"\s*"
    r"(?:(?:[:：†|]|\s[-–—]\s)[^\[\]【】［］\n]{0,80})?[\]】］]",
    re.IGNORECASE,
)

_TERMINATORS = ".!?"
_CJK_TERMINATORS = "。！？"
_CLOSERS = "\"')]}”’»」』）】〕"
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")
_BLANK_LINE = re.compile(r"(?=\n\n)")
_LIST_MARKER_ONLY = re.compile(r"^\s*(?:[-*+]\s+)?(?:\d{1,3}|[A-Za-z]|[ivxlcIVXLC]{1,5})$")
_MARKER_TAIL = re.compile(r"[ \t]*(?:" + CITATION_MARKER.pattern + r")", re.IGNORECASE)
_MARKER_END_PUNCT = re.compile(r"[ \t]*[.。](?=\s|$)")
# A citation marker right before the terminator ("… by default [1]. option | …"): the
# writer closed a cited sentence there, whatever the case of the next word.
_MARKER_BEFORE = re.compile(r"(?:" + CITATION_MARKER.pattern + r")[ \t]*$", re.IGNORECASE)
# Abbreviations after which "." does not end a sentence. "etc." is absent on
# purpose: it often does end one, and "etc. and" is caught by the lowercase rule.
_ABBREVIATIONS = frozenset(
    {
        "al",
        "approx",
        "ca",
        "cf",
        "dr",
        "eq",
        "esp",
        "fig",
        "incl",
        "jr",
        "mr",
        "mrs",
        "ms",
        "no",
        "nr",
        "pp",
        "resp",
        "sec",
        "sr",
        "st",
        "viz",
        "vol",
        "vs",
    }
)
_DOTTED_ABBREVIATION = re.compile(r"^[a-z](?:\.[a-z])+$", re.IGNORECASE)


@dataclass(frozen=True)
class Sentence:
    """One sentence: its stripped text and its ``[start, end)`` span in the source."""

    text: str
    start: int
    end: int


def is_cjk(ch: str) -> bool:
    """True for a CJK ideograph, kana, hangul or CJK punctuation character."""
    code = ord(ch)
    return (
        0x3000 <= code <= 0x30FF  # CJK punctuation, hiragana, katakana
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF
        or 0xAC00 <= code <= 0xD7AF
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFFEF  # full-width forms
        or 0x20000 <= code <= 0x2FA1F
    )


def code_spans(text: str) -> list[tuple[int, int, bool]]:
    """Spans of code in Markdown-ish ``text``: ``(start, end, is_fenced_block)``.

    A fenced block runs from an opening fence at the start of a line to the
    matching closing fence (or the end of the text). An inline span is a run of
    backticks closed by a run of the same length before a blank line; an
    unmatched run is ordinary text. Spans are sorted and do not overlap.

    Linear in the text: fences, backtick runs and blank lines are found once,
    and the closing run of each length is looked up by bisection (a scan from
    every unmatched run made 80,000 backticks take seconds).
    """
    n = len(text)
    fences = list(_FENCE_OPEN.finditer(text))
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    blank_lines = [m.start() for m in _BLANK_LINE.finditer(text)]
    by_length: dict[int, list[int]] = {}  # run length -> starts of the runs of that length
    for start, end in runs:
        by_length.setdefault(end - start, []).append(start)
    spans: list[tuple[int, int, bool]] = []
    pos = fence_i = run_i = 0
    while pos < n:
        while fence_i < len(fences) and fences[fence_i].start() < pos:
            fence_i += 1
        while run_i < len(runs) and runs[run_i][1] <= pos:
            run_i += 1
        fence = fences[fence_i] if fence_i < len(fences) else None
        inline: tuple[int, int] | None = None
        if run_i < len(runs):
            inline = (max(runs[run_i][0], pos), runs[run_i][1])
        if fence is None and inline is None:
            break
        if fence is not None and (inline is None or fence.start() <= inline[0]):
            marker = fence.group(1)
            line_end = text.find("\n", fence.end())
            if line_end == -1:
                spans.append((fence.start(), n, True))
                break
            closing = re.compile(
                r"^[ \t]*" + re.escape(marker[0]) + "{" + str(len(marker)) + r",}[ \t]*$",
                re.MULTILINE,
            ).search(text, line_end + 1)
            end = n if closing is None else closing.end()
            spans.append((fence.start(), end, True))
            pos = end
            continue
        assert inline is not None
        start, end = inline
        blank = bisect.bisect_left(blank_lines, end)
        limit = blank_lines[blank] if blank < len(blank_lines) else n
        close = _closing_run(by_length.get(end - start, []), end, limit, end - start)
        if close is None:
            pos = end
            continue
        spans.append((start, close, False))
        pos = close
    return spans


def _closing_run(starts: list[int], after: int, limit: int, length: int) -> int | None:
    """The end of the first run of ``length`` backticks that starts at ``after`` or later
    and ends by ``limit`` (``starts``: the sorted starts of every such run)."""
    i = bisect.bisect_left(starts, after)
    if i < len(starts) and starts[i] + length <= limit:
        return starts[i] + length
    return None


def outside_code(text: str) -> str:
    """``text`` with every code span blanked to spaces (offsets are preserved)."""
    if "`" not in text and "~~~" not in text:
        return text
    chars = list(text)
    for start, end, _ in code_spans(text):
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def sentence_spans(text: str) -> list[Sentence]:
    """Split ``text`` into sentences, keeping their offsets.

    Boundaries: ``.``, ``!``, ``?`` (with closing quotes/brackets) followed by
    whitespace and not by a lowercase letter, or directly by a CJK character;
    ``。！？`` anywhere; every line break; both ends of a fenced code block, which
    is one sentence. Not boundaries: a ``.`` inside a token (``1.2.3``,
    ``mkdocs.yml``), after an abbreviation (``e.g.``, ``i.e.``, ``vs.``), after a
    list number (``1. Install``), or anything inside code.
    """
    spans = code_spans(text)
    cuts: list[int] = []
    n = len(text)
    seg_start = 0
    i = 0
    span_index = 0
    while i < n:
        while span_index < len(spans) and spans[span_index][0] < i:
            span_index += 1
        if span_index < len(spans) and spans[span_index][0] == i:
            start, end, fenced = spans[span_index]
            span_index += 1
            if fenced:
                cuts.extend((start, end))
                seg_start = end
            i = end
            continue
        ch = text[i]
        if ch == "\n":
            cuts.append(i)
            seg_start = i + 1
            i += 1
            continue
        if ch in _CJK_TERMINATORS:
            j = _skip(text, i + 1, _CJK_TERMINATORS + _TERMINATORS + _CLOSERS)
            j = _absorb_markers(text, j)
            cuts.append(j)
            seg_start = i = j
            continue
        if ch in _TERMINATORS:
            j = _skip(text, i + 1, _TERMINATORS)
            j = _skip(text, j, _CLOSERS)
            if j >= n:
                cuts.append(n)
                break
            nxt = text[j]
            if is_cjk(nxt) and nxt not in "，、；：":
                cuts.append(j)
                seg_start = i = j
                continue
            if nxt.isspace() and _ends_sentence(text, seg_start, i, j):
                j = _absorb_markers(text, j)
                cuts.append(j)
                seg_start = i = j
                continue
            i = j
            continue
        i += 1
    cuts.append(n)

    sentences: list[Sentence] = []
    start = 0
    for cut in sorted(set(cuts)):
        if cut <= start:
            continue
        piece = text[start:cut]
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            sentences.append(Sentence(stripped, start + lead, start + lead + len(stripped)))
        start = cut
    return sentences


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see :func:`sentence_spans`), stripped."""
    return [s.text for s in sentence_spans(text)]


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _ends_sentence(text: str, seg_start: int, dot: int, after: int) -> bool:
    """Decide whether the terminator at ``dot`` (followed by whitespace) ends a sentence."""
    k = after
    while k < len(text) and text[k] in " \t":
        k += 1
    if _MARKER_BEFORE.search(text, seg_start, dot):
        return True
    if k < len(text) and text[k] != "\n" and text[k].islower():
        return False
    if text[dot] != ".":
        return True
    if _LIST_MARKER_ONLY.match(text[seg_start:dot]):
        return False
    w = dot
    while w > seg_start and (text[w - 1].isalpha() or text[w - 1] == "."):
        w -= 1
    word = text[w:dot]
    if not word or (w > seg_start and text[w - 1].isdigit()):
        return True
    if _DOTTED_ABBREVIATION.match(word):
        return False
    lower = word.lower()
    if lower == "no":
        return not (k < len(text) and text[k].isdigit())
    return lower not in _ABBREVIATIONS


def _absorb_markers(text: str, pos: int) -> int:
    """Extend a sentence end over citation markers that follow it (``8000. [1]``)."""
    end = pos
    while True:
        m = _MARKER_TAIL.match(text, end)
        if m is None:
            break
        end = m.end()
    if end == pos:
        return pos
    punct = _MARKER_END_PUNCT.match(text, end)
    return punct.end() if punct else end
