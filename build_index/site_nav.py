"""What a built static site says about itself: its navigation, description and URL.

For ``llms.txt`` of a site the plugin did not build (``anchored index --inject``,
``anchored llms``: Zensical, MkDocs, other generators). Read from the home page:

* the nav: of the home page's ``<nav>`` elements (and Read the Docs'
  ``.wy-menu-vertical``), the one linking to the most pages of the site. Its lists
  are read as a tree: an item with a link is a page; an item holding a list is a
  section named by its own text (a caption just before a list names it too), its
  link, if any, the section's index page. Links to a fragment of the same page
  (a table of contents) are not pages. Material, Zensical, the MkDocs and Read
  the Docs themes all fit this;
* the description: ``<meta name="description">``;
* the site's URL: ``<link rel="canonical">`` of the home page (MkDocs themes and
  Zensical write it when ``site_url`` is set).
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from .html import normalise
from .llmstxt import NavItem

__all__ = ["SiteInfo", "read_site_info"]

_CANONICAL = re.compile(
    r"<link\b[^>]*\brel=[\"']canonical[\"'][^>]*\bhref=[\"']([^\"']+)[\"']", re.IGNORECASE
)
_DESCRIPTION = re.compile(
    r"<meta\b[^>]*\bname=[\"']description[\"'][^>]*\bcontent=[\"']([^\"']*)[\"']",
    re.IGNORECASE,
)
_LISTS = frozenset({"ul", "ol"})
_CAPTIONS = frozenset({"p", "span", "h2", "h3", "h4", "h5", "h6"})
_HEAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class SiteInfo:
    description: str
    site_url: str  # "" when the site does not say
    nav: tuple[NavItem, ...]


def read_site_info(root: Path, pages: Collection[str]) -> SiteInfo:
    """The nav, description and URL of the built site at ``root``; ``pages`` are its
    page URLs (``static_site``'s)."""
    try:
        home = (root / "index.html").read_text("utf-8", errors="replace")
    except OSError:
        return SiteInfo("", "", ())
    head = home[:_HEAD_BYTES]
    canonical = _CANONICAL.search(head)
    description = _DESCRIPTION.search(head)
    site_url = ""
    if canonical and urlsplit(canonical.group(1)).scheme in ("http", "https"):
        site_url = html_lib.unescape(canonical.group(1))
    text = normalise(html_lib.unescape(description.group(1))) if description else ""
    if text == "None":  # the Read the Docs theme's way of saying there is none
        text = ""
    return SiteInfo(text, site_url, tuple(_nav(home, set(pages))))


def _nav(home: str, pages: set[str]) -> list[NavItem]:
    tree = LexborHTMLParser(home)
    best: list[NavItem] = []
    best_count = 0
    for candidate in tree.css("nav, .wy-menu-vertical, ul.navbar-nav, [role='navigation']"):
        items = _Reader(pages).items(candidate)
        count = len(_urls(items))
        if count > best_count:
            best, best_count = items, count
    return best


def _urls(items: list[NavItem]) -> set[str]:
    found: set[str] = set()
    for item in items:
        if item.url is not None:
            found.add(item.url)
        found |= _urls(list(item.children))
    return found


class _Reader:
    """Reads nested lists of links into ``NavItem`` trees."""

    def __init__(self, pages: set[str]) -> None:
        self.pages = pages

    def page_of(self, href: str | None) -> str | None:
        """The page URL a nav link (relative to the home page) points to, if any."""
        if href == "#":
            return ""  # the Read the Docs theme's link to the page the nav is on: home
        if href is None or href.startswith("#"):
            return None
        parts = urlsplit(href)
        if parts.scheme or parts.netloc:
            return None
        path = urlsplit(urljoin("http://site.invalid/", href)).path.lstrip("/")
        if path.endswith("index.html"):
            path = path[: -len("index.html")]
        return path if path in self.pages else None

    def items(self, container: LexborNode) -> list[NavItem]:
        """The nav items of the lists inside ``container`` (a caption names a list)."""
        out: list[NavItem] = []
        caption = ""
        if container.tag in _LISTS:
            return [item for li in container.iter() if li.tag == "li" for item in self.item(li)]
        for child in container.iter():
            tag = child.tag or ""
            if tag in _LISTS:
                items = [item for li in child.iter() if li.tag == "li" for item in self.item(li)]
                if caption and items:
                    out.append(NavItem(caption, None, tuple(items)))
                else:
                    out.extend(items)
                caption = ""
            elif tag == "nav" or child.css_first("ul, ol") is not None:
                out.extend(self.items(child))
                caption = ""
            elif tag in _CAPTIONS:
                caption = normalise(child.text(deep=True))
        return out

    def item(self, li: LexborNode) -> list[NavItem]:
        """One ``<li>``: a page, a section, or (a table of contents only) just its link."""
        nested = [child for child in li.css("ul, ol") if _nearest_li(child, li)]
        own_link = next((a for a in li.css("a[href]") if not _inside_any(a, nested)), None)
        url = self.page_of(own_link.attributes.get("href") if own_link is not None else None)
        children: list[NavItem] = []
        for part in nested:
            for child in part.iter():
                if child.tag == "li":
                    children.extend(self.item(child))
        title = _own_text(li, nested)
        if own_link is not None and url is not None:
            title = normalise(own_link.text(deep=True)) or title
        if children:
            return [NavItem(title, url, tuple(children))]
        return [NavItem(title, url)] if url is not None else []


def _nearest_li(node: LexborNode, li: LexborNode) -> bool:
    """True if ``li`` is the nearest ``<li>`` above ``node``."""
    parent = node.parent
    while parent is not None and parent.tag != "li":
        parent = parent.parent
    return parent is not None and parent.mem_id == li.mem_id


def _inside_any(node: LexborNode, containers: list[LexborNode]) -> bool:
    ids = {c.mem_id for c in containers}
    parent = node.parent
    while parent is not None:
        if parent.mem_id in ids:
            return True
        parent = parent.parent
    return False


def _own_text(li: LexborNode, nested: list[LexborNode]) -> str:
    """The text of ``li`` outside its nested lists and nav elements (a section's name)."""
    for child in li.iter():
        if child.tag in ("input", "nav", "ul", "ol") or child.mem_id in {n.mem_id for n in nested}:
            continue
        text = normalise(child.text(deep=True))
        if text:
            return text
    return ""
