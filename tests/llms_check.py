"""Checks of llms.txt, llms-full.txt and the Markdown twins of a built site, shared by
``test_llmstxt.py`` and ``tests/bench/bench_llmstxt.py`` (which runs them on
mkdocs-llmstxt's output too).

``parse_llms_txt`` is a strict reader of the llmstxt.org format; the rest read
Markdown back (fences with their language, tables with their rows, links) and
the built HTML (what each page holds), independently of ``markdown_twin``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from build_index.html import content_root
from build_index.types import PageInput

# The reference parser's file-list item (llms_txt.core): "- [title](url): notes".
_ITEM = re.compile(r"^- \[(?P<title>[^\]]+)\]\((?P<url>[^)\s]+)\)(?::\s*(?P<notes>.*))?$")
_PREFIX = r"(?:> | |: |- |\d+\. )*"
_FENCE = re.compile(rf"^(?P<prefix>{_PREFIX})(?P<fence>`{{3,}})(?P<lang>[^`\s]*)\s*$")
# A table's delimiter row, as any GFM writer pads it: "| --- |", "|:---|", "| ----- |".
_TABLE_RULE = re.compile(rf"^(?P<prefix>{_PREFIX})\|(?: *:?-+:? *\|)+ *$")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_AUTOLINK = re.compile(r"<((?:https?://|/)[^>\s]+)>")
_CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
_LANGUAGE = re.compile(r"^language-(\S+)$")


@dataclass
class LlmsTxt:
    title: str
    summary: str
    sections: list[tuple[str, list[tuple[str, str, str]]]] = field(default_factory=list)


def parse_llms_txt(text: str) -> LlmsTxt:
    """The llmstxt.org format, strictly: an H1 (the only required part), an optional
    blockquote, optional paragraphs without headings, then H2 sections holding only
    file-list items ``- [name](url): notes``. Raises ``ValueError`` naming the line."""
    lines = text.split("\n")
    if not lines or not lines[0].startswith("# ") or not lines[0][2:].strip():
        raise ValueError("line 1: llms.txt must start with '# <name>'")
    parsed = LlmsTxt(title=lines[0][2:].strip(), summary="")
    section: list[tuple[str, str, str]] | None = None
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if line.startswith("## "):
            section = []
            parsed.sections.append((line[3:].strip(), section))
        elif line.startswith("#"):
            raise ValueError(f"line {number}: only H2 sections may follow the H1: {line!r}")
        elif section is not None:
            match = _ITEM.match(line)
            if match is None:
                raise ValueError(f"line {number}: not a file-list item: {line!r}")
            section.append((match["title"], match["url"], match["notes"] or ""))
        elif line.startswith("> "):
            if parsed.summary or parsed.sections:
                raise ValueError(f"line {number}: one blockquote, right after the H1")
            parsed.summary = line[2:].strip()
    return parsed


def _continuation(prefix: str) -> str:
    """The prefix of a block's further lines: list markers and ': ' become spaces."""
    return re.sub(r"- |: |\d+\. ", lambda m: " " * len(m.group()), prefix)


