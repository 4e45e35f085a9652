"""Citation markers as real models write them: numbers, parentheses, footers.

Square-bracket markers (``[1]``, ``[^1]``, ``[Source: 1]``, ``[1 and 2]``,
``[1: Configuration]``, ``【1】`` …) are unambiguous and matched by
:data:`anchored_query.citations.sentences.CITATION_MARKER` anywhere outside code.
Parentheses are not: ``(1)`` is also an enumeration ("step (1)", "(1) Install")
or a call. So a parenthesised marker counts only where a citation is plausible
(:func:`canonical_markers`); the parser then sees it as ``[n]``. A "Sources:"
footer is not a sentence: :func:`take_footers` takes its numbers out as markers
for the text before it.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from anchored_query.citations.sentences import (
    MARKER_LABEL,
    MARKER_NUMBERS,
    code_spans,
    outside_code,
)

__all__ = ["Footer", "canonical_markers", "marker_numbers", "take_footers"]

_MAX_RANGE = 20  # [1-300] is not 300 citations: keep the two ends

# "(Source: 1)", "(see passage 2)", "（来源：3）": a label makes it a citation anywhere.
_PAREN_LABELLED = re.compile(
    r"[(（]\s*(?:see\s+|cf\.?\s+)?"
    + MARKER_LABEL
    + r"\s*[:：]?\s*("
    + MARKER_NUMBERS
    + r")\s*[)）]",
    re.IGNORECASE,
)
# "(1)", "(1, 2)", "(1 and 2)", "（1）": a citation only where one is plausible.
_PAREN_BARE = re.compile(r"[(（]\s*(" + MARKER_NUMBERS + r")\s*[)）]", re.IGNORECASE)
_PAREN_RUN = re.compile(r"(?:\s*[(（]\s*" + MARKER_NUMBERS + r"\s*[)）])*", re.IGNORECASE)
# After a bare "(n)": the end of the sentence (terminator or end of line).
_SENTENCE_END_AFTER = re.compile(r"[ \t]*(?:[.!?。！？]|[ \t]*(?:\n|$))")
_TERMINATOR_BEFORE = re.compile(r"[.!?。！？][\"'”’)]*[ \t]*$")
# Words after which "(1)" is an enumeration or a reference to something else.
_ENUMERATING_WORDS = """
    step steps item items option options rule rules part parts phase stage case cases point
    points figure fig equation eq table line lines footnote note version chapter method
    methods way ways example and or to from of in number no
