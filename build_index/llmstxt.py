"""``llms.txt``, ``llms-full.txt`` and a Markdown twin of every page, written into a built site.

The MkDocs plugin (``on_post_build``) and ``anchored index --inject`` / ``anchored
llms`` (any built static site) call ``write_llms`` with the same pages the index
reads; ``markdown_twin`` makes each page's Markdown from the index's own reading
of the page.

``llms.txt`` follows https://llmstxt.org: ``# Site name``, ``> description``, then
the nav's sections as ``## Section`` file lists, each page as
``- [Title](URL of its twin): one-line summary``. A nav section nested in another
is its own list, named by its path (``## User guide / Configuration``); pages at
the top of the nav are listed under ``## Docs``; pages the nav does not list come
last, under ``## Optional`` (the format's section of links an agent may skip).
Without a nav every page is under ``## Docs`` in URL order, the home page first.

``llms-full.txt`` is the same header, then every page's twin in the same order,
each after a ``---`` rule and a ``Source:`` line with the page's URL.

Writing is incremental: a file whose content is unchanged is not rewritten. With a
``cache_dir`` (the plugin's), the files of the last build are kept there with the
digest of what they were made from (the pages, the options, the nav and this code):
an unchanged build copies them back without parsing a page, and without importing
the HTML parser (``quickcheck``'s rule: an unchanged rebuild imports nothing heavy).
"""

from __future__ import annotations

import hashlib
import html as html_lib
import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from .errors import PageError
from .quickcheck import inputs_digest
from .types import PageInput

if TYPE_CHECKING:  # imported when a twin is made: they bring the HTML parser
    from .markdown_twin import SiteLinks, Twin

__all__ = [
    "LlmsOptions",
    "LlmsReport",
    "NavItem",
    "NavSection",
    "nav_sections",
    "site_base",
    "twin_path",
    "twin_url",
    "write_llms",
]

log = logging.getLogger("anchored")

