"""The checkable facts of an answer sentence, and whether a passage states them.

Facts are numbers (every size), command-line options, code identifiers
(``snake_case``, ``dotted.names``), inline code and quoted strings, and in a
sentence written mostly in CJK the Latin-script words (names). A fact
holds when it occurs in the passage (text, highlight, title and heading path;
case-insensitive, whitespace-normalised; numbers compared as whole tokens so
``80`` does not match ``8000``; a dotted name also holds when the passage's
YAML nests those keys, :func:`yaml_key_paths`). Numbers that only enumerate — a list number
at the start of a line (``1.``, ``2)``) or a step number (``step 2``, ``step
(1)``) — are not facts.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from anchored_query.citations.sentences import code_spans, is_cjk, outside_code
from anchored_query.types import Passage

__all__ = ["Claim", "Haystack", "claims", "yaml_key_paths"]

_CONTENT = re.compile(r"[^\W_]", re.UNICODE)
# ASCII classes on purpose: "端口8000" must yield "8000".
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
# "1. Install", "- 2) Run", "(3) Deploy", "第1步": list numbering, not a fact.
_ENUMERATOR = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?(?:\(?\d{1,3}[.)、:]|（\d{1,3}）)(?=\s|$)", re.M)
# "step 2", "Step (3)", "steps 1 and 2": the answer's own step numbering.
_STEP_NUMBER = re.compile(
    r"\b(?:steps?|stage|phase|item)\s*\(?(\d{1,2})\)?(?:\s*(?:and|to|-|–|,)\s*\(?(\d{1,2})\)?)*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Claim:
    """One checkable fact of a sentence."""

    kind: Literal["number", "option", "identifier", "code", "quote"]
    value: str


def claims(text: str) -> list[Claim]:
    """The checkable facts of one answer sentence, de-duplicated."""
    if text.startswith(("```", "~~~")):
        body = text.split("\n", 1)[1] if "\n" in text else ""
        body = re.sub(r"\n[ \t]*(?:`{3,}|~{3,})[ \t]*$", "", body)
        found = _prose_claims(body)
    else:
        prose = _without_enumeration(outside_code(text))
        found = _prose_claims(prose)
        if _mostly_cjk(prose):
            # In a Chinese sentence about an English page the Latin words are names
            # (OpenAI, Bedrock, HTTPX): the one part that can be compared.
            found.extend(Claim("identifier", m.group(0)) for m in _LATIN_NAME.finditer(prose))
        for start, end, fenced in code_spans(text):
            if not fenced:
                code = text[start:end].strip("`").strip()
                if code:
                    found.append(Claim("code", code))
    return list(dict.fromkeys(found))


_LATIN_NAME = re.compile(
    r"(?<![\w.-])[A-Za-z][A-Za-z0-9]+(?:[.+-][A-Za-z0-9]+)*(?![\w-])", re.ASCII
)


def _mostly_cjk(text: str) -> bool:
    """A fifth of the letters or more are CJK (as :mod:`anchored_query.citations.semantic` decides
    an English-only model cannot read the sentence)."""
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(is_cjk(c) for c in letters) * 5 >= len(letters)


def _without_enumeration(text: str) -> str:
    text = _ENUMERATOR.sub(lambda m: " " * len(m.group(0)), text)
    return _STEP_NUMBER.sub(lambda m: " " * len(m.group(0)), text)


def _prose_claims(text: str) -> list[Claim]:
    found: list[Claim] = []
    found.extend(Claim("number", t) for t in number_tokens(text, _NUMBER))
    found.extend(Claim("option", m.group(0)) for m in _OPTION.finditer(text))
    found.extend(Claim("identifier", m.group(0)) for m in _SNAKE.finditer(text))
    found.extend(
        Claim("identifier", m.group(0))
        for m in _DOTTED.finditer(text)
        if not _DOTTED_ABBREVIATION.match(m.group(0))
    )
    for m in _QUOTED.finditer(text):
        quoted = next(g for g in m.groups() if g is not None).strip()
        if _CONTENT.search(quoted):
            found.append(Claim("quote", quoted))
    return found


def number_tokens(text: str, pattern: re.Pattern[str] = _NUMBER) -> list[str]:
    """Numbers in ``text`` as comparable tokens: ``1,000`` -> ``1000``, ``1,2`` -> two."""
    tokens: list[str] = []
    for m in pattern.finditer(text):
        value = m.group(1) if m.groups() else m.group(0)
        if _THOUSANDS.fullmatch(value):
            tokens.append(value.replace(",", ""))
        else:
            tokens.extend(v for v in value.split(",") if v)
    return tokens


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


class Haystack:
    """One passage's searchable text, normalised once."""

    def __init__(self, passage: Passage) -> None:
        raw = "\n".join([passage.title, *passage.heading_path, passage.text, passage.highlight])
        self.raw = passage.text
        self._paths: list[tuple[str, ...]] | None = None
        self.text = _norm(raw)
        self.numbers = set(number_tokens(unicodedata.normalize("NFKC", raw), _PASSAGE_NUMBER))

    def has(self, claim: Claim) -> bool:
        """Whether the passage states ``claim``."""
        if claim.kind == "number":
            return claim.value in self.numbers
        value = _norm(claim.value)
        if claim.kind in ("option", "identifier"):
            return self._has_word(value) or (
                claim.kind == "identifier" and "." in value and self._has_config_path(value)
            )
        if value in self.text:
            return True
        if claim.kind == "code" and _DOTTED.fullmatch(value) and self._has_config_path(value):
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
            numbers = number_tokens(part)
            if numbers and numbers[0] == part.lstrip("vV"):
                if not all(n in self.numbers for n in numbers):
                    return False
            elif len(part) >= 2 and not self._has_word(part):
                return False
        return True

    def verbatim(self, claim: Claim) -> bool:
        """Whether the passage holds ``claim`` as written (not composed of pieces)."""
        if claim.kind == "number":
            return claim.value in self.numbers
        value = _norm(claim.value)
        return (
            self._has_word(value)
            if claim.kind in ("option", "identifier")
            else (value in self.text)
        )

    def _has_config_path(self, value: str) -> bool:
        """A dotted name the passage's YAML spells as nesting: ``theme.palette.primary``
        for ``theme:`` / ``palette:`` / ``primary: indigo`` (list items aside)."""
        keys = tuple(value.split("."))
        if self._paths is None:
            self._paths = [
                tuple(k.casefold() for k in path if k != "-") for path in yaml_key_paths(self.raw)
            ]
        n = len(keys)
        return any(
            path[i : i + n] == keys for path in self._paths for i in range(len(path) - n + 1)
        )

    def _has_word(self, value: str) -> bool:
        pattern = r"(?<![a-z0-9_-])" + re.escape(value) + r"(?![a-z0-9_-])"
        return re.search(pattern, self.text) is not None


