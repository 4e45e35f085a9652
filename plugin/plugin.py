"""The MkDocs adapter: translates build hooks into calls on ``build_index``.

It collects each page's rendered content, injects the ask box, and after the
build writes the index (and publishes it when the store is ``s3://``).

Nothing heavy is imported at module level: an unchanged rebuild is answered by
``build_index.quickcheck`` (hashlib and json only), and ``build_index.pipeline``
(numpy, onnxruntime, tokenizers, the HTML parser) is imported only when
something changed.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, event_priority
from mkdocs.structure import StructureItem
from mkdocs.structure.files import Files
from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url
from mkdocs_anchored.config import AnchoredConfig

from build_index import __version__
from build_index.errors import AnchoredError
from build_index.progress import LineProgress
from build_index.quickcheck import inputs_digest, read_unchanged, write_stamp
from build_index.types import PageInput

if TYPE_CHECKING:
    from build_index.llmstxt import LlmsOptions, NavItem
    from build_index.pipeline import BuildReport

log = logging.getLogger("mkdocs.plugins.anchored")

ASSETS = Path(__file__).parent / "assets"
ASSET_URL = "assets/anchored/"
STAMP = "build-stamp.json"  # in cache_dir: what the last build was made from
_HTML_LANG = re.compile(r"<html\b[^>]*\blang=[\"']?([A-Za-z0-9_-]+)", re.IGNORECASE)


class AnchoredPlugin(BasePlugin[AnchoredConfig]):
    """``plugins: [anchored]`` — index the site and add the ask box."""

    def __init__(self) -> None:
        self.command: str = "build"
        self.pages: dict[str, PageInput] = {}
        self.index_dir: Path | None = None
        self.languages: tuple[str, ...] = ()  # mkdocs-static-i18n's, when it is used
        self.report: BuildReport | None = None
        self.version = ""  # the docs version being built (mike), "" when unversioned
        self.nav: Navigation | None = None  # this build's nav, for llms.txt
        self.site_name = ""  # names the docs' MCP server in the page menu's snippets

    # Defining on_startup keeps this object alive across `mkdocs serve` rebuilds,
    # so the embedding cache and the page list survive reloads.
    def on_startup(self, *, command: Literal["build", "gh-deploy", "serve"], dirty: bool) -> None:
        self.command = command

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig | None:
        if not self.config.enabled:
            return config
        root = Path(config.config_file_path or ".").resolve().parent
        self._root = root
        self.site_name = config.site_name or ""
        self.cache_dir = (root / self.config.cache_dir).resolve()
        store = self.config.store
        self.version = self._docs_version()
        if store.startswith("s3://"):
            self.index_dir = self.cache_dir / "index"
            if self.version:
                self.index_dir = self.cache_dir / "versions" / self.version / "index"
        else:
            self.index_dir = (root / store).resolve()
            if self.version:  # <store>/versions/<version>, named in <store>/versions.json
                self.index_dir = self.index_dir / "versions" / self.version
            site_dir = Path(config.site_dir).resolve()
            if self.index_dir == site_dir or site_dir in self.index_dir.parents:
                raise PluginError(
                    f"anchored: store '{store}' is inside site_dir; the index holds the "
                    "model file and must not be published with the pages. Choose a folder "
                    "outside site_dir (the default is .anchored/index)."
                )
        for name in ("chunk_max_tokens", "chunk_parent_max_tokens", "chunk_code_max_tokens"):
            if self.config[name] < 16:
                raise PluginError(f"anchored: {name} must be at least 16 (got {self.config[name]})")
        return config

    def on_pre_build(self, *, config: MkDocsConfig) -> None:
        # mkdocs-static-i18n builds each further language inside the first build's
        # on_post_build: its pages join the first language's, for one index.
        if not _i18n_nested_build(config):
            self.pages = {}
        self.languages = _i18n_languages(config)

    def on_nav(
        self, nav: Navigation, /, *, config: MkDocsConfig, files: Files
    ) -> Navigation | None:
        if not _i18n_nested_build(config):
            self.nav = nav
        return nav

    def on_page_context(
        self, context: dict[str, Any], *, page: Page, config: MkDocsConfig, nav: Any
    ) -> dict[str, Any] | None:
        if self.config.enabled and page.content is not None:
            meta = dict(page.meta or {})
            # mkdocs-static-i18n: the language the page's file is written in. A page
            # it copies into another language as a fallback (not translated) is the
            # same text as its original, which is indexed once, under its language.
            locale = context.get("i18n_file_locale")
            if isinstance(locale, str) and locale:
                if locale != context.get("i18n_page_locale", locale):
                    return context
                meta.setdefault("lang", locale)
            self.pages[page.url] = PageInput(
                url=page.url, html=page.content, title=page.title or "", meta=meta
            )
        return context

    def on_post_page(self, output: str, /, *, page: Page, config: MkDocsConfig) -> str | None:
        if not self.config.enabled:
            return output
        found = self.pages.get(page.url)
        if found is not None and "lang" not in found.meta:
            # The built page's <html lang> (what the ask box sends as the reader's).
            lang = _HTML_LANG.search(output, 0, 4096)
            if lang:
                self.pages[page.url] = replace(found, meta={**found.meta, "lang": lang.group(1)})
        if not self.config.widget:
            return output
        return inject_widget(output, self.widget_settings(page))

    def widget_settings(self, page: Page) -> dict[str, Any]:
        """The JSON the ask box reads from the page (nothing secret goes here)."""
        root = get_relative_url(".", page.url).rstrip("/") + "/"
        if root == "./":
            root = ""
        return {
            "endpoint": self.config.widget_endpoint.rstrip("/"),
            "root": root,
            "page": page.url,
            "title": self.config.widget_title,
            "placeholder": self.config.widget_placeholder,
            "starters": list(self.config.widget_starters),
            "attach": self.config.widget_attach,
            "shortcut": self.config.widget_shortcut,
            "search_ask": self.config.widget_search_ask,
            "timeout": round(self.config.widget_timeout * 1000),
            "page_menu": list(self.config.widget_page_menu),
            "ask_links": self.config.widget_ask_links,
            "site_name": self.site_name,
            "scopes": True,
            # mkdocs-static-i18n: the ask box offers the other languages (languages.js)
            **({"languages": list(self.languages)} if len(self.languages) > 1 else {}),
            # Built unversioned (no version option, not under mike): the box asks for no
            # versions.json (a 404 in the console on every open, issue 25).
            **({"version": self.version} if self.version else {"versioned": False}),
        }

    def _docs_version(self) -> str:
        """The version option, else the one mike is building (``MIKE_DOCS_VERSION``)."""
        from mkdocs_anchored.inject import docs_version

        version = docs_version(self.config)
        if version:
            from build_index.versions import check_name

            try:
                check_name(version)
            except ValueError as exc:
                raise PluginError(f"anchored: {exc}") from None
        return version

    def _version_aliases(self) -> list[str]:
        """The version_aliases option, else ``ANCHORED_VERSION_ALIASES`` (comma-separated)."""
        aliases = list(self.config.version_aliases)
        if not aliases:
            raw = os.environ.get("ANCHORED_VERSION_ALIASES", "")
            aliases = [a.strip() for a in raw.replace(" ", ",").split(",") if a.strip()]
        return aliases

    # After mkdocs-static-i18n's on_post_build (-100), which builds the other
    # languages: the index is written once, of every language's pages.
    @event_priority(-110)
    def on_post_build(self, *, config: MkDocsConfig) -> None:
        if not self.config.enabled or self.index_dir is None:
            return
        if _i18n_nested_build(config):
            return
        if self.config.widget and ASSETS.is_dir():
            target = Path(config.site_dir) / ASSET_URL
            shutil.copytree(ASSETS, target, dirs_exist_ok=True)
        self._write_llms(config)
        settings = self.build_settings(config)
        digest = inputs_digest(self.pages.values(), settings)
        stamp_file = self.cache_dir / STAMP
        stamp = read_unchanged(stamp_file, digest, self.index_dir)
        if stamp is not None:
            for warning in stamp.warnings:  # as the pipeline logged them the first time
                logging.getLogger("anchored").warning("anchored: %s", warning)
            log.info("anchored: index unchanged (%d chunks) in %s", stamp.chunks, self.index_dir)
            self._maybe_publish()
            return
        report = self._build(settings)
        if report.manifest is not None:
            write_stamp(
                stamp_file,
                digest,
                self.index_dir,
                report.manifest,
                model_files=report.model_files,
                pages=report.pages,
                pages_skipped=report.pages_skipped,
                warnings=report.warnings,
            )
        if report.unchanged:
            log.info("anchored: index unchanged (%d chunks) in %s", report.chunks, self.index_dir)
            self._maybe_publish()
            return
        reused = f", {report.reused} from the published build" if report.reused else ""
        log.info(
            "anchored: indexed %d chunks from %d pages (%d embedded, %d from cache%s) into %s",
            report.chunks,
            report.pages - report.pages_skipped,
            report.embedded,
            report.cached,
            reused,
            self.index_dir,
        )
        self._maybe_publish()

    def llms_options(self) -> LlmsOptions:
        """What to write for AI assistants (the llms_* options; the index's exclusions too)."""
        from build_index.llmstxt import LlmsOptions

        return LlmsOptions(
            llms_txt=self.config.llms_txt,
            llms_full_txt=self.config.llms_full_txt,
            twins=self.config.llms_twins,
            exclude=(*self.config.exclude, *self.config.llms_exclude),
        )

    def _write_llms(self, config: MkDocsConfig) -> None:
        """llms.txt, llms-full.txt and the Markdown twins, into the built site."""
        options = self.llms_options()
        if not options.anything:
            return
        from build_index.llmstxt import site_base, write_llms

        report = write_llms(
            Path(config.site_dir),
            list(self.pages.values()),
            site_name=config.site_name,
            description=config.site_description or "",
            base=site_base(config.site_url, self.version),
            nav=nav_items(self.nav.items) if self.nav is not None else None,
            options=options,
            cache_dir=self.cache_dir,
        )
        log.info(
            "anchored: Markdown for AI assistants: %d pages, %d files written, %d unchanged",
            report.pages,
            len(report.written),
            report.unchanged,
        )

    def build_settings(self, config: MkDocsConfig) -> dict[str, Any]:
        """Everything besides the pages that the index is made from (plain data)."""
        return {
            "code": __version__,
            "model": self.config.model,
            "chunk_max_tokens": self.config.chunk_max_tokens,
            "chunk_parent_max_tokens": self.config.chunk_parent_max_tokens,
            "chunk_code_max_tokens": self.config.chunk_code_max_tokens,
            "exclude": list(self.config.exclude),
            "site_url": config.site_url,
            "strict": self.config.strict or bool(config.strict),
        }

    def _build(self, settings: dict[str, Any]) -> BuildReport:
        """Run the pipeline (imported here: it is what costs the import time)."""
        from build_index.chunking import ChunkSettings
        from build_index.pipeline import BuildConfig, build

        assert self.index_dir is not None
        store = self.config.store
        build_config = BuildConfig(
            model=settings["model"],
            cache_dir=self.cache_dir,
            chunking=ChunkSettings(
                child_max_tokens=settings["chunk_max_tokens"],
                parent_max_tokens=settings["chunk_parent_max_tokens"],
                code_max_tokens=settings["chunk_code_max_tokens"],
            ),
            exclude=tuple(settings["exclude"]),
            site_url=settings["site_url"],
            strict=settings["strict"],
            # A version reuses the vectors of its own published build (versions.py layout).
            reuse_from=(
                (f"{store.rstrip('/')}/versions/{self.version}" if self.version else store)
                if store.startswith("s3://")
                else None
            ),
        )
        try:
            self.report = build(
                self.pages.values(),
                self.index_dir,
                build_config,
                progress=LineProgress(lambda line: log.info("anchored: %s", line)),
            )
        except AnchoredError as exc:
            raise PluginError(f"anchored: {exc}") from exc
        return self.report

    def _maybe_publish(self) -> None:
        store = self.config.store
        if self.version and not store.startswith("s3://"):
            self._record_version(store)
            return
        if store.startswith("s3://"):
            if self.command == "serve":
                log.info("anchored: not publishing to %s during `mkdocs serve`", store)
                return
            self._publish(store)

    def _publish(self, store: str) -> None:
        from build_index.publish import publish

        assert self.index_dir is not None
        if self.version:
            self._publish_version(store)
            return
        try:
            result = publish(self.index_dir, store, keep=self.config.keep_builds)
        except AnchoredError as exc:
            raise PluginError(f"anchored: publishing to {store} failed: {exc}") from exc
        log.info("anchored: published build %s to %s", result.build_id, store)

    def _publish_version(self, store: str) -> None:
        """Publish this version's index to ``<store>/versions/<version>`` and name it."""
        from build_index.versions import publish_version

        assert self.index_dir is not None
        try:
            done = publish_version(
                self.index_dir,
                store,
                self.version,
                aliases=self._version_aliases(),
                keep=self.config.keep_builds,
            )
        except (AnchoredError, ValueError) as exc:
            raise PluginError(f"anchored: publishing version {self.version} failed: {exc}") from exc
        log.info(
            "anchored: published version %s (build %s) to %s", done.version, done.build_id, store
        )

    def _record_version(self, store: str) -> None:
        """Name the version's index (built in place) in the local store's catalog."""
        from build_index.versions import record_local_version

        assert self.index_dir is not None
        try:
            record_local_version(
                self.index_dir.parent.parent, self.version, aliases=self._version_aliases()
            )
        except (AnchoredError, ValueError) as exc:
            raise PluginError(f"anchored: recording version {self.version} failed: {exc}") from exc
        log.info("anchored: version %s of the index in %s", self.version, self.index_dir)


def nav_items(items: list[StructureItem]) -> list[NavItem]:
    """MkDocs' nav (pages, sections, links) as ``llmstxt.NavItem``s (links left out)."""
    from build_index.llmstxt import NavItem

    out: list[NavItem] = []
    for item in items:
        if isinstance(item, Page):
            out.append(NavItem(str(item.title or ""), item.url))
        elif isinstance(item, Section):
            out.append(NavItem(str(item.title or ""), None, tuple(nav_items(item.children))))
    return out


def _i18n_nested_build(config: MkDocsConfig) -> bool:
    """True inside one of mkdocs-static-i18n's builds of a further language."""
    plugin = _i18n_plugin(config)
    return bool(getattr(plugin, "building", False))


def _i18n_languages(config: MkDocsConfig) -> tuple[str, ...]:
    """The languages mkdocs-static-i18n builds (``()`` without it)."""
    plugin = _i18n_plugin(config)
    return tuple(str(t) for t in getattr(plugin, "build_languages", ()) or ())


def _i18n_plugin(config: MkDocsConfig) -> object | None:
    for plugin in config.plugins.values():
        if type(plugin).__module__.startswith("mkdocs_static_i18n"):
            return plugin
    return None


def inject_widget(output: str, settings: dict[str, Any]) -> str:
    """Add the ask box's stylesheet, settings and deferred module script to a page."""
    root = settings["root"]
    # `</` must not appear inside the JSON script element.
    payload = json.dumps(settings, ensure_ascii=False).replace("</", "<\\/")
    head = (
        f'<link rel="stylesheet" href="{root}{ASSET_URL}anchored.css">'
        f'<script id="anchored-config" type="application/json">{payload}</script>'
        f'<script type="module" src="{root}{ASSET_URL}anchored.js"></script>'
    )
    marker = output.find("</head>")
    if marker == -1:
        return head + output
    return output[:marker] + head + output[marker:]
