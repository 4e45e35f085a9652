"""KEPT ONLY FOR COMPARISON: today's citation parse/verify, frozen at commit 56a0a56.

``tests/bench/bench_llm_answers.py`` scores the same real model replies with
this verifier and with the current ``anchored_query.citations.verify`` so that one run
shows the figures before and after the change. Nothing in the product imports
this module; do not fix or extend it. It is a verbatim copy of
``lambda/anchored_query/citations/sentences.py`` followed by ``lambda/anchored_query/citations/verify.py``
as they were at 56a0a56 (imports merged at the top; ``_DOTTED_ABBREVIATION`` is
defined identically in both).
"""

# ruff: noqa
# mypy: ignore-errors
from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from anchored_query.types import AnswerSentence, Passage

# ---------------------------------------------------------------- sentences.py at 56a0a56

# A citation marker: [1], [1, 2], [1-3], [1][2] is two markers. Full-width
# brackets (【1】, ［1］) and a leading "source"/"passage" word are accepted
# because models writing Chinese or following other prompts produce them.
CITATION_MARKER = re.compile(
    r"[\[【［]\s*(?:(?:sources?|passages?|refs?)\s*)?"
    r"\d{1,4}(?:\s*[,，;、\-–—~]\s*\d{1,4})*\s*[\]】］]",
    re.IGNORECASE,
)

