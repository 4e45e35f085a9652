"""Rendered HTML -> sections: the visible text between one heading and the next.

Like MkDocs' own search plugin we read the *rendered* HTML, so every anchor is
an id the built page really carries (toc slugs, ``{#custom}`` ids, ``_1``
suffixes, Unicode ids, old ``<a name>`` anchors inside headings).

Only the main content is read: Material's ``article.md-content__inner``, the
MkDocs theme's ``[role=main]``, else ``<main>``, a single ``<article>``, else
``<body>``. A fragment (MkDocs' ``page.content``) is read whole. Navigation,
scripts, hidden elements (``hidden``, ``aria-hidden="true"``,
``display:none``), permalink anchors (``¶``), code line numbers, Material's
source-file footer and ``data-search-exclude`` elements are dropped; a heading
marked ``data-search-exclude`` drops its whole section (as Material does).

Section text is made of blocks joined by ``"\\n"`` in DOM order: a paragraph
is one line, every list item / admonition title / table row is its own line,
table cells are joined by ``" | "``, code keeps its own newlines. Nothing is
invented: apart from those separators and whitespace runs collapsed to one
space, the text is the page's DOM text in DOM order, so the widget finds a
passage on the live page by comparing text with whitespace and ``|`` removed
(``plugin/assets/text.js``). The elements dropped here (hidden ones, excluded
ones) stay in the live DOM; a passage never spans one unless it sat between
two blocks of the same chunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

from .html_guard import MAX_PAGE_CHARS, check_html, page_name
from .types import ChunkType, PageInput, Section

__all__ = [
    "MAX_PAGE_CHARS",
    "Block",
    "classes",
    "code_language",
    "code_text",
    "content_root",
    "extract_section_blocks",
    "extract_sections",
    "heading_anchor",
    "normalise",
    "page_name",
]


@dataclass(frozen=True)
class Block:
    """One block of a section: ``section.text[start:end]``, lines split on ``"\\n"``.

    For a table, ``section.text[start:header_end]`` is its header row(s)
    (``header_end == start`` when the table has no header); every other line is
    one body row.
    """

    type: ChunkType
    start: int
    end: int
    header_end: int = 0


_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# Elements whose text flows inside a line (everything else ends a line).
_INLINE_TAGS = (
    "a abbr acronym b bdi bdo big cite code data del dfn em font i img ins kbd mark "
    "q rp rt ruby s samp small span strike strong sub sup time tt u var wbr"
)
_INLINE = frozenset(_INLINE_TAGS.split())
_LISTS = frozenset({"ul", "ol", "dl", "menu"})
# Leaf blocks read as one text block (their nested elements become lines of it).
_TEXT_BLOCKS = frozenset(
    {"p", "address", "caption", "figcaption", "dt", "dd", "li", "summary", "legend"}
)
# Never content, wherever they appear inside the content root.
_DROP = (
    "script, style, noscript, template, svg, canvas, iframe, object, nav, footer, "
    "button, select, textarea, aside:not([class*='footnote']), "
    ".headerlink, .md-source-file, .md-feedback, .md-content__button, .linenos, .linenodiv, "
    "[hidden], [aria-hidden='true'], [style*='display:none' i], [style*='display: none' i], "
    "[data-search-exclude]:not(h1, h2, h3, h4, h5, h6), "
    # Text a reader does not see: a closed <dialog>, ruby readings (<rt>, and the
    # fallback parentheses <rp>), a formula's source (MathML <annotation>).
    "dialog:not([open]), rt, rp, annotation, annotation-xml"
)
_ROOTS = ("article.md-content__inner", "[role='main']", "main")
_FULL_DOCUMENT = re.compile(r"<(?:!doctype|html|head|body)\b", re.IGNORECASE)
# Zero-width characters (and the soft hyphen) hide inside words ("Ig\u200bnore"): not
# shown, never indexed, so a phrase cannot be split past a reader or a filter.
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
_CONTROL = re.compile(f"[\\x00-\\x08\\x0e-\\x1f\\x7f{_INVISIBLE}]")
_CODE_CONTROL = re.compile(f"[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f{_INVISIBLE}]")
_PERMALINK_TEXT = re.compile(r"[^\w]{0,2}")

# Deeper DOM nesting is read flat (text only) instead of recursing.
_MAX_DEPTH = 200
_MAX_TITLE = 200  # characters of a heading kept in titles and heading paths


def extract_sections(page: PageInput) -> list[Section]:
    """Split a rendered page into sections at its h1–h6 headings.

    Every heading with an id starts a section (anchor = that id); text above
    the first one forms the section with anchor ``""``. A heading without a
    usable id (none, or one already used on the page) cannot be linked to, so
    its text stays a line of the current section. Sections with no text (a
    heading followed directly by another) are left out. ``Section.text`` is
    complete, never truncated, so chunk offsets into it always hold: the query
    side cuts a long parent to its own budget (``chunking.parent_window``).
    Raises ``PageError`` (naming the page) for input that is not HTML at all.
    """
    return [section for section, _ in extract_section_blocks(page)]


def extract_section_blocks(page: PageInput) -> list[tuple[Section, list[Block]]]:
    """Like ``extract_sections``, with the blocks each section's text is made of."""
    root = content_root(page)
    if root is None:
        return []
    builder = _Builder(page)
    _Walker(builder).walk(root, in_block=False, depth=0)
    return builder.finish()


