"""The plugin's typed configuration (``plugins: - anchored: …`` in mkdocs.yml)."""

from __future__ import annotations

from mkdocs.config import base
from mkdocs.config import config_options as c


class StoreOption(c.Type[str]):
    """A local folder or ``s3://bucket/prefix``."""

    def __init__(self, default: str) -> None:
        super().__init__(str, default=default)

    def run_validation(self, value: object) -> str:
        value = super().run_validation(value)
        if value.startswith("s3://"):
            bucket = value[5:].split("/", 1)[0]
            if not bucket:
                raise c.ValidationError(
                    f"store '{value}' names no bucket; write it as s3://bucket/prefix"
                )
        elif "://" in value:
            raise c.ValidationError(
                f"store '{value}' is neither a local folder nor s3://bucket/prefix"
            )
        return value


class TimeoutOption(c.Type[float]):
    """Seconds, a number between 1 and 300."""

    def __init__(self, default: float) -> None:
        super().__init__((int, float), default=default)

    def run_validation(self, value: object) -> float:
        if isinstance(value, bool):
            raise c.ValidationError("expected a number of seconds")
        number = float(super().run_validation(value))
        if not 1 <= number <= 300:
            raise c.ValidationError(f"{number:g} s is outside 1–300 s")
        return number


# The page menu's entries (plugin/assets/pagelinks.js MENU_ENTRIES): copy the page as
# Markdown, view it, open it in ChatGPT, in Claude, the MCP install snippets.
PAGE_MENU = ("copy", "view", "chatgpt", "claude", "mcp")


class AnchoredConfig(base.Config):
    """Options of the ``anchored`` plugin; related options share a prefix."""

    enabled = c.Type(bool, default=True)
    # Where the index goes: a local folder (relative to mkdocs.yml) or s3://bucket/prefix.
    store = StoreOption(default=".anchored/index")
    # Embedding cache and the local copy of an index published to S3.
    cache_dir = c.Type(str, default=".anchored/cache")
    # Embedding model: a built-in name or a folder holding model.onnx + tokenizer.json.
    model = c.Type(str, default="all-MiniLM-L6-v2")
    # Fail the build (instead of warning) when a page cannot be indexed.
    strict = c.Type(bool, default=False)
    # Page URL globs to leave out (front matter `search: {exclude: true}` also works).
    exclude = c.ListOfItems(c.Type(str), default=[])
    # Published builds to keep in the S3 store.
    keep_builds = c.Type(int, default=5)
    # Chunk sizes, in approximate tokens.
    chunk_max_tokens = c.Type(int, default=300)
    chunk_parent_max_tokens = c.Type(int, default=1000)
    chunk_code_max_tokens = c.Type(int, default=600)
    # The ask box.
    widget = c.Type(bool, default=True)
    widget_endpoint = c.Type(str, default="")
    widget_title = c.Type(str, default="Ask the docs")
    widget_placeholder = c.Type(str, default="Ask a question about these docs…")
    widget_starters = c.ListOfItems(c.Type(str), default=[])
    widget_attach = c.Type(str, default="")
    widget_shortcut = c.Type(str, default="a")
    # Offer "Ask the docs: '…'" in the theme's own search box (Material, mkdocs theme).
    widget_search_ask = c.Type(bool, default=True)
    # Seconds the ask box waits for an answer; keep it above the function's
    # ANCHORED_DEADLINE_S (20 s by default) so the function's own fallback arrives first.
    widget_timeout = TimeoutOption(default=30.0)
    # The page menu by each page's title, its entries in this order; [] turns it off.
    widget_page_menu = c.ListOfItems(c.Choice(PAGE_MENU), default=list(PAGE_MENU))
    # `?ask=…` on a page opens the ask box and asks; each answer offers "Copy link".
    widget_ask_links = c.Type(bool, default=True)
    # `anchored serve` only: log each question to this folder (relative to mkdocs.yml),
    # off when empty; see site/owners.md. On AWS the template's QuestionLogDays turns it on.
    question_log = c.Type(str, default="")
    # Docs for AI assistants (site/agents.md), written into the built site: llms.txt,
    # llms-full.txt, and a Markdown twin beside every page (foo/index.html -> foo/index.md).
    # Pages left out of the index are left out here too; llms_exclude leaves out more.
    llms_txt = c.Type(bool, default=True)
    llms_full_txt = c.Type(bool, default=True)
    llms_twins = c.Type(bool, default=True)
    llms_exclude = c.ListOfItems(c.Type(str), default=[])
    # Versioned docs (mike): the version this build is; empty: the one mike is building
    # (MIKE_DOCS_VERSION), else none. Its aliases; empty: ANCHORED_VERSION_ALIASES.
    version = c.Type(str, default="")
    version_aliases = c.ListOfItems(c.Type(str), default=[])