_YAML_KEY = re.compile(
    r"^(?P<indent>[ \t]*)(?P<dash>(?:-[ \t]+)*)(?P<key>[A-Za-z_][\w.-]*|\"[^\"\n]+\"|'[^'\n]+')"
    r"[ \t]*:(?:[ \t]|$)"
)
_YAML_ITEM = re.compile(r"^(?P<indent>[ \t]*)-[ \t]+\S")


def yaml_key_paths(text: str) -> list[tuple[str, ...]]:
    """The key path of every ``key:`` line of YAML-looking text, by indentation; a list
    item is a ``"-"`` component (``theme:`` / ``palette:`` / ``- scheme: slate`` gives
    ``("theme", "palette", "-", "scheme")``). Tolerant: prose lines are skipped."""
    stack: list[tuple[int, str]] = []  # (column, component)
    out: list[tuple[str, ...]] = []
    for line in text.split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _YAML_KEY.match(line)
        if m is None:
            item = _YAML_ITEM.match(line)
            if item is not None:
                column = len(item.group("indent"))
                while stack and stack[-1][0] >= column:
                    stack.pop()
            continue
        column = len(m.group("indent"))
        while stack and stack[-1][0] >= column:
            stack.pop()
        for dash in re.finditer(r"-[ \t]+", m.group("dash")):
            stack.append((column + dash.start(), "-"))
        key = m.group("key").strip("\"'")
        out.append((*(c for _, c in stack), key))
        stack.append((column + len(m.group("dash")), key))
    return out