_TERMINATORS = ".!?"
_CJK_TERMINATORS = "。！？"
_CLOSERS = "\"')]}”’»」』）】〕"
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")
_LIST_MARKER_ONLY = re.compile(r"^\s*(?:[-*+]\s+)?(?:\d{1,3}|[A-Za-z]|[ivxlcIVXLC]{1,5})$")
_MARKER_TAIL = re.compile(r"[ \t]*(?:" + CITATION_MARKER.pattern + r")", re.IGNORECASE)
_MARKER_END_PUNCT = re.compile(r"[ \t]*[.。](?=\s|$)")
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
    """
    spans: list[tuple[int, int, bool]] = []
    pos = 0
    n = len(text)
    while pos < n:
        fence = _FENCE_OPEN.search(text, pos)
        inline = _BACKTICKS.search(text, pos)
        if fence is None and inline is None:
            break
        if fence is not None and (inline is None or fence.start() <= inline.start()):
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
        run = inline.group(0)
        limit = text.find("\n\n", inline.end())
        limit = n if limit == -1 else limit
        close = re.compile(r"(?<!`)" + run + r"(?!`)").search(text, inline.end(), limit)
        if close is None:
            pos = inline.end()
            continue
        spans.append((inline.start(), close.end(), False))
        pos = close.end()
    return spans


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


# ---------------------------------------------------------------- citations.py at 56a0a56

__all__ = [
    "PREVIEW_CHARS",
    "AnswerItem",
    "CitationItem",
    "VerifiedAnswer",
    "parse_answer",
    "renumber",
    "verify",
]

PREVIEW_CHARS = 600
_MAX_RANGE = 20  # [1-300] is not 300 citations: keep the two ends

_DIGITS = re.compile(r"\d+")
_FORMATTING_LINE = re.compile(r"^(?:#{1,6}\s.*|[-*_]{3,}|[-*+]|\d+[.)])$")
_CONTENT = re.compile(r"[^\W_]", re.UNICODE)
# A marker, or markers in brackets with an attribution word: "(see [2])", "(Source: [1], [3])".
_MARKER_GROUP = re.compile(
    r"[(（]\s*(?:(?:see|sources?|passages?|refs?|cf\.?|来源|参见)\s*[:：]?\s*)?"
    r"(?:(?:" + CITATION_MARKER.pattern + r")[\s,;，、]*)+[)）]"
    r"|" + CITATION_MARKER.pattern,
    re.IGNORECASE,
)

# Checkable facts. ASCII classes on purpose: "端口8000" must yield "8000".
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])[vV]?(\d+(?:[.,]\d+)*)(?![A-Za-z0-9_]|[.,][A-Za-z0-9_])")
_PASSAGE_NUMBER = re.compile(r"(?<![0-9.,])\d+(?:[.,]\d+)*(?![0-9])")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_OPTION = re.compile(r"(?<![\w-])(?:--[A-Za-z0-9][\w-]*|-[A-Za-z](?=[\s,.;:)]|$))", re.ASCII)
_SNAKE = re.compile(r"(?<![\w])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w])", re.ASCII)
_DOTTED = re.compile(r"(?<![\w.-])[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+(?![\w])", re.ASCII)
_DOTTED_ABBREVIATION = re.compile(r"^[a-z](?:\.[a-z])+$", re.IGNORECASE)
_QUOTED = re.compile(
    r"\"([^\"\n]{1,120})\"|“([^”\n]{1,120})”|「([^」\n]{1,120})」|『([^』\n]{1,120})』"
    r"|(?<![\w])'([^'\n]{1,120})'(?![\w])"
)
_PIECE_STRIP = "\"'`“”‘’,;:()[]{}<>"

# "The documentation does not cover …" and its Chinese counterparts.
_NO_COVERAGE = re.compile(
    r"\b(?:documentation|docs|passages?|sources?|context|site)\b[^.!?\n]{0,60}?"
    r"\b(?:do|does|did)(?:\s+not|n['’]t)\b[^.!?\n]{0,30}?"
    r"\b(?:cover|mention|say|describe|explain|address|contain|include|document|discuss|specify|provide)"
    r"|\b(?:no|not\s+any)\s+(?:information|mention|details?|documentation)\b"
    r"|\bnot\s+(?:covered|mentioned|documented|described|addressed)\s+(?:in|by)\b"
    r"|\bI\s+(?:could\s+not|couldn['’]t|cannot|can['’]t)\s+find\b"
    r"|(?:文档|资料|段落|来源)[^。！？\n]{0,20}?(?:没有|并未|未|不)(?:提到|提及|涉及|说明|介绍|包含|覆盖|描述|讲)"
    r"|(?:没有|未能|未)找到",
    re.IGNORECASE,
)


class AnswerItem(TypedDict):
    """One sentence of the ``answer`` array of ``/v1/ask``."""

    text: str
    citations: list[int]


class CitationItem(TypedDict):
    """One entry of the ``citations`` array of ``/v1/ask``."""

    n: int
    chunk_id: str
    url: str
    title: str
    heading_path: list[str]
    passage: str
    highlight: str


@dataclass(frozen=True)
class VerifiedAnswer:
    """The sentences that survived verification.

    ``sentences`` cite only context passages (context numbering). ``removed``
    counts the sentences dropped, ``reasons`` says why (one line each, for the
    logs), ``invalid_citations`` lists cited numbers that were not in the
    context. ``abstained`` is true when nothing supported remains or when the
    answer opens by saying the documentation does not cover the question.
    """

    sentences: list[AnswerSentence]
    removed: int
    reasons: list[str] = field(default_factory=list)
    abstained: bool = False
    invalid_citations: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Claim:
    kind: Literal["number", "option", "identifier", "code", "quote"]
    value: str


def parse_answer(text: str) -> list[AnswerSentence]:
    """Split an LLM answer into sentences with the passage numbers each cites.

    Markers ``[1]``, ``[1, 2]``, ``[1][2]``, ``[1-3]`` (and full-width ``【1】``)
    are taken from anywhere in a sentence outside code and removed from its
    text. A fragment that is only markers belongs to the sentence before it; a
    fenced code block without markers shares the citations of the sentence that
    introduces it. Markdown headings and rules are dropped; list items and line
    breaks separate sentences. Citations keep their order of appearance.
    """
    out: list[AnswerSentence] = []
    pending: list[int] = []
    for span in sentence_spans(text):
        raw = span.text
        if raw.startswith(("```", "~~~")):
            inherited = out[-1].citations if out else []
            out.append(AnswerSentence(raw, list(inherited)))
            continue
        body, ids = _take_markers(raw)
        if not _CONTENT.search(body):
            if out:
                out[-1] = AnswerSentence(out[-1].text, _merge(out[-1].citations, ids))
            else:
                pending = _merge(pending, ids)
            continue
        if _FORMATTING_LINE.match(body) and not ids:
            continue
        out.append(AnswerSentence(body, _merge(pending, ids)))
        pending = []
    return out


def verify(sentences: Sequence[AnswerSentence], passages: Mapping[int, Passage]) -> VerifiedAnswer:
    """Keep the sentences whose citations and facts the context supports.

    ``passages`` maps context numbers to passages; passages marked ``excluded``
    count as absent. Cited numbers outside the context are dropped; a sentence
    left with no citation is removed, and so is one with a number, option,
    identifier, inline code or quoted string that occurs in none of its cited
    passages (text, highlight, title and heading path; case-insensitive,
    whitespace-normalised; numbers compared as whole tokens so ``80`` does not
    match ``8000``; integers below 10 are not checked, being mostly counts and
    list numbers). See the module docstring for the policy.
    """
    haystacks: dict[int, _Haystack] = {}
    kept: list[AnswerSentence] = []
    reasons: list[str] = []
    invalid: list[int] = []
    opens_with_no_coverage = False
    for i, sentence in enumerate(sentences, start=1):
        valid = [n for n in dict.fromkeys(sentence.citations) if _usable(passages.get(n))]
        invalid.extend(n for n in sentence.citations if n not in valid and n not in invalid)
        claims = _claims(sentence.text)
        no_coverage = _NO_COVERAGE.search(sentence.text) is not None
        if not valid:
            if no_coverage and _may_stand_uncited(sentence.text, claims):
                kept.append(AnswerSentence(sentence.text, [], True))
                opens_with_no_coverage = opens_with_no_coverage or len(kept) == 1
                continue
            cited = f" (cited {sentence.citations}, none in context)" if sentence.citations else ""
            reasons.append(f"sentence {i}: no citation{cited}: {_short(sentence.text)}")
            continue
        for n in valid:
            if n not in haystacks:
                haystacks[n] = _Haystack(passages[n])
        missing = [c for c in claims if not any(haystacks[n].has(c) for n in valid)]
        if missing:
            facts = ", ".join(repr(c.value) for c in missing)
            reasons.append(f"sentence {i}: {facts} not in cited {valid}: {_short(sentence.text)}")
            continue
        kept.append(AnswerSentence(sentence.text, valid, True))
        if len(kept) == 1 and no_coverage:
            opens_with_no_coverage = True
    supported = any(s.citations for s in kept)
    return VerifiedAnswer(
        sentences=kept,
        removed=len(sentences) - len(kept),
        reasons=reasons,
        abstained=opens_with_no_coverage or not supported,
        invalid_citations=invalid,
    )


def renumber(
    verified: VerifiedAnswer, passages: Mapping[int, Passage]
) -> tuple[list[AnswerItem], list[CitationItem]]:
    """The ``answer`` and ``citations`` arrays of ``/v1/ask``.

    Context numbers become 1..n in order of first appearance in the answer; one
    citation per distinct passage, with ``url`` (``page#anchor``), the text to
    show in the preview (``passage``: the highlight, cut near
    :data:`PREVIEW_CHARS`) and the exact text for the page to highlight.
    """
    numbers: dict[int, int] = {}
    for sentence in verified.sentences:
        for n in sentence.citations:
            if n in passages and n not in numbers:
                numbers[n] = len(numbers) + 1
    answer: list[AnswerItem] = [
        {
            "text": s.text,
            "citations": sorted({numbers[n] for n in s.citations if n in numbers}),
        }
        for s in verified.sentences
    ]
    citations: list[CitationItem] = []
    for old, new in numbers.items():
        p = passages[old]
        highlight = p.highlight.strip() or p.text.strip()
        citations.append(
            {
                "n": new,
                "chunk_id": p.chunk_ids[0] if p.chunk_ids else p.section_id,
                "url": p.url,
                "title": p.title,
                "heading_path": list(p.heading_path),
                "passage": _preview(highlight),
                "highlight": highlight,
            }
        )
    return answer, citations


def _take_markers(text: str) -> tuple[str, list[int]]:
    """``text`` without its citation markers (outside code), and their numbers.

    Removal repeats until none is left: taking ``[29]`` out of ``[6[29]]`` must
    not leave a ``[6]`` in the text that looks like a citation but is none.
    """
    body, ids = _take_markers_once(text)
    while body != text and CITATION_MARKER.search(outside_code(body)):
        text = body
        body, more = _take_markers_once(text)
        ids = _merge(ids, more)
    return body, ids


def _take_markers_once(text: str) -> tuple[str, list[int]]:
    masked = outside_code(text)
    ids: list[int] = []
    pieces: list[str] = []
    last = 0
    for m in _MARKER_GROUP.finditer(masked):
        for marker in CITATION_MARKER.findall(m.group(0)):
            ids = _merge(ids, _marker_numbers(marker))
        start = m.start()
        while start > last and text[start - 1] in " \t":
            start -= 1
        pieces.append(text[last:start])
        last = m.end()
    pieces.append(text[last:])
    return "".join(pieces).strip(), ids


def _marker_numbers(marker: str) -> list[int]:
    numbers: list[int] = []
    for part in re.split(r"[,，;、]", marker):
        bounds = [int(d) for d in _DIGITS.findall(part)]
        if len(bounds) == 2 and 0 < bounds[1] - bounds[0] <= _MAX_RANGE:
            numbers.extend(range(bounds[0], bounds[1] + 1))
        else:
            numbers.extend(bounds)
    return [n for n in numbers if n > 0]


def _merge(first: list[int], second: list[int]) -> list[int]:
    return list(dict.fromkeys([*first, *second]))


def _may_stand_uncited(text: str, claims: list[_Claim]) -> bool:
    """A no-coverage statement may name what is missing but not assert numbers."""
    return len(text) <= 200 and all(c.kind != "number" for c in claims)


def _usable(passage: Passage | None) -> bool:
    return passage is not None and not passage.excluded


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _number_tokens(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Numbers in ``text`` as comparable tokens: ``1,000`` -> ``1000``, ``1,2`` -> two."""
    tokens: list[str] = []
    for m in pattern.finditer(text):
        value = m.group(1) if m.groups() else m.group(0)
        if _THOUSANDS.fullmatch(value):
            tokens.append(value.replace(",", ""))
        else:
            tokens.extend(v for v in value.split(",") if v)
    return tokens


def _exempt(number: str) -> bool:
    """Integers below 10 are counts and list numbers far more often than facts."""
    return "." not in number and int(number) < 10


def _prose_claims(text: str) -> list[_Claim]:
    claims: list[_Claim] = []
    claims.extend(_Claim("number", t) for t in _number_tokens(text, _NUMBER) if not _exempt(t))
    claims.extend(_Claim("option", m.group(0)) for m in _OPTION.finditer(text))
    claims.extend(_Claim("identifier", m.group(0)) for m in _SNAKE.finditer(text))
    claims.extend(
        _Claim("identifier", m.group(0))
        for m in _DOTTED.finditer(text)
        if not _DOTTED_ABBREVIATION.match(m.group(0))
    )
    for m in _QUOTED.finditer(text):
        quoted = next(g for g in m.groups() if g is not None).strip()
        if _CONTENT.search(quoted):
            claims.append(_Claim("quote", quoted))
    return claims


def _claims(text: str) -> list[_Claim]:
    """The checkable facts of one answer sentence, de-duplicated."""
    if text.startswith(("```", "~~~")):
        body = text.split("\n", 1)[1] if "\n" in text else ""
        body = re.sub(r"\n[ \t]*(?:`{3,}|~{3,})[ \t]*$", "", body)
        claims = _prose_claims(body)
    else:
        claims = _prose_claims(outside_code(text))
        for start, end, fenced in code_spans(text):
            if not fenced:
                code = text[start:end].strip("`").strip()
                if code:
                    claims.append(_Claim("code", code))
    return list(dict.fromkeys(claims))


class _Haystack:
    """One passage's searchable text, normalised once."""

    def __init__(self, passage: Passage) -> None:
        raw = "\n".join([passage.title, *passage.heading_path, passage.text, passage.highlight])
        self.text = _norm(raw)
        self.numbers = set(_number_tokens(unicodedata.normalize("NFKC", raw), _PASSAGE_NUMBER))

    def has(self, claim: _Claim) -> bool:
        if claim.kind == "number":
            return claim.value in self.numbers
        value = _norm(claim.value)
        if claim.kind in ("option", "identifier"):
            return self._has_word(value)
        if value in self.text:
            return True
        if claim.kind == "quote":
            return False
        # Inline code composed from attested pieces (``mkdocs serve --dev-addr 0.0.0.0:8001``)
        # passes when every piece is attested; numbers still compare as tokens.
        pieces = [p.strip(_PIECE_STRIP) for p in value.split()]
        pieces = [p for p in pieces if p]
        return len(pieces) > 1 and all(self._piece_attested(p) for p in pieces)

    def _piece_attested(self, piece: str) -> bool:
        if self._has_word(piece):
            return True
        for part in re.split(r"[:=/,]+", piece):
            part = part.strip(_PIECE_STRIP)
            numbers = _number_tokens(part, _NUMBER)
            if numbers and numbers[0] == part.lstrip("vV"):
                if not all(n in self.numbers or _exempt(n) for n in numbers):
                    return False
            elif len(part) >= 2 and not self._has_word(part):
                return False
        return True

    def _has_word(self, value: str) -> bool:
        pattern = r"(?<![a-z0-9_-])" + re.escape(value) + r"(?![a-z0-9_-])"
        return re.search(pattern, self.text) is not None


def _preview(text: str) -> str:
    if len(text) <= PREVIEW_CHARS:
        return text
    cut = text[:PREVIEW_CHARS]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > PREVIEW_CHARS * 0.8:
        cut = cut[:space]
    return cut.rstrip(" \n,;:") + "…"


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