def content_root(page: PageInput) -> LexborNode | None:
    """The element holding the page's readable content, non-content already removed.

    The one reading of a page that the index (``extract_section_blocks``) and the
    Markdown twin (``markdown_twin.page_markdown``) share; ``None`` for an empty page.
    Raises ``PageError`` (naming the page) for input that is not HTML at all.
    """
    html = check_html(page)
    if not html.strip():
        return None
    full_document = bool(_FULL_DOCUMENT.search(html, 0, 4096))
    # A fragment is body content. Parsed bare, a leading <noscript> would open in
    # <head>, and lexbor (scripting off) would then move its text into the body.
    tree = LexborHTMLParser(html if full_document else "<body>" + html)
    root = _content_root(tree, full_document=full_document)
    if root is not None:
        _drop_non_content(root)
    return root


def _content_root(tree: LexborHTMLParser, *, full_document: bool) -> LexborNode | None:
    """The element holding the page's own content."""
    body = tree.body
    if not full_document:
        return body
    for selector in _ROOTS:
        node = tree.css_first(selector)
        if node is not None:
            return node
    articles = tree.css("article")
    if len(articles) == 1:
        return articles[0]
    if body is not None:
        # No content element: strip the page chrome around it instead.
        for node in reversed(body.css("header")):
            node.decompose()
    return body


def _drop_non_content(root: LexborNode) -> None:
    """Remove everything that is not readable content, in place."""
    # Descendants come after their ancestors in document order: free them first.
    for node in reversed(root.css(_DROP)):
        node.decompose()
    permalinks = root.css(", ".join(f"h{n} a[href^='#']" for n in range(1, 7)))
    for node in reversed(permalinks):
        # Permalink anchors of other generators: "#", "§", "🔗", or an icon
        # (but never an old-style <a id|name> that is the heading's anchor).
        attributes = node.attributes
        if (
            "id" not in attributes
            and "name" not in attributes
            and _PERMALINK_TEXT.fullmatch(node.text().strip())
        ):
            node.decompose()


def code_language(pre: LexborNode) -> str:
    """The fence language of a ``<pre>`` block: a ``language-X`` (or ``lang-X``,
    Sphinx's ``highlight-X``) class on its ``<code>``, itself or the two elements
    around it (Python-Markdown, pymdownx.highlight, Pygments, Sphinx); ``""`` if none."""
    code = pre.css_first("code")
    nodes = [code, pre, pre.parent, pre.parent.parent if pre.parent is not None else None]
    for node in nodes:
        for name in classes(node) if node is not None else []:
            match = _LANGUAGE_CLASS.fullmatch(name.lower())
            if match and match.group(1) not in ("none", "default"):
                return match.group(1)
    return ""


_LANGUAGE_CLASS = re.compile(r"(?:language|lang|highlight)-([a-z0-9][a-z0-9_+#.-]{0,31})")


