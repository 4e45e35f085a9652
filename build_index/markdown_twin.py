"""A page's Markdown twin: the rendered page's content as Markdown, for agents and llms.txt.

Read from the same content root as the index (``html.content_root``: the page's
own content, navigation, scripts, hidden and ``data-search-exclude`` elements
already removed), so a twin holds what the index holds, with its structure:

* headings with the id the built page carries: ``## Title {#anchor}`` (the
  attribute form of Python-Markdown's ``attr_list``, Pandoc and kramdown); a
  heading without a usable id is written without one; a heading marked
  ``data-search-exclude`` drops its section, as the index does. A page whose
  content does not start with an ``<h1>`` gets ``# <page title>`` first;
* code blocks as fences (longer than any backtick run inside) with the language
  the HTML declares (``html.code_language``: ``language-X``, ``highlight-X``);
* tables as Markdown tables (a table without a header row gets its first row as
  the header; ``|`` in a cell is escaped);
* admonitions and ``<details>`` as a block quote whose first line is the title
  in bold: ``> **Note: Title**`` (``> **Note**`` when the title is the kind);
* content tabs (``pymdownx.tabbed``) as each tab's label in bold, then its content;
* lists as lists (nested, numbered from the ``<ol start>``, task items ``[x]``),
  inline code as code spans, emphasis, images, and links made absolute to the
  site (``SiteLinks``): a link to another page goes to that page's twin; a link
  of another scheme than http(s), mailto or ftp (``javascript:``, ``data:``) is
  written as its text only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

from selectolax.lexbor import LexborNode

from .html import classes, code_language, code_text, content_root, heading_anchor, normalise
from .llmstxt import twin_url
from .types import PageInput

__all__ = ["SiteLinks", "Twin", "page_markdown"]

_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_INLINE_TAGS = (
    "a abbr acronym b bdi bdo big cite code data del dfn em font i img input ins kbd "
    "mark q s samp small span strike strong sub sup time tt u var wbr br label"
)
_INLINE = frozenset(_INLINE_TAGS.split())
_STRONG = frozenset({"strong", "b"})
_EMPHASIS = frozenset({"em", "i", "cite", "dfn", "var"})
_STRIKE = frozenset({"del", "s", "strike"})
_MAX_DEPTH = 150  # deeper nesting is written as plain text
_SUMMARY_CHARS = 200
_BREAK = "\x00"  # a <br> inside a paragraph, until the paragraph is assembled
_ESCAPE = re.compile(r"([\\`*\[\]<])")
_LINE_START = re.compile(r"^(?:[#>+=|-]|\d+[.)](?:\s|$))")
_WORD_UNDERSCORE = re.compile(r"(?<![\w\\])_|_(?!\w)")
_BACKTICKS = re.compile(r"`+")
_SPACE = re.compile(r"[ \t\r\n\f]+")
_SCHEMES = frozenset({"http", "https", "mailto", "ftp"})  # links a twin keeps


class SiteLinks:
    """Turns a page's ``href``/``src`` values into URLs absolute to the site.

    ``base`` is where the site root is published: ``site_url`` (``https://h/docs/``)
    or, when that is unknown, ``/`` — a root-relative URL. ``pages`` are the page
    URLs that have a twin: a link to one (``foo/``, ``foo/index.html``) goes to the
    twin (``foo/index.md``), its fragment kept (the twin carries the anchor).
    """

    def __init__(self, base: str, pages: set[str] | frozenset[str] = frozenset()) -> None:
        self.base = base if base.endswith("/") else base + "/"
        self.pages = pages

    def page(self, page_url: str) -> str:
        """The absolute URL of a page's twin (its HTML when it has none)."""
        return self.base + (twin_url(page_url) if page_url in self.pages else page_url)

    def resolve(self, page_url: str, href: str) -> str:
        href = href.strip()
        if not href:
            return ""
        parts = urlsplit(href)
        if parts.scheme and parts.scheme.lower() not in _SCHEMES:
            return ""  # javascript:, data:, file: ...: the link's text only
        if parts.scheme or parts.netloc:
            return href  # another site, mailto:
        joined = urlsplit(urljoin("http://site.invalid/" + page_url, href))
        path = joined.path.lstrip("/")
        if path.endswith("/index.html") or path == "index.html":
            path = path[: -len("index.html")]
        if path not in self.pages and path + "/" in self.pages:
            path += "/"  # a directory URL written without its slash
        if path in self.pages:
            path = twin_url(path)
        return self.base + urlunsplit(("", "", path, joined.query, joined.fragment))


@dataclass(frozen=True)
class Twin:
    """A page as Markdown, and its one-line summary (the first paragraph, shortened)."""

    markdown: str
    summary: str


def page_markdown(page: PageInput, links: SiteLinks) -> Twin:
    """The Markdown twin of one rendered page (``PageError`` if it is not HTML)."""
    root = content_root(page)
    writer = _Writer(page, links)
    blocks = writer.blocks(root, 0) if root is not None else []
    if page.title and not (blocks and blocks[0].startswith("# ")):
        blocks.insert(0, "# " + _escape_line(_escape(page.title)))
    text = "\n\n".join(block for block in blocks if block.strip())
    return Twin(markdown=text.strip("\n") + "\n", summary=_summary(writer.first_paragraph))


def _summary(text: str) -> str:
    if len(text) <= _SUMMARY_CHARS:
        return text
    cut = text[:_SUMMARY_CHARS].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


def _escape(text: str) -> str:
    """Text that Markdown reads back as the same text (the marks that would change it)."""
    return _WORD_UNDERSCORE.sub(r"\\_", _ESCAPE.sub(r"\\\1", text))


def _escape_line(text: str) -> str:
    """A paragraph or heading text that must not start a block of another kind."""
    return "\\" + text if _LINE_START.match(text) else text


def _code_span(text: str) -> str:
    text = " ".join(text.split("\n"))
    if not text.strip():
        return ""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _fence(code: str, language: str) -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{code}\n{fence}"


def _indent(block: str, first: str, rest: str) -> str:
    lines = block.split("\n")
    out = [first + lines[0]]
    out += [(rest + line) if line else rest.rstrip() for line in lines[1:]]
    return "\n".join(out)


def _quote(blocks: list[str]) -> str:
    return "\n>\n".join(_indent(block, "> ", "> ") for block in blocks if block)


class _Writer:
    """Depth-first walk of the content root, writing Markdown blocks."""

    def __init__(self, page: PageInput, links: SiteLinks) -> None:
        self.page = page
        self.links = links
        self.skipping = False  # inside a section whose heading is data-search-exclude
        self.first_paragraph = ""
        self.seen_anchors: set[str] = set()

    # -- blocks ---------------------------------------------------------------------

    def blocks(self, node: LexborNode, depth: int) -> list[str]:
        """The Markdown blocks of ``node``'s children, in order."""
        out: list[str] = []
        inline: list[str] = []

        def flush() -> None:
            if inline:
                self._paragraph(out, "".join(inline))
                inline.clear()

        for child in node.iter(include_text=True):
            if child.is_text_node:
                inline.append(_escape(_SPACE.sub(" ", child.text_content or "")))
                continue
            if not child.is_element_node:
                continue
            tag = child.tag or ""
            if tag in _INLINE:
                inline.append(self._inline_element(child, depth + 1, True))
                continue
            flush()
            if depth >= _MAX_DEPTH:
                self._paragraph(out, _escape(normalise(child.text(deep=True))))
            else:
                self._block(child, tag, out, depth + 1)
        flush()
        return out

    def _keep(self, out: list[str], block: str) -> None:
        if block and not self.skipping:
            out.append(block)

    def _paragraph(self, out: list[str], text: str) -> None:
        text = _SPACE.sub(" ", text).replace(_BREAK, "\\\n").strip()
        text = text.strip("\\\n ").strip()
        if text:
            self._keep(out, _escape_line(text))

    def _block(self, node: LexborNode, tag: str, out: list[str], depth: int) -> None:
        names = classes(node)
        if tag in _HEADINGS:
            self._heading(node, tag, out, depth)
        elif tag == "pre":
            self._code(node, out)
        elif tag == "table":
            if "highlighttable" in names:  # Pygments' line-number table: its code only
                for pre in node.css("pre"):
                    self._code(pre, out)
            else:
                self._keep(out, self._table(node, depth))
        elif tag in ("ul", "ol", "menu"):
            self._keep(out, self._list(node, tag, depth))
        elif tag == "dl":
            self._definitions(node, out, depth)
        elif tag == "blockquote":
            self._keep(out, _quote(self.blocks(node, depth)))
        elif tag == "hr":
            self._keep(out, "---")
        elif tag == "details" or "admonition" in names:
            self._admonition(node, tag, names, out, depth)
        elif "tabbed-set" in names:
            self._tabs(node, out, depth)
        else:
            if tag == "p" and not self.first_paragraph and not self.skipping:
                self.first_paragraph = normalise(node.text(deep=True))
            out.extend(self.blocks(node, depth))

    def _heading(self, node: LexborNode, tag: str, out: list[str], depth: int) -> None:
        anchor = heading_anchor(node)
        attribute = ""
        if anchor and anchor not in self.seen_anchors:
            # A heading that can be linked to starts a section, as in the index (html.py):
            # one marked data-search-exclude drops it; one without an id starts none.
            self.seen_anchors.add(anchor)
            attribute = f" {{#{anchor}}}"
            self.skipping = "data-search-exclude" in node.attributes
        title = _SPACE.sub(" ", self.inline(node, depth, links=False)).replace(_BREAK, " ")
        title = title.strip()
        if title:
            self._keep(out, "#" * int(tag[1]) + " " + _escape_line(title) + attribute)

    def _code(self, pre: LexborNode, out: list[str]) -> None:
        code = code_text(pre)
        if code.strip():
            self._keep(out, _fence(code, code_language(pre)))

    def _table(self, table: LexborNode, depth: int) -> str:
        rows: list[list[str]] = []
        header_rows = 0
        for tr in table.css("tr"):
            if not _same(_closest(tr, "table"), table):
                continue  # a row of a table inside a cell
            cells = [self._cell(cell, depth) for cell in tr.iter() if cell.tag in ("td", "th")]
            if not any(cells):
                continue
            in_head = tr.parent is not None and tr.parent.tag == "thead"
            all_th = all(cell.tag == "th" for cell in tr.iter() if cell.tag in ("td", "th"))
            if (in_head or all_th) and len(rows) == header_rows:
                header_rows += 1
            rows.append(cells)
        if not rows:
            return ""
        width = max(len(row) for row in rows)
        rows = [row + [""] * (width - len(row)) for row in rows]
        if header_rows > 1:  # Markdown tables have one header row: the others join the body
            header_rows = 1
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
        lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
        caption = table.css_first("caption")
        if caption is not None and _same(_closest(caption, "table"), table):
            text = normalise(caption.text(deep=True))
            if text:
                lines.insert(0, _escape(text) + "\n")
        return "\n".join(lines)

    def _cell(self, cell: LexborNode, depth: int) -> str:
        parts = []
        for block in self.blocks(cell, depth):
            parts.append(block.replace("\\\n", " ").replace("\n", " "))
        return " ".join(parts).replace("|", "\\|").strip()

    def _list(self, node: LexborNode, tag: str, depth: int) -> str:
        start = node.attributes.get("start") or "1"
        number = int(start) if start.strip().lstrip("-").isdigit() else 1
        items: list[str] = []
        for item in node.iter():
            if item.tag != "li":
                continue
            marker = f"{number}. " if tag == "ol" else "- "
            number += 1
            blocks = self.blocks(item, depth)
            if not blocks:
                continue
            text = blocks[0]
            for block in blocks[1:]:
                nested = block.startswith(("- ", "1. ")) or bool(re.match(r"\d+\. ", block))
                text += ("\n" if nested else "\n\n") + block
            items.append(_indent(text, marker, " " * len(marker)))
        return "\n".join(items)

    def _definitions(self, node: LexborNode, out: list[str], depth: int) -> None:
        for part in node.iter():
            if part.tag == "dt":
                self._paragraph(out, "**" + self.inline(part, depth).strip() + "**")
            elif part.tag == "dd":
                inner = self.blocks(part, depth)
                if inner:
                    self._keep(out, "\n\n".join(_indent(b, ": ", "  ") for b in inner))

    def _admonition(
        self, node: LexborNode, tag: str, names: list[str], out: list[str], depth: int
    ) -> None:
        kinds = [n for n in names if n not in ("admonition", "inline", "end", "open")]
        kind = kinds[0].replace("-", " ").capitalize() if kinds else ""
        title_node = node.css_first("summary") if tag == "details" else None
        if title_node is None:
            title_node = node.css_first(".admonition-title")
        title = ""
        if title_node is not None and _same(title_node.parent, node):
            title = _SPACE.sub(" ", self.inline(title_node, depth)).replace(_BREAK, " ").strip()
            title_node.decompose()
        if not title or (kind and title.lower() == kind.lower()):
            head = f"**{title or kind or 'Note'}**"
        elif kind:
            head = f"**{kind}: {title}**"
        else:
            head = f"**{title}**"
        self._keep(out, _quote([head, *self.blocks(node, depth)]))

    def _tabs(self, node: LexborNode, out: list[str], depth: int) -> None:
        labels = [
            label
            for label in node.css("label")
            if _same(_closest(label, "div.tabbed-set"), node)
            and "task-list-control" not in classes(label)
        ]
        panels = [
            panel
            for panel in node.css("div.tabbed-block, div.tabbed-content")
            if _same(_closest(panel, "div.tabbed-set"), node)
            and not ("tabbed-content" in classes(panel) and panel.css_first("div.tabbed-block"))
        ]
        if len(labels) != len(panels):
            out.extend(self.blocks(node, depth))
            return
        for label, panel in zip(labels, panels, strict=True):
            self._paragraph(out, "**" + self.inline(label, depth).strip() + "**")
            out.extend(self.blocks(panel, depth))

    # -- inline ---------------------------------------------------------------------

    def inline(self, node: LexborNode, depth: int, *, links: bool = True) -> str:
        """The Markdown of ``node``'s children as one line of inline text."""
        parts: list[str] = []
        for child in node.iter(include_text=True):
            if child.is_text_node:
                parts.append(_escape(_SPACE.sub(" ", child.text_content or "")))
            elif child.is_element_node:
                parts.append(self._inline_element(child, depth + 1, links))
        return "".join(parts)

    def _inline_element(self, node: LexborNode, depth: int, links: bool) -> str:
        tag = node.tag or ""
        if depth >= _MAX_DEPTH:
            return _escape(normalise(node.text(deep=True)))
        if tag == "code":
            return _code_span(node.text(deep=True))
        if tag == "br":
            return _BREAK
        if tag == "img":
            src = self.links.resolve(self.page.url, node.attributes.get("src") or "")
            alt = _escape(normalise(node.attributes.get("alt") or ""))
            return f"![{alt}]({_link_target(src)})" if src and links else alt
        if tag == "input":
            if (node.attributes.get("type") or "").lower() == "checkbox":
                return "[x] " if "checked" in node.attributes else "[ ] "
            return ""
        inner = self.inline(node, depth, links=links)
        if tag == "a":
            href = node.attributes.get("href")
            text = inner.strip()
            if not links or href is None or not text:
                return inner
            target = self.links.resolve(self.page.url, href)
            return _wrap(inner, "[", f"]({_link_target(target)})") if target else inner
        if tag in _STRONG:
            return _wrap(inner, "**", "**")
        if tag in _EMPHASIS:
            return _wrap(inner, "*", "*")
        if tag in _STRIKE:
            return _wrap(inner, "~~", "~~")
        return inner


def _wrap(inner: str, left: str, right: str) -> str:
    """``inner`` between two marks, its outer spaces kept outside them."""
    text = inner.strip()
    if not text:
        return inner
    lead = " " if inner[:1].isspace() else ""
    trail = " " if inner[-1:].isspace() else ""
    return f"{lead}{left}{text}{right}{trail}"


def _link_target(url: str) -> str:
    """A URL as a Markdown link destination (spaces and parentheses encoded)."""
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def _same(a: LexborNode | None, b: LexborNode) -> bool:
    return a is not None and a.mem_id == b.mem_id


def _closest(node: LexborNode, selector: str) -> LexborNode | None:
    """The nearest ancestor (not ``node`` itself) matching a tag or ``tag.class``."""
    tag, _, name = selector.partition(".")
    parent = node.parent
    while parent is not None:
        if parent.tag == tag and (not name or name in classes(parent)):
            return parent
        parent = parent.parent
    return None