"""
_ENUMERATING = frozenset(_ENUMERATING_WORDS.split())
_WORD_BEFORE = re.compile(r"([A-Za-z]+)\.?[ \t]*$")

# "Sources:", "**References**:", "来源：", "Sources: [1], [3]", "Source: passage 3".
# The repetitions here and in _FOOTER_REST are possessive (``*+``, ``++``): these run on
# every line of a model's reply, and as plain ``(?:[-*>#]+[ \t]*)*`` a line of 30 dashes
# could be split 2**29 ways before failing (seconds at 20 dashes, hours at 40).
_FOOTER_HEAD = re.compile(
    r"^[ \t]*(?:[-*>#]+[ \t]*)*+[*_]*[ \t]*"
    r"(?:sources?(?:\s+used)?|references?|citations?|cited(?:\s+passages?|\s+sources?)?|"
    r"passages?(?:\s+(?:used|cited))?|来源|参考(?:资料|文献|来源)?|引用(?:来源)?)"
    r"[ \t]*[*_]*[ \t]*[:：][ \t]*[*_]*[ \t]*(?P<rest>.*)$",
    re.IGNORECASE,
)
# What may follow the head on its line: markers or bare numbers only.
_FOOTER_REST = re.compile(
    r"^(?:[\[【［(（]?\s*(?:"
    + MARKER_LABEL
    + r"\s*[:：]?\s*)?"
    + MARKER_NUMBERS
    + r"\s*(?:[:：†|][^\[\]【】［］\n]{0,80})?[\]】］)）]?[\s,;，、.]*)++$",
    re.IGNORECASE,
)
# One item of a footer list: "1. Section: …", "- [2] Configuration", "1. [2] …", "[^3]: …".
_FOOTER_ITEM = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:(?:" + MARKER_LABEL + r"\s*)?(?P<enum>\d{1,4})[.):：](?:[ \t]+|$))?"
    r"(?:[\[【［(（]\s*(?:" + MARKER_LABEL + r"\s*[:：]?\s*)?[#^]?(?P<marker>\d{1,4})\s*"
    r"[\]】］)）]:?(?:[ \t]|$))?",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Footer:
    """A "Sources:" footer: the line it starts on and the numbers it lists."""

    line: int
    numbers: list[int]


def marker_numbers(marker: str) -> list[int]:
    """The passage numbers of one marker: ``[1-3]`` is 1, 2, 3; ``[1: Version 2]`` is 1."""
    body = marker.strip().strip("[]【】［］()（）")
    m = re.match(r"\s*(?:" + MARKER_LABEL + r"\s*[:：]?\s*)?(" + MARKER_NUMBERS + ")", body, re.I)
    if m is None:
        return []
    numbers: list[int] = []
    for part in re.split(r"[,，;、&]|\band\b|和|与", m.group(1), flags=re.IGNORECASE):
        bounds = [int(d) for d in _DIGITS.findall(part)]
        if len(bounds) == 2 and 0 < bounds[1] - bounds[0] <= _MAX_RANGE:
            numbers.extend(range(bounds[0], bounds[1] + 1))
        else:
            numbers.extend(bounds)
    return list(dict.fromkeys(n for n in numbers if n > 0))


def canonical_markers(text: str, known: Collection[int] | None = None) -> str:
    """``text`` with every parenthesised citation rewritten as ``[n, …]``.

    Labelled ones (``(Source: 1)``) always count. A bare ``(1)``/``(1, 2)``/``（1）``
    counts only when it ends a sentence (a terminator or the line's end follows,
    or a terminator precedes), is not glued to a word (``f(1)``), does not start
    its line (``(1) Install``), does not follow an enumerating word (``step
    (1).``) and, when ``known`` is given, all its numbers are context numbers.
    Code is left alone.
    """
    if "(" not in text and "（" not in text:
        return text
    masked = outside_code(text)
    pieces: list[str] = []
    last = 0
    for m in _PAREN_BARE.finditer(masked):
        if not _plausible(masked, m, known):
            continue
        numbers = marker_numbers(m.group(1))
        pieces.append(text[last : m.start()])
        pieces.append(
            "[" + ", ".join(str(n) for n in numbers) + "]" + "\n" * m.group(0).count("\n")
        )
        last = m.end()
    pieces.append(text[last:])
    text = "".join(pieces)
    masked = outside_code(text)
    pieces, last = [], 0
    for m in _PAREN_LABELLED.finditer(masked):
        numbers = marker_numbers(m.group(1))
        pieces.append(text[last : m.start()])
        pieces.append(
            "[" + ", ".join(str(n) for n in numbers) + "]" + "\n" * m.group(0).count("\n")
        )
        last = m.end()
    pieces.append(text[last:])
    return "".join(pieces)


def take_footers(text: str) -> tuple[str, list[Footer]]:
    """``text`` with its "Sources:" footers blanked (lines kept), and their numbers.

    A footer is a line opening with a sources label (``Sources:``,
    ``**References:**``, ``来源：``) followed by nothing or only markers/numbers,
    with the list items under it (``1. Section: …``, ``- [2] Configuration``); a
    run of footnote definitions (``[^1]: …``) is one too. Lines inside fenced
    code never are.
    """
    lines = text.split("\n")
    fenced = _fenced_lines(text)
    footers: list[Footer] = []
    i = 0
    while i < len(lines):
        if i in fenced:
            i += 1
            continue
        head = _FOOTER_HEAD.match(lines[i])
        definition = re.match(r"^[ \t]*\[\^?\d{1,4}\][ \t]*:", lines[i])
        if head is None and definition is None:
            i += 1
            continue
        rest = head.group("rest").strip().strip("*_").strip() if head else ""
        if head is not None and rest and not _FOOTER_REST.match(rest):
            i += 1
            continue
        numbers = _numbers_in(rest) if head is not None else []
        start, j = i, i + (1 if head is not None else 0)
        while j < len(lines) and j not in fenced:
            if not lines[j].strip() and j == start + 1 and head is not None and not rest:
                j += 1
                continue
            item = _FOOTER_ITEM.match(lines[j])
            number = item and (item.group("marker") or item.group("enum"))
            if not number:
                break
            numbers.append(int(number))
            j += 1
        if head is not None and not rest and j == start + 1:
            i += 1  # a label with nothing under it: ordinary text
            continue
        footers.append(Footer(start, list(dict.fromkeys(n for n in numbers if n > 0))))
        for k in range(start, j):
            lines[k] = ""
        i = j
    return "\n".join(lines), footers


def _numbers_in(rest: str) -> list[int]:
    numbers: list[int] = []
    for m in re.finditer(
        r"[\[【［(（]?\s*(?:" + MARKER_LABEL + r"\s*[:：]?\s*)?(" + MARKER_NUMBERS + ")", rest, re.I
    ):
        numbers.extend(marker_numbers(m.group(1)))
    return numbers


def _plausible(masked: str, m: re.Match[str], known: Collection[int] | None) -> bool:
    numbers = marker_numbers(m.group(1))
    if not numbers or (known is not None and not all(n in known for n in numbers)):
        return False
    before = masked[: m.start()]
    line_before = before[before.rfind("\n") + 1 :]
    if not line_before.strip() or re.fullmatch(r"[ \t]*(?:[-*+>][ \t]*)+", line_before):
        return False  # "(1) Install": an enumeration
    prev = before[-1:]
    if prev and (prev.isalnum() or prev in "_)]}\"'`") and m.group(0)[0] == "(":
        return False  # "f(1)", "x(1)"
    word = _WORD_BEFORE.search(line_before)
    if word is not None and word.group(1).casefold() in _ENUMERATING:
        return False
    if _TERMINATOR_BEFORE.search(line_before):
        return True
    run = _PAREN_RUN.match(masked, m.end())
    end = run.end() if run else m.end()
    return _SENTENCE_END_AFTER.match(masked, end) is not None


def _fenced_lines(text: str) -> set[int]:
    lines: set[int] = set()
    for start, end, fenced in code_spans(text):
        if fenced:
            first = text.count("\n", 0, start)
            last = text.count("\n", 0, max(start, end - 1))
            lines.update(range(first, last + 1))
    return lines