def code_text(pre: LexborNode) -> str:
    """A ``<pre>`` block's code as the page shows it (its own newlines, no control characters)."""
    return _CODE_CONTROL.sub("", pre.text(deep=True)).strip("\n")


def normalise(text: str) -> str:
    """Collapse whitespace runs to one space and drop control characters."""
    if _CONTROL.search(text):
        text = _CONTROL.sub("", text)
    return " ".join(text.split())


def classes(node: LexborNode) -> list[str]:
    value = node.attributes.get("class")
    return value.split() if value else []


def heading_anchor(node: LexborNode) -> str:
    """The id a heading can be linked by: its own, an ``<a id|name>`` inside, or its section's."""
    own = node.attributes.get("id")
    if own:
        return own
    for link in node.css("a[id], a[name]"):
        value = link.attributes.get("id") or link.attributes.get("name")
        if value:
            return value
    parent = node.parent
    if parent is not None and parent.tag in ("section", "div"):
        parent_id = parent.attributes.get("id")
        first = next(parent.iter(), None)
        if parent_id and first is not None and first.mem_id == node.mem_id:
            return parent_id  # Sphinx / docutils: <section id="x"><h2>...
    return ""


class _Builder:
    """Accumulates lines into sections and blocks, tracking text offsets."""

    def __init__(self, page: PageInput) -> None:
        self.page = page
        self.done: list[tuple[Section, list[Block]]] = []
        self.seen_anchors: set[str] = {""}
        self.path: list[tuple[int, str]] = []
        self._start_section("", page.title, [page.title] if page.title else [], 0, False)

    def _start_section(
        self, anchor: str, title: str, path: list[str], level: int, excluded: bool
    ) -> None:
        self.anchor, self.title, self.heading_path = anchor, title, path
        self.level, self.excluded = level, excluded
        self.lines: list[str] = []
        self.blocks: list[Block] = []
        self.code: list[list[int | str]] = []  # [start, end, language] of each code block
        self.pos = 0
        self.block_type: ChunkType | None = None
        self.block_start = -1
        self.header_end = 0

    def _close_section(self) -> None:
        self.close_block()
        if self.excluded or not self.lines:
            return
        url = self.page.url
        section = Section(
            id=f"{url}#{self.anchor}",
            page=url,
            anchor=self.anchor,
            title=self.title,
            heading_path=self.heading_path,
            text="\n".join(self.lines),
            meta={"level": self.level, "code": self.code},
        )
        self.done.append((section, self.blocks))

    def heading(self, level: int, anchor: str, title: str, excluded: bool) -> bool:
        """Start a section at a heading; False if it cannot be linked (no/duplicate id)."""
        if len(title) > _MAX_TITLE:
            title = title[:_MAX_TITLE].rsplit(" ", 1)[0] + "…"
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, title))
        if not anchor or anchor in self.seen_anchors:
            return False
        self.seen_anchors.add(anchor)
        block_type = self.block_type
        self._close_section()
        path = [text for _, text in self.path]
        self._start_section(anchor, title or anchor, path, level, excluded)
        if block_type is not None:
            self.open_block(block_type)  # the heading sat inside a list/admonition
        return True

    def open_block(self, block_type: ChunkType) -> None:
        self.close_block()
        self.block_type = block_type
        self.block_start = -1
        self.header_end = 0

    def close_block(self) -> None:
        if self.block_type is not None and self.block_start >= 0:
            header_end = self.header_end if self.header_end else self.block_start
            self.blocks.append(Block(self.block_type, self.block_start, self.pos, header_end))
        self.block_type = None
        self.block_start = -1

    def line(self, text: str) -> None:
        """Add one line (already normalised; code may hold newlines) to the open block."""
        if not text or self.excluded:
            return
        if self.block_type is None:
            self.open_block("text")
            self.line(text)
            self.close_block()
            return
        if self.lines:
            self.pos += 1
        if self.block_start < 0:
            self.block_start = self.pos
        self.lines.append(text)
        self.pos += len(text)

    def code_line(self, text: str, language: str) -> None:
        """Add one code block's text as a line, recording its span and fence language."""
        if not text or self.excluded:
            return
        self.line(text)
        self.code.append([self.pos - len(text), self.pos, language])

    def mark_header_end(self) -> None:
        if self.block_start >= 0:
            self.header_end = self.pos

    def finish(self) -> list[tuple[Section, list[Block]]]:
        self._close_section()
        return self.done