def code_blocks(markdown: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced code block, in order, at any nesting."""
    blocks: list[tuple[str, str]] = []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        i += 1
        if match is None:
            continue
        rest = _continuation(match["prefix"])
        close = rest + match["fence"]
        body: list[str] = []
        while i < len(lines) and lines[i] != close:
            line = lines[i]
            body.append(line[len(rest) :] if line.startswith(rest) else line.lstrip(" >"))
            i += 1
        i += 1
        blocks.append((match["lang"], "\n".join(body)))
    return blocks


def without_code(markdown: str, *, spans: bool = True) -> str:
    """The Markdown with fenced code and code spans removed (links there are not links);
    ``spans=False`` keeps the code spans."""
    out: list[str] = []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            out.append(_CODE_SPAN.sub("", lines[i]) if spans else lines[i])
            i += 1
            continue
        close = _continuation(match["prefix"]) + match["fence"]
        i += 1
        while i < len(lines) and lines[i] != close:
            i += 1
        i += 1
    return "\n".join(out)


def table_rows(markdown: str) -> list[int]:
    """The number of body rows of every Markdown table, in order (not those shown as
    code, inside a fence)."""
    found: list[int] = []
    lines = without_code(markdown, spans=False).split("\n")
    for i, line in enumerate(lines):
        match = _TABLE_RULE.match(line)
        if match is None or i == 0:
            continue
        rest = _continuation(match["prefix"])
        rows = 0
        for following in lines[i + 1 :]:
            if not following.startswith(rest + "|"):
                break
            rows += 1
        found.append(rows)
    return found


def links(markdown: str) -> list[str]:
    text = without_code(markdown)
    return _LINK.findall(text) + _AUTOLINK.findall(text)


def html_code_blocks(page: PageInput) -> list[tuple[str, str]]:
    """(language, code) of every non-empty ``<pre>`` of a page's content, the language
    read from the ``language-X`` class of the ``<code>``, the ``<pre>`` or its wrapper."""
    blocks: list[tuple[str, str]] = []
    for pre in _content(page, "pre"):
        code = pre.text(deep=True).strip("\n")
        if not code.strip():
            continue
        language = ""
        nodes = [pre.css_first("code"), pre, pre.parent]
        for node in nodes:
            names = (node.attributes.get("class") or "").split() if node is not None else []
            found = [m.group(1) for m in map(_LANGUAGE.match, names) if m]
            if found:
                language = found[0]
                break
        blocks.append((language, code))
    return blocks


def html_table_rows(page: PageInput) -> list[int]:
    """Body rows of every data table of a page's content (a header row not counted)."""
    found: list[int] = []
    for table in _content(page, "table"):
        if "highlighttable" in (table.attributes.get("class") or ""):
            continue
        rows = [
            tr
            for tr in table.css("tr")
            if any(
                cell.text(deep=True).strip() or cell.css_first("img") for cell in tr.css("td, th")
            )
        ]
        if rows:
            found.append(len(rows) - 1)
    return found


def _content(page: PageInput, tag: str) -> list[LexborNode]:
    """The page's ``tag`` elements in document order, without those of a section whose
    heading says ``data-search-exclude`` (left out of the index, and of the twin)."""
    root = content_root(page)
    found: list[LexborNode] = []
    excluded = False
    for node in root.css(f"h1, h2, h3, h4, h5, h6, {tag}") if root is not None else []:
        if node.tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            excluded = "data-search-exclude" in node.attributes
        elif not excluded:
            found.append(node)
    return found


def same_code(a: str, b: str) -> bool:
    return a.split() == b.split()


def target_file(site_dir: Path, base: str, url: str) -> Path | None:
    """The built file a link into the site points to (None: not a link into the site)."""
    if not url.startswith(base):
        return None
    return _built_file(site_dir, unquote(urlsplit(url[len(base) :]).path))


def _built_file(site_dir: Path, path: str) -> Path:
    """A site path as the file a static server answers with (a folder: its index.html)."""
    path = path.lstrip("/")
    if path == "" or path.endswith("/") or (site_dir / path).is_dir():
        path = path.rstrip("/") + "/index.html" if path.rstrip("/") else "index.html"
    return site_dir / path


def html_broken_targets(site_dir: Path, page: PageInput) -> set[Path]:
    """Files the page's own HTML links to that were never built (dangling in the source)."""
    tree = LexborHTMLParser(page.html)
    broken: set[Path] = set()
    for node in tree.css("a[href], img[src]"):
        value = node.attributes.get("href") or node.attributes.get("src") or ""
        parts = urlsplit(value)
        if parts.scheme or parts.netloc or not parts.path:
            continue
        path = unquote(urlsplit(urljoin("http://site.invalid/" + page.url, value)).path)
        target = _built_file(site_dir, path)
        if not target.is_file():
            broken.add(target)
    return broken
