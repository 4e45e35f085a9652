"""A section as the units a quote is made of, and the quote's items.

The index keeps a section's complete visible text, one line per paragraph,
list item or table row (a code block's lines as they are), and its chunks
with their type (``text``, ``list``, ``table``, ``code``, ``admonition``) and
offsets into that text. :func:`section_units` turns a section into *units*:

- ``row``: one table row (a line of a ``table`` chunk), with its ``header``;
- ``header``: a table's header row (the first line of a table);
- ``code``: a run of code lines — every line of a ``code`` chunk, and in other
  chunks (small code blocks are merged into the prose around them) the lines
  that only code has: leading indentation or a double space (prose lines are
  whitespace-normalised), a prompt (``$``, ``>>>``), a comment line, an
  assignment or a call, a ``key: value`` line, or a line with as many symbols
  as a line of code has;
- ``prose``: everything else (a paragraph or a list item).

:func:`render` makes answer items of a window of units: prose as it is (a line
of a ``list`` chunk as a list item, ``- …``), a code run as one fenced block with
its language (the index's, else guessed from its lines), and the rows of a table
as one Markdown table item under the table's header (``| option | default |``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Unit", "guess_language", "looks_like_code", "render", "section_units"]

UnitKind = Literal["prose", "code", "row", "header"]


@dataclass
class Unit:
    """One quotable piece of a section: ``section_text[start:end]``."""

    kind: UnitKind
    start: int
    end: int
    text: str
    header: str = ""  # a row's table header line
    index: int = 0  # position in the section
    language: str = ""  # a code unit's fence language, as the index recorded it
    terms: frozenset[str] = field(default_factory=frozenset)
    item: bool = False  # a prose unit that is a list item (a line of a ``list`` chunk)

    @property
    def lead_in(self) -> bool:
        """A line that introduces what follows ("Run this:")."""
        return self.kind == "prose" and self.text.rstrip().endswith((":", "："))


_PROMPT = re.compile(r"^(?:\$ |>>> |\.\.\. |# |// |-- |#!|%\s)")
_ASSIGN_OR_CALL = re.compile(
    r"^[\w.\[\]'\"]+\s*(?:[-+*/|]?=)\s*\S|^[\w.]+\([^)]*\)?[,;]?$|^(?:await|return|yield) \S|"
    r"^(?:import|from|def|class|async def|with|for|while|if|elif|else|try|except|"
    r"finally)\b[^.!?]*:?$|^(?:const|let|var|function|export|fn|pub|func)\s"
)
_KEY_VALUE = re.compile(r"^-?\s*[\"']?[\w.-]+[\"']?\s*[:=]\s*(?:\S.{0,60})?$")
_BRACKETS = re.compile(r"^[\[\]{}()<>]+[,;]?$|[{;]$|^[}\])]")
_RULE = re.compile(r"^(?:-{3,}|\+{3,}|={3,}|\.{3})$")
_SYMBOLS = frozenset("{}[]()<>=;$|\\/`\"'#*&%@^~_")
_TERMINAL = (".", "!", "?", "。", "！", "？", "…")
_COMMANDS = re.compile(
    r"^(?:pipx?3?|npm|npx|yarn|pnpm|git|docker|python3?|mkdocs|brew|apt|apt-get|yum|dnf"
    r"|conda|uv|poetry|cargo|go|make|curl|wget|sudo|kubectl|httpx|anchored|export|cd)\s"
)


def looks_like_code(line: str) -> bool:
    """True for a line only code has (see the module docstring)."""
    return _code_evidence(line) > 0


def _code_evidence(line: str) -> int:
    """2: only code looks like this; 1: code or a label ("default: false"); 0: prose."""
    if not line.strip():
        return 0
    if line[0].isspace() or "  " in line.strip() or "\t" in line:
        return 2
    body = line.strip()
    words = body.split()
    if _PROMPT.match(body) or _BRACKETS.search(body):
        return 2
    if _RULE.match(body):
        return 1  # "---" opens YAML front matter (or is a rule)
    if body.endswith(_TERMINAL) and len(words) >= 5:
        return 0
    if _ASSIGN_OR_CALL.match(body) or (_COMMANDS.match(body) and len(words) <= 12):
        return 2
    if _KEY_VALUE.match(body) and len(words) <= 4 and not body.endswith((".", "?")):
        return 1
    visible = [ch for ch in body if not ch.isspace()]
    return 1 if sum(ch in _SYMBOLS for ch in visible) / len(visible) > 0.25 else 0


def section_units(
    text: str,
    chunks: Sequence[Mapping[str, Any]],
    code: Sequence[Sequence[Any]] | None = None,
) -> list[Unit]:
    """The units of a section's ``text`` given its ``chunks`` (type, offsets, header).

    ``code``: the section's code blocks as the index records them (``meta.code``:
    ``[start, end, language]``); with it, exactly the lines of those blocks are code
    (one unit per block, with its language); without it (an index built before the
    field), code lines are recognised by their look (see the module docstring).
    """
    if code is not None:
        return _units_from_blocks(text, chunks, code)
    kinds: list[tuple[int, int, str, str]] = sorted(
        (int(c["offsets"][0]), int(c["offsets"][1]), str(c["type"]), str(c.get("header") or ""))
        for c in chunks
    )
    lines: list[tuple[int, int, str]] = []
    offset = 0
    for line in text.split("\n"):
        if line.strip():
            lines.append((offset, offset + len(line), line))
        offset += len(line) + 1
    evidence = [_code_evidence(line) for _, _, line in lines]
    units: list[Unit] = []
    k = 0
    table_header = ""
    prev_type = ""
    for n, (start, end, line) in enumerate(lines):
        while k + 1 < len(kinds) and kinds[k][1] <= start:
            k += 1
        ctype, cheader = ("text", "")
        if kinds and kinds[k][0] <= start < max(kinds[k][1], kinds[k][0] + 1):
            ctype, cheader = kinds[k][2], kinds[k][3]
        if ctype == "table":
            if cheader:
                table_header = cheader
            elif prev_type != "table" or not table_header:
                table_header = line.strip()
                units.append(Unit("header", start, end, line.strip()))
                prev_type = ctype
                continue
            units.append(Unit("row", start, end, line.strip(), header=table_header))
        elif (ctype == "code" and not _sentence(line)) or _is_code(evidence, n):
            # Prose lines are joined by one newline; a blank line is inside a code block.
            if units and units[-1].kind == "code" and not text[units[-1].end : start].strip():
                last = units[-1]
                last.end, last.text = end, text[last.start : end]
            else:
                units.append(Unit("code", start, end, line))
        else:
            units.append(Unit("prose", start, end, line.strip(), item=ctype == "list"))
        prev_type = ctype
    _bare_keys_open_code(units, text)
    for i, u in enumerate(units):
        u.index = i
    return units


def _units_from_blocks(
    text: str, chunks: Sequence[Mapping[str, Any]], code: Sequence[Sequence[Any]]
) -> list[Unit]:
    """Units of a section whose code blocks are known: each block one code unit, the
    rest as :func:`section_units` reads it without code (prose, table rows)."""
    units: list[Unit] = []
    pos = 0
    for start, end, language in sorted((int(c[0]), int(c[1]), str(c[2])) for c in code):
        if start < pos or end > len(text) or start >= end:
            continue  # not a block of this text
        units += _units_without_code(text, pos, start, chunks)
        units.append(Unit("code", start, end, text[start:end], language=language))
        pos = end
    units += _units_without_code(text, pos, len(text), chunks)
    for i, u in enumerate(units):
        u.index = i
    return units


def _units_without_code(
    text: str, lo: int, hi: int, chunks: Sequence[Mapping[str, Any]]
) -> list[Unit]:
    """The prose, rows and table headers of ``text[lo:hi]`` (offsets kept)."""
    kinds = sorted(
        (int(c["offsets"][0]), int(c["offsets"][1]), str(c.get("header") or ""))
        for c in chunks
        if c["type"] == "table"
    )
    lists = [(int(c["offsets"][0]), int(c["offsets"][1])) for c in chunks if c["type"] == "list"]
    units: list[Unit] = []
    offset = lo
    table_header, in_table = "", False
    for line in text[lo:hi].split("\n"):
        start, end = offset, offset + len(line)
        offset = end + 1
        if not line.strip():
            continue
        table = next((k for k in kinds if k[0] <= start < max(k[1], k[0] + 1)), None)
        if table is None:
            in_table = False
            item = any(a <= start < b for a, b in lists)
            units.append(Unit("prose", start, end, line.strip(), item=item))
            continue
        if table[2]:
            table_header = table[2]
        elif not in_table or not table_header:
            table_header, in_table = line.strip(), True
            units.append(Unit("header", start, end, line.strip()))
            continue
        in_table = True
        units.append(Unit("row", start, end, line.strip(), header=table_header))
    return units


def _sentence(line: str) -> bool:
    """A prose sentence (a chunk typed ``code`` may still hold the line introducing it)."""
    body = line.strip()
    return (
        not line[:1].isspace()
        and _code_evidence(line) == 0
        and len(body.split()) >= 5
        and body.endswith((*_TERMINAL, ":", "："))
    )


def _is_code(evidence: list[int], n: int) -> bool:
    """Code-only lines are code; a maybe-code line only next to another code line."""
    if evidence[n] == 2:
        return True
    return evidence[n] == 1 and any(
        0 <= m < len(evidence) and evidence[m] > 0 for m in (n - 1, n + 1)
    )


def _bare_keys_open_code(units: list[Unit], text: str) -> None:
    """``plugins:`` before indented code is the code's first line, not prose."""
    i = 0
    while i + 1 < len(units):
        u, nxt = units[i], units[i + 1]
        if (
            u.kind == "prose"
            and nxt.kind == "code"
            and re.fullmatch(r"[\w.\-\"']+:", u.text)
            and nxt.start == u.end + 1
        ):
            nxt.start, nxt.text = u.start, text[u.start : nxt.end]
            del units[i]
            continue
        i += 1