class _Walker:
    """Depth-first walk of the content root in DOM order, feeding the builder."""

    def __init__(self, builder: _Builder) -> None:
        self.out = builder

    def walk(self, node: LexborNode, *, in_block: bool, depth: int) -> None:
        """Walk ``node``'s children; inside a block every element becomes lines of it."""
        out = self.out
        inline: list[str] = []
        for child in node.iter(include_text=True):
            if child.is_text_node:
                inline.append(child.text_content or "")
                continue
            if not child.is_element_node:
                continue
            tag = child.tag or ""
            if tag in _INLINE:
                inline.append(child.text(deep=True))
                continue
            if inline:
                out.line(normalise("".join(inline)))
                inline = []
            if tag == "br":
                continue
            if depth >= _MAX_DEPTH:
                out.line(normalise(child.text(deep=True)))
            elif tag in _HEADINGS:
                self.heading(child, tag)
            elif tag == "pre":
                self.code(child, in_block)
            elif tag == "table" and "highlighttable" not in classes(child):
                self.table(child, in_block)
            elif in_block:
                self.walk(child, in_block=True, depth=depth + 1)
            else:
                block_type = self.block_type(child, tag)
                if block_type is None:
                    self.walk(child, in_block=False, depth=depth + 1)
                else:
                    out.open_block(block_type)
                    self.walk(child, in_block=True, depth=depth + 1)
                    out.close_block()
        if inline:
            out.line(normalise("".join(inline)))

    @staticmethod
    def block_type(node: LexborNode, tag: str) -> ChunkType | None:
        """The chunk type a top-level element starts, or None for a plain container."""
        if tag in _LISTS:
            return "list"
        if tag == "details" or any("admonition" in name for name in classes(node)):
            return "admonition"
        if tag in _TEXT_BLOCKS:
            return "text"
        return None

    def heading(self, node: LexborNode, tag: str) -> None:
        title = normalise(node.text(deep=True))
        excluded = "data-search-exclude" in node.attributes
        if not self.out.heading(int(tag[1]), heading_anchor(node), title, excluded):
            # Not linkable: its text is still visible content of the current section.
            self.out.line(title)

    def code(self, node: LexborNode, in_block: bool) -> None:
        text = code_text(node)
        if not text.strip():
            return
        language = code_language(node)
        if in_block:
            self.out.code_line(text, language)
        else:
            self.out.open_block("code")
            self.out.code_line(text, language)
            self.out.close_block()

    def table(self, node: LexborNode, in_block: bool) -> None:
        header, rows, caption = _table_rows(node)
        out = self.out
        if not in_block:
            out.line(caption)
            out.open_block("table")
        else:
            out.line(caption)
        for row in header:
            out.line(row)
        if not in_block:
            out.mark_header_end()
        for row in rows:
            out.line(row)
        if not in_block:
            out.close_block()


def _table_rows(table: LexborNode) -> tuple[list[str], list[str], str]:
    """(header rows, body rows, caption) of a table; cells joined by ``" | "``."""
    header: list[str] = []
    rows: list[str] = []
    caption = ""
    for part in table.iter():
        tag = part.tag
        if tag == "caption":
            caption = normalise(part.text(deep=True))
        elif tag == "tr":
            _add_row(part, rows, header, in_head=False)
        elif tag in ("thead", "tbody", "tfoot"):
            for tr in part.iter():
                if tr.tag == "tr":
                    _add_row(tr, rows, header, in_head=tag == "thead")
    return header, rows, caption


def _add_row(tr: LexborNode, rows: list[str], header: list[str], *, in_head: bool) -> None:
    cells: list[str] = []
    all_th = True
    for cell in tr.iter():
        if cell.tag in ("td", "th"):
            all_th = all_th and cell.tag == "th"
            cells.append(normalise(cell.text(deep=True)))
    if not any(cells):
        return
    text = " | ".join(cells).strip()
    # A first row made only of <th> is the header even without <thead>.
    if in_head or (all_th and not rows and len(header) == 0):
        header.append(text)
    else:
        rows.append(text)
