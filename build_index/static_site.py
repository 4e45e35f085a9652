"""Pages of an already-built static site (MkDocs, Zensical, Sphinx, Hugo, ...).

``anchored index SITE_DIR`` reads the HTML files a generator wrote instead of
hooking into MkDocs; ``html.extract_sections`` then finds the content element
of each page itself.
"""

from __future__ import annotations

import html as html_lib
import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from .errors import AnchoredError
from .types import PageInput

__all__ = ["pages_from_site_dir", "site_name_of"]

log = logging.getLogger("anchored")

# Folders that hold assets, search indexes or generator internals, never pages; the
# search index's folder only at the site root (a page may live at plugins/search/).
_SKIP_DIRS = frozenset({"assets", "node_modules"})
_SKIP_ROOT_DIRS = frozenset({"search"})
# Pages that are not documentation: error pages, search pages, indexes.
_SKIP_FILES = frozenset({"404.html", "search.html", "genindex.html", "py-modindex.html"})
# Bounded captures: a page full of unclosed tags must not make these quadratic.
_TITLE = re.compile(r"<title\b[^>]*>(.{0,2000}?)</title\s*>", re.IGNORECASE | re.DOTALL)
_H1 = re.compile(r"<h1\b[^>]*>(.{0,5000}?)</h1\s*>", re.IGNORECASE | re.DOTALL)
_PERMALINK = re.compile(
    r"<a\b[^>]*class=[\"'][^\"']*headerlink[^\"']*[\"'][^>]*>.*?</a\s*>",
    re.IGNORECASE | re.DOTALL,
)
_TAG = re.compile(r"<[^>]*>")
_LANG = re.compile(r"<html\b[^>]*\blang=[\"']?([A-Za-z0-9-]+)", re.IGNORECASE)
_REFRESH = re.compile(rb"http-equiv=[\"']?refresh", re.IGNORECASE)
_TITLE_SEPARATORS = (" - ", " | ", " — ", " – ", " · ")
_HEAD_BYTES = 64 * 1024


def pages_from_site_dir(
    site_dir: Path | str, *, warnings: list[str] | None = None
) -> Iterator[PageInput]:
    """Yield every documentation page under ``site_dir``, in path order.

    ``url`` is the path relative to the site root, percent-encoded like
    MkDocs' ``page.url``, with directory URLs (``foo/index.html`` -> ``foo/``,
    the root ``index.html`` -> ``""``). ``title`` is the ``<title>`` without
    the site name (taken from the home page's title), else the first ``<h1>``.
    Files are decoded as UTF-8 with replacement; ``meta["lang"]`` is the
    ``<html lang>``.

    Skipped: 404, search and sitemap pages, redirect stubs, asset and hidden
    folders (also ``_static`` and the like). When the site has a MkDocs search
    index (``search/search_index.json``, MkDocs or Material theme), a page
    missing from it was excluded from search (``search: {exclude: true}``)
    and is yielded with that front matter in ``meta`` so ``chunk_page`` skips
    it too. A file that cannot be read is logged as a warning on the
    ``anchored`` logger (and appended to ``warnings`` if given) and skipped.
    Raises ``AnchoredError`` if ``site_dir`` is not a directory.
    """
    root = Path(site_dir)
    if not root.is_dir():
        raise AnchoredError(f"site directory not found: {root} (build the site first)")
    searchable = _searchable_pages(root)
    site_name = site_name_of(root)
    for path in _html_files(root):
        relative = path.relative_to(root).as_posix()
        try:
            raw = path.read_bytes()
        except OSError as exc:
            message = f"{relative}: cannot be read, skipped ({exc.strerror or exc})"
            log.warning(message)
            if warnings is not None:
                warnings.append(message)
            continue
        if _REFRESH.search(raw, 0, 4096):
            log.debug("%s: redirect page, skipped", relative)
            continue
        text = raw.decode("utf-8", errors="replace")
        url = _page_url(relative)
        meta: dict[str, object] = {}
        lang = _LANG.search(text, 0, 4096)
        if lang:
            meta["lang"] = lang.group(1)
        if searchable is not None and url not in searchable:
            meta["search"] = {"exclude": True}
        title = _page_title(text)
        if url and site_name:
            title = _strip_site_name(title, site_name)
        yield PageInput(url=url, html=text, title=title, meta=meta)


def _html_files(root: Path) -> Iterator[Path]:
    """``*.html`` files under ``root``, sorted, skipping non-page folders and files."""
    for directory, dirnames, filenames in os.walk(root):
        at_root = Path(directory) == root
        dirnames[:] = sorted(
            name
            for name in dirnames
            if name not in _SKIP_DIRS
            and not (at_root and name in _SKIP_ROOT_DIRS)
            and not name.startswith((".", "_"))
        )
        for name in sorted(filenames):
            lower = name.lower()
            if not lower.endswith(".html") or lower in _SKIP_FILES or "sitemap" in lower:
                continue
            yield Path(directory) / name


def _page_url(relative: str) -> str:
    """The page URL MkDocs would give the file (directory URLs, percent-encoded)."""
    if relative == "index.html":
        return ""
    if relative.endswith("/index.html"):
        relative = relative[: -len("index.html")]
    return quote(relative)


def _page_title(text: str) -> str:
    """The ``<title>`` text, else the first ``<h1>`` (without its permalink)."""
    title = _TITLE.search(text, 0, _HEAD_BYTES)
    cleaned = _clean_title(title.group(1)) if title else ""
    if not cleaned:
        heading = _H1.search(text)
        cleaned = _clean_title(heading.group(1)) if heading else ""
    return cleaned


def _clean_title(markup: str) -> str:
    text = _TAG.sub("", _PERMALINK.sub("", markup))
    return " ".join(html_lib.unescape(text).split())


def site_name_of(root: Path) -> str:
    """The site name as the home page's title shows it ("Page - Site" -> "Site")."""
    try:
        with (root / "index.html").open("rb") as home:
            head = home.read(_HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    title = _page_title(head)
    for separator in _TITLE_SEPARATORS:
        if separator in title:
            return title.rsplit(separator, 1)[1]
    return title


def _strip_site_name(title: str, site_name: str) -> str:
    for separator in _TITLE_SEPARATORS:
        suffix = separator + site_name
        if title.endswith(suffix) and len(title) > len(suffix):
            return title[: -len(suffix)]
    return title


def _searchable_pages(root: Path) -> set[str] | None:
    """URLs in a MkDocs search index, or None when there is no usable index."""
    path = root / "search" / "search_index.json"
    try:
        docs = json.loads(path.read_bytes()).get("docs")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(docs, list):
        return None
    pages = {
        doc["location"].split("#", 1)[0]
        for doc in docs
        if isinstance(doc, dict) and isinstance(doc.get("location"), str)
    }
    return pages or None
