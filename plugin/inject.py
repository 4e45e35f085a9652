"""The ask box in an already-built static site: ``anchored index SITE_DIR -o INDEX --inject``.

For sites the plugin cannot run in (Zensical, which runs only the plugins it
re-implemented; Sphinx, Hugo, hand-written HTML), this does to the built pages what
the plugin does at ``mkdocs build``:

- copies the ask box's assets to ``SITE_DIR/assets/anchored/``;
- adds to each page's ``<head>`` the stylesheet, the page settings
  (``<script id="anchored-config" type="application/json">``, the same JSON as the
  plugin's, with the page's URL and its relative root) and the module script
  (``plugin.inject_widget``, the plugin's own function).

Idempotent: a page that already carries the ask box (from an earlier ``--inject``
or from the plugin) has that block replaced, so running it again, or with other
settings, leaves one copy with the new settings. Pages are the ones ``anchored
index`` reads (static_site.py: no 404/search/redirect pages, no asset folders).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mkdocs_anchored.config import AnchoredConfig
from mkdocs_anchored.plugin import ASSET_URL, ASSETS, inject_widget

from build_index.llmstxt import LlmsOptions, LlmsReport
from build_index.static_site import _REFRESH, _html_files, _page_url  # same page set

# The block inject_widget writes (any root, any settings), to replace on a re-run.
_BLOCK = re.compile(
    r'<link rel="stylesheet" href="[^"<>]*assets/anchored/anchored\.css">'
    r'<script id="anchored-config" type="application/json">.*?</script>'
    r'<script type="module" src="[^"<>]*assets/anchored/anchored\.js"></script>',
    re.DOTALL,
)


@dataclass(frozen=True)
class InjectReport:
    pages: int  # pages that now carry the ask box
    replaced: int  # ... of which already had it (its block was replaced)
    assets: Path  # where the assets were copied
    skipped: tuple[str, ...] = ()  # pages left alone: not UTF-8


def widget_config(options: Mapping[str, Any]) -> AnchoredConfig:
    """The plugin's options (``widget_*``), checked by the plugin's own config schema."""
    config = AnchoredConfig()
    config.load_dict(dict(options))
    errors, _warnings = config.validate()
    if errors:
        name, error = errors[0]
        raise ValueError(f"{name}: {error}")
    return config


def page_settings(config: AnchoredConfig, page_url: str) -> dict[str, Any]:
    """The JSON the ask box reads from a page, as ``AnchoredPlugin.widget_settings``."""
    root = "../" * page_url.count("/")  # mkdocs.utils.get_relative_url(".", url)
    return {
        "endpoint": config.widget_endpoint.rstrip("/"),
        "root": root,
        "page": page_url,
        "title": config.widget_title,
        "placeholder": config.widget_placeholder,
        "starters": list(config.widget_starters),
        "attach": config.widget_attach,
        "shortcut": config.widget_shortcut,
        "search_ask": config.widget_search_ask,
        "timeout": round(config.widget_timeout * 1000),
        "page_menu": list(config.widget_page_menu),
        "ask_links": config.widget_ask_links,
        "site_name": "",  # a built site's name is not known here: the menu names it by host
        "scopes": True,
        # As the plugin: a version option (or mike building), else unversioned.
        **({"version": version} if (version := docs_version(config)) else {"versioned": False}),
    }


def docs_version(config: AnchoredConfig) -> str:
    """The version option, else the one mike is building (``MIKE_DOCS_VERSION``)."""
    return str(config.version or os.environ.get("MIKE_DOCS_VERSION", ""))


def inject_site(site_dir: Path, options: Mapping[str, Any] | None = None) -> InjectReport:
    """Put the ask box into every page of the built site at ``site_dir``."""
    config = widget_config(options or {})
    target = site_dir / ASSET_URL
    shutil.copytree(ASSETS, target, dirs_exist_ok=True)
    pages = replaced = 0
    skipped: list[str] = []
    for path in _html_files(site_dir):
        raw = path.read_bytes()
        if _REFRESH.search(raw, 0, 4096):  # a redirect stub
            continue
        url = _page_url(path.relative_to(site_dir).as_posix())
        try:
            text = raw.decode("utf-8")  # built pages are UTF-8; anything else is left alone
        except UnicodeDecodeError:
            skipped.append(url)
            continue
        text, found = _BLOCK.subn("", text)
        replaced += bool(found)
        _write_atomic(path, inject_widget(text, page_settings(config, url)))
        pages += 1
    return InjectReport(pages=pages, replaced=replaced, assets=target, skipped=tuple(skipped))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.anchored-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_llms_for_site(
    site_dir: Path, options: LlmsOptions, *, site_url: str | None = None
) -> LlmsReport:
    """llms.txt, llms-full.txt and the Markdown twins of a built static site, as the
    plugin writes them at ``mkdocs build``: the same pages ``anchored index`` reads, the
    nav, description and URL the home page shows (``site_nav``); ``site_url`` when given
    is where the site is published."""
    from build_index.llmstxt import page_description, site_base, write_llms
    from build_index.site_nav import read_site_info
    from build_index.static_site import pages_from_site_dir, site_name_of

    pages = list(pages_from_site_dir(site_dir))
    info = read_site_info(site_dir, [page.url for page in pages])
    described = []
    for page in pages:
        own = page_description(page.html, info.description)
        described.append(replace(page, meta={**page.meta, "description": own}) if own else page)
    return write_llms(
        site_dir,
        described,
        site_name=site_name_of(site_dir),
        description=info.description,
        base=site_base(site_url or info.site_url),
        nav=info.nav,
        options=options,
    )


def llms_line(report: LlmsReport) -> str:
    """What ``anchored index --inject`` / ``anchored llms`` print about it."""
    line = (
        f"Markdown for AI assistants: {report.pages} pages, {len(report.written)} files "
        f"written, {report.unchanged} unchanged"
    )
    for warning in report.warnings:
        line += f"\nwarning: {warning}"
    return line


def inject_from_args(site_dir: Path, endpoint: str, title: str | None, starters: list[str]) -> str:
    """``anchored index --inject``: inject, and the line to print."""
    options: dict[str, Any] = {"widget_endpoint": endpoint, "widget_starters": starters}
    if title:
        options["widget_title"] = title
    try:
        report = inject_site(site_dir, options)
    except ValueError as exc:
        raise SystemExit(f"anchored index --inject: {exc}") from None
    where = f"asking {endpoint}" if endpoint else "asking the same origin (/v1)"
    line = (
        f"ask box in {report.pages} pages ({report.replaced} updated), assets in "
        f"{report.assets}, {where}"
    )
    for url in report.skipped:
        line += f"\nwarning: {url or 'index.html'}: not UTF-8, no ask box"
    return line