def guess_language(code: str) -> str:
    """The fence language of a code block, guessed from its lines ("text" when unsure)."""
    lines = [line for line in code.split("\n") if line.strip()]
    if not lines:
        return "text"
    first = lines[0].strip()
    if first.startswith("$ ") or (_COMMANDS.match(first) and not first.startswith("python3 -c")):
        return "bash"
    if first.startswith(("{", "[{", '["')) and code.rstrip().endswith(("}", "]")):
        return "json"
    py = sum(
        bool(
            re.match(r"\s*(?:>>> |\.\.\. |import |from \S+ import |def |class |async |await )", x)
            # a call, before any trailing comment ("x = f()  # why"): TOML has no calls
            or re.search(r"\w\(.*\)\s*$", re.sub(r"\s+#.*$", "", x))
        )
        for x in lines
    )
    keys = sum(bool(re.match(r"\s*-?\s*[\w.-]+:(?:\s|$)", x)) for x in lines)
    items = sum(bool(re.match(r"\s*- \S", x)) for x in lines)
    toml = sum(bool(re.match(r"\s*\[[\w.\"-]+\]\s*$|\s*[\w.-]+\s*=\s*\S", x)) for x in lines)
    if py >= max(1, len(lines) // 3):
        return "python"
    if keys + items >= max(1, len(lines) // 2):
        return "yaml"
    if toml >= max(1, len(lines) // 2):
        return "toml"
    return "text"


def render(window: Sequence[Unit]) -> list[str]:
    """The answer items of a window of units (see the module docstring)."""
    items: list[str] = []
    rows: list[Unit] = []  # the rows of the table being read
    title = ""  # a code block's title (its file name), the line above it
    for k, u in enumerate(window):
        if rows and (u.kind != "row" or u.header != rows[-1].header):
            items += _table(rows)
            rows = []
        following = window[k + 1] if k + 1 < len(window) else None
        if u.kind == "row":
            rows.append(u)
        elif u.kind == "code":
            body = _dedent(u.text)
            fence = "````" if "```" in body else "```"
            info = u.language or guess_language(body)
            info += f' title="{title}"' if title else ""
            items.append(f"{fence}{info}\n{body}\n{fence}")
        elif u.kind == "prose":
            if following is not None and following.kind == "code" and _FILE_TITLE.fullmatch(u.text):
                title = u.text  # "mkdocs.yml" above its block: the block's caption
                continue
            items.append(f"- {u.text}" if u.item else u.text)
        title = ""
    return items + (_table(rows) if rows else [])


#: A code block's title as themes show it above the block: a file name or path.
_FILE_TITLE = re.compile(r"[\w.~-]*(?:/[\w.~-]+)*\.[A-Za-z0-9]{1,8}|[\w.~-]+(?:/[\w.~-]+)+")


def _cells(line: str) -> list[str]:
    return [c.strip().replace("|", "\\|") for c in line.split(" | ")]


def _table(rows: Sequence[Unit]) -> list[str]:
    """Rows of one table as one Markdown table item, under their header; rows whose
    cells do not line up with the header stay lines of text."""
    names = _cells(rows[0].header) if rows[0].header else []
    fit = [r for r in rows if names and len(_cells(r.text)) == len(names)]
    if not fit:
        return [r.text for r in rows]
    lines = [
        "| " + " | ".join(names) + " |",
        "|" + "---|" * len(names),
        *("| " + " | ".join(_cells(r.text)) + " |" for r in fit),
    ]
    return ["\n".join(lines)] + [r.text for r in rows if r not in fit]


def _dedent(code: str) -> str:
    lines = code.split("\n")
    indents = [len(x) - len(x.lstrip()) for x in lines if x.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(x[cut:] for x in lines).strip("\n")
