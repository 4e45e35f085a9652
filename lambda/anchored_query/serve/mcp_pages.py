"""Whole pages for MCP clients: the ``read_page`` tool and the site's ``llms.txt`` as a
resource (issue 22).

A page is read from the Markdown twin the build wrote beside its HTML when the
function serves the built site (``anchored serve``: ``site_dir``); elsewhere (the
Lambda function, ``anchored mcp``) it is put together from the index's own sections
of the page, in page order, each under its heading. ``llms.txt`` is the build's file
when there is one, else the index's pages listed in the llmstxt.org format.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from anchored_query.engine import Engine
from anchored_query.errors import QueryError
from build_index.index_format import Index
from build_index.llmstxt import twin_path, twin_url

MAX_PAGE_CHARS = 60_000  # a page's Markdown handed to a client at most

__all__ = ["MAX_PAGE_CHARS", "llms_txt", "page_markdown", "pages_of", "site_url"]


_pages: weakref.WeakKeyDictionary[Index, dict[str, list[str]]] = weakref.WeakKeyDictionary()


def pages_of(index: Index) -> dict[str, list[str]]:
    """The index's pages (URL relative to the site) -> their section ids, in page order:
    from the ids alone (no section is parsed), once per loaded index."""
    pages = _pages.get(index)
    if pages is None:
        pages = {}
        for section_id in index.sections:
            pages.setdefault(section_id.partition("#")[0], []).append(section_id)
        _pages[index] = pages
    return pages


def _title(index: Index, ids: list[str]) -> str:
    """A page's title: its first section's."""
    return str(index.sections[ids[0]].get("title", "")) if ids else ""


def _page_key(engine: Engine, index: Index, wanted: str) -> str:
    """The page ``wanted`` names: its URL (relative or absolute, a twin's ``.md`` URL
    too) or its title (case aside)."""
    pages = pages_of(index)
    site = site_url(engine)
    ref = wanted.strip()
    if site and ref.startswith(site):
        ref = ref[len(site) :]
    ref = ref.split("#", 1)[0].split("?", 1)[0].lstrip("/")
    for suffix, replacement in (("index.md", ""), (".md", "/"), ("index.html", "")):
        if ref.endswith(suffix):
            candidate = ref[: -len(suffix)] + replacement
            if candidate in pages:
                return candidate
    for candidate in (ref, ref + "/" if ref and not ref.endswith("/") else ref):
        if candidate in pages:
            return candidate
    folded = wanted.strip().casefold()
    for page, ids in pages.items():
        if _title(index, ids).strip().casefold() == folded:
            return page
    raise QueryError(
        404,
        "unknown_page",
        f"no page {wanted!r}; give a page's URL or title (search_docs returns them)",
    )


def site_url(engine: Engine) -> str:
    """The published site's root URL (with a trailing slash), ``""`` when unknown or
    while no index is loaded (this loads none)."""
    loaded = engine._loaded
    site = loaded.index.manifest.get("site_url") if loaded else None
    return site.rstrip("/") + "/" if isinstance(site, str) and site.startswith("http") else ""


def page_markdown(engine: Engine, wanted: str, site_dir: Path | None = None) -> dict[str, Any]:
    """The page ``wanted`` names as Markdown: ``page``, ``title``, ``url``, ``markdown``,
    ``source`` (``twin`` or ``index``) and ``truncated``."""
    index = engine.current().index
    page = _page_key(engine, index, wanted)
    sections = [index.sections[sid] for sid in pages_of(index)[page]]
    title = str(sections[0].get("title", "")) if sections else page
    text, source = None, "index"
    twin = twin_path(page)
    if site_dir is not None:
        path = (site_dir / twin).resolve()
        if path.is_file() and site_dir.resolve() in path.parents:
            text, source = path.read_text(encoding="utf-8"), "twin"
    if text is None:
        text = _from_sections(sections)
    cut = len(text) > MAX_PAGE_CHARS
    site = site_url(engine)
    return {
        "page": page,
        "title": title,
        "url": urljoin(site, page) if site else page,
        "markdown": text[:MAX_PAGE_CHARS] if cut else text,
        "source": source,
        "truncated": cut,
    }


def _from_sections(sections: list[dict[str, Any]]) -> str:
    """A page's Markdown put together from its sections: each under its heading (its
    depth in the heading path), then its text."""
    parts: list[str] = []
    for section in sections:
        path = list(section.get("heading_path") or [])
        heading = path[-1] if path else str(section.get("title", ""))
        anchor = str(section.get("anchor", ""))
        if heading:
            level = "#" * min(6, max(1, len(path)))
            parts.append(f"{level} {heading}" + (f" {{#{anchor}}}" if anchor else ""))
        body = str(section.get("text", "")).strip()
        if body:
            parts.append(body)
    return "\n\n".join(parts) + "\n"


def llms_txt(engine: Engine, site_dir: Path | None = None) -> str:
    """The site's ``llms.txt``: the build's, else the index's pages in its format."""
    if site_dir is not None and (site_dir / "llms.txt").is_file():
        return (site_dir / "llms.txt").read_text(encoding="utf-8")
    index = engine.current().index
    pages = pages_of(index)
    site = site_url(engine)
    name = _title(index, next(iter(pages.values()), []))
    lines = [f"# {name or 'Documentation'}", "", "## Pages", ""]
    for page, ids in pages.items():
        first = index.sections[ids[0]]
        title = str(first.get("title", "")) or page or "Home"
        twin = twin_url(page)
        summary = " ".join(str(first.get("text", "")).split())[:120]
        link = urljoin(site, twin) if site else twin
        lines.append(f"- [{title}]({link})" + (f": {summary}" if summary else ""))
    return "\n".join(lines) + "\n"
