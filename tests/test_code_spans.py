"""``sentences.code_spans``: the same spans as the straightforward scan, in linear work.

No timings: the work is counted as characters the module's regular expressions
are asked to scan, on an input and on one four times as long.
"""

from __future__ import annotations

import re
from typing import Any

import anchored_query.citations.sentences as sentences
import pytest
from anchored_query.citations.sentences import code_spans
from hypothesis import given, settings
from hypothesis import strategies as st

_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")


def reference_spans(text: str) -> list[tuple[int, int, bool]]:
    """The scan as it was before it was made linear (quadratic on backtick runs)."""
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


MARKDOWNISH = st.text(
    alphabet=st.sampled_from(["`", "`", "`", "~", "\n", " ", "\t", "a", "b", "."]), max_size=300
)


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(MARKDOWNISH)
def test_code_spans_match_the_reference_scan(text: str) -> None:
    assert code_spans(text) == reference_spans(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "`a`",
        "``a`b``",
        "```\ncode\n```\nafter `x`",
        "~~~~\n```\n~~~~",
        "`a\n\nb`",
        "  ```py\nx\n  ```  \n",
        "````\n```\n````",
        "x" + "`" * 5 + "y",
    ],
)
def test_code_spans_examples(text: str) -> None:
    assert code_spans(text) == reference_spans(text)


class Counting:
    """A compiled pattern that counts the characters it is asked to scan."""

    def __init__(self, pattern: re.Pattern[str], counter: list[int]) -> None:
        self.pattern = pattern
        self.counter = counter

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        stop = len(text) if endpos is None else endpos
        match = self.pattern.search(text, pos, stop)
        self.counter[0] += (match.end() if match else stop) - pos
        return match

    def finditer(self, text: str, pos: int = 0) -> Any:
        self.counter[0] += len(text) - pos
        return self.pattern.finditer(text, pos)


def work(text: str, monkeypatch: pytest.MonkeyPatch) -> int:
    counter = [0]
    with monkeypatch.context() as m:
        for name in ("_FENCE_OPEN", "_BACKTICKS", "_BLANK_LINE"):
            if hasattr(sentences, name):
                m.setattr(sentences, name, Counting(getattr(sentences, name), counter))
        code_spans(text)
    return counter[0]


@pytest.mark.parametrize("unit", ["x`", "``x`", "a `b` c\n", "`" * 7 + " "])
def test_code_spans_work_grows_linearly(unit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four times the text, at most about four times the scanning (it was sixteen)."""
    small = work(unit * 2_000, monkeypatch)
    large = work(unit * 8_000, monkeypatch)
    assert large <= 5 * small, (small, large)