LLMS_TXT = "llms.txt"
LLMS_FULL_TXT = "llms-full.txt"
CACHE_FILE = "llms-cache.json"  # in cache_dir: the last build's files and their inputs
CACHE_FORMAT = "anchored-llms-cache"
TOP_SECTION = "Docs"
UNLISTED_SECTION = "Optional"
_META_DESCRIPTION = re.compile(
    r"<meta\b[^>]*\bname=[\"']description[\"'][^>]*\bcontent=[\"']([^\"']*)[\"']",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class LlmsOptions:
    """What to write (each can be turned off) and which pages to leave out (URL globs,
    as ``chunking.is_excluded``: a page the index leaves out is left out here too)."""

    llms_txt: bool = True
    llms_full_txt: bool = True
    twins: bool = True
    exclude: tuple[str, ...] = ()

    @property
    def anything(self) -> bool:
        return self.llms_txt or self.llms_full_txt or self.twins


@dataclass(frozen=True)
class NavItem:
    """One entry of a site's navigation: a page (``url``), a section (``children``), or
    a section with its own index page (both)."""

    title: str
    url: str | None = None
    children: tuple[NavItem, ...] = ()


@dataclass(frozen=True)
class NavSection:
    """One ``## title`` file list of ``llms.txt``: page URLs in nav order, with the
    title the nav gives each (``""``: the page's own)."""

    title: str
    pages: list[str] = field(default_factory=list)
    titles: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LlmsReport:
    pages: int  # pages written as twins / listed
    written: tuple[str, ...]  # files (relative to the site folder) written this time
    unchanged: int  # files left as they were
    warnings: tuple[str, ...] = ()


def twin_url(page_url: str) -> str:
    """The twin's URL beside a page URL (both relative to the site root, percent-encoded).

    ``foo/bar/`` -> ``foo/bar/index.md``, ``foo.html`` -> ``foo.md``, the home page
    ``""`` -> ``index.md``.
    """
    if page_url == "" or page_url.endswith("/"):
        return page_url + "index.md"
    if page_url.endswith(".html"):
        return page_url[: -len(".html")] + ".md"
    if page_url.endswith(".htm"):
        return page_url[: -len(".htm")] + ".md"
    return page_url + ".md"


def twin_path(page_url: str) -> str:
    """The twin's file path relative to the site folder (``twin_url`` decoded)."""
    return unquote(twin_url(page_url))


def site_base(site_url: str | None, version: str = "") -> str:
    """Where the site root is published: ``site_url``, else ``/`` (links root-relative);
    under mike, in the version's folder (mike's own build already puts the version at
    the end of ``site_url``)."""
    base = (site_url or "/").rstrip("/") + "/"
    folder = version.strip("/")
    if folder and not base.endswith(f"/{folder}/"):
        base += folder + "/"
    return base


def nav_sections(items: Sequence[NavItem]) -> list[NavSection]:
    """The nav as ``llms.txt`` sections: top-level pages under ``Docs``, every section
    (at any depth) holding pages as its own list named by its path."""
    sections: dict[str, NavSection] = {}

    def add(title: str, url: str, page_title: str) -> None:
        section = sections.setdefault(title, NavSection(title))
        if url not in section.pages:
            section.pages.append(url)
            section.titles[url] = page_title

    def walk(item: NavItem, path: tuple[str, ...]) -> None:
        if not item.children:
            if item.url is not None:
                add(" / ".join(path) if path else TOP_SECTION, item.url, item.title)
            return
        inner = (*path, item.title or "Pages")
        if item.url is not None:
            add(" / ".join(inner), item.url, item.title)
        for child in item.children:
            walk(child, inner)

    for item in items:
        walk(item, ())
    return [section for section in sections.values() if section.pages]


def write_llms(
    site_dir: Path,
    pages: Iterable[PageInput],
    *,
    site_name: str,
    description: str = "",
    base: str = "/",
    nav: Sequence[NavItem] | None = None,
    options: LlmsOptions | None = None,
    cache_dir: Path | None = None,
) -> LlmsReport:
    """Write the twins, ``llms.txt`` and ``llms-full.txt`` of ``pages`` into ``site_dir``.

    ``base`` is ``site_base(...)``. A page that cannot be read is left out with a
    warning (logged on the ``anchored`` logger and returned). With ``cache_dir``, an
    unchanged build's files come from the cache (module docstring).
    """
    options = options or LlmsOptions()
    if not options.anything:
        return LlmsReport(pages=0, written=(), unchanged=0)
    pages = list(pages)
    digest = ""
    if cache_dir is not None:
        settings = {
            "code": _code_digest(),
            "options": repr(options),
            "site": [site_name, description, base],
            "nav": repr(list(nav)) if nav is not None else None,
        }
        digest = inputs_digest(pages, settings)
        cached = _read_cache(cache_dir / CACHE_FILE, digest)
        if cached is not None:
            count, warnings, files = cached
            return _write_files(site_dir, files, count, warnings)
    count, warnings, files = _make_files(pages, site_name, description, base, nav, options)
    if cache_dir is not None:
        _write_cache(cache_dir / CACHE_FILE, digest, count, warnings, files)
    return _write_files(site_dir, files, count, warnings)


def _make_files(
    pages: list[PageInput],
    site_name: str,
    description: str,
    base: str,
    nav: Sequence[NavItem] | None,
    options: LlmsOptions,
) -> tuple[int, list[str], dict[str, str]]:
    """(pages, warnings, {file name: text}): every file to write, made from the pages."""
    from .chunking import is_excluded
    from .markdown_twin import SiteLinks, page_markdown

    kept = {page.url: page for page in pages if not is_excluded(page, options.exclude)}
    if not kept:
        return 0, [], {}
    links = SiteLinks(base, frozenset(kept) if options.twins else frozenset())
    twins: dict[str, Twin] = {}
    warnings: list[str] = []
    for url, page in kept.items():
        try:
            twins[url] = page_markdown(page, links)
        except PageError as exc:
            warnings.append(f"{exc} (no Markdown twin)")
            log.warning("anchored: %s (no Markdown twin)", exc)
    sections = _ordered_sections(nav, twins)
    files: dict[str, str] = {}
    if options.twins:
        for url, twin in twins.items():
            files[twin_path(url)] = twin.markdown
    header = _header(site_name, description)
    if options.llms_txt:
        files[LLMS_TXT] = _llms_txt(header, sections, kept, twins, links)
    if options.llms_full_txt:
        files[LLMS_FULL_TXT] = _llms_full(header, sections, twins, links)
    return len(twins), warnings, files


def _write_files(
    site_dir: Path, files: dict[str, str], pages: int, warnings: list[str]
) -> LlmsReport:
    written = [name for name, text in files.items() if _write_if_changed(site_dir / name, text)]
    return LlmsReport(
        pages=pages,
        written=tuple(written),
        unchanged=len(files) - len(written),
        warnings=tuple(warnings),
    )


def _code_digest() -> str:
    """sha256 of the code that makes the files (a changed twin writer is a changed input)."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in ("html.py", "markdown_twin.py", "llmstxt.py", "chunking.py"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()


def _read_cache(path: Path, digest: str) -> tuple[int, list[str], dict[str, str]] | None:
    try:
        data = json.loads(path.read_bytes())
        if data.get("format") != CACHE_FORMAT or data.get("inputs") != digest:
            return None
        files = data["files"]
        if not isinstance(files, dict) or not all(isinstance(t, str) for t in files.values()):
            return None
        return int(data["pages"]), [str(w) for w in data["warnings"]], files
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write_cache(
    path: Path, digest: str, pages: int, warnings: list[str], files: dict[str, str]
) -> None:
    data = {
        "format": CACHE_FORMAT,
        "inputs": digest,
        "pages": pages,
        "warnings": warnings,
        "files": files,
    }
    try:
        _write_if_changed(path, json.dumps(data, ensure_ascii=False))
    except OSError as exc:  # a cache that cannot be written costs the next build time only
        log.warning("anchored: cannot write %s (%s)", path, exc)


def _ordered_sections(nav: Sequence[NavItem] | None, twins: dict[str, Twin]) -> list[NavSection]:
    """The nav's sections with only pages that have a twin, then the unlisted pages."""
    sections: list[NavSection] = []
    listed: set[str] = set()
    for section in nav_sections(nav or ()):
        urls = [url for url in section.pages if url in twins and url not in listed]
        listed.update(urls)
        if urls:
            sections.append(NavSection(section.title, urls, section.titles))
    rest = sorted((url for url in twins if url not in listed), key=lambda u: (u != "", u))
    if rest:
        title = UNLISTED_SECTION if sections else TOP_SECTION
        sections.append(NavSection(title, rest))
    return sections


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _header(site_name: str, description: str) -> str:
    header = f"# {_one_line(site_name) or 'Documentation'}\n"
    if _one_line(description):
        header += f"\n> {_one_line(description)}\n"
    return header


def _summary(page: PageInput, twin: Twin) -> str:
    """The page's own description (front matter, else its ``<meta>`` when it is not the
    site's), else its first paragraph."""
    described = page.meta.get("description")
    if isinstance(described, str) and _one_line(described):
        return _one_line(described)
    return twin.summary


def _llms_txt(
    header: str,
    sections: list[NavSection],
    pages: dict[str, PageInput],
    twins: dict[str, Twin],
    links: SiteLinks,
) -> str:
    lines = [header]
    for section in sections:
        lines.append(f"## {_one_line(section.title)}\n")
        for url in section.pages:
            page, twin = pages[url], twins[url]
            title = _one_line(section.titles.get(url) or page.title) or url or "Home"
            title = title.replace("[", "(").replace("]", ")")
            summary = _summary(page, twin)
            target = links.page(url).replace(" ", "%20").replace("(", "%28").replace(")", "%29")
            lines.append(f"- [{title}]({target})" + (f": {summary}" if summary else ""))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _llms_full(
    header: str, sections: list[NavSection], twins: dict[str, Twin], links: SiteLinks
) -> str:
    parts = [header]
    for section in sections:
        for url in section.pages:
            source = links.base + url
            parts.append(f"---\n\nSource: <{source}>\n\n{twins[url].markdown}")
    return "\n".join(parts)


def page_description(html: str, site_description: str) -> str:
    """A built page's ``<meta name="description">`` when it is its own (not the site's)."""
    found = _META_DESCRIPTION.search(html, 0, 64 * 1024)
    text = _one_line(html_lib.unescape(found.group(1))) if found else ""
    # "None": what the Read the Docs theme writes for a site without a description
    return "" if text in (_one_line(site_description), "None") else text


def _write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` unless it already holds exactly that; True if written."""
    data = text.encode("utf-8")
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.anchored-tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return True
