"""Every picture the docs show (``![…](images/NAME)`` in site/) exists and is made by a
test or script in the repo, under the name the docs use. ``MADE_BY`` says which file
writes each one, with the name as that file spells it (a template and the values that
give NAME); ``ANCHORED_SCREENSHOTS=site/images`` (the node tests) or the test's own
``ANCHORED_*_SHOTS`` variable refreshes it. A picture no file makes is listed in
``UNSCRIPTED`` with why, so a new one of those is a failure, not a silent gap."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"
B = "tests/browser/"

# name -> (file that writes it, the name as written there, values for its ${…} parts)
MADE_BY: dict[str, tuple[str, str, dict[str, str]]] = {
    **{
        f"answer-{kind}-{width}.png": (
            B + "structure.test.js",
            f"`answer-{kind}-${{width}}.png`",
            {"width": width},
        )
        for kind in ("table", "list")
        for width in ("1280", "375")
    },
    "ask-box.png": (B + "e2e.test.js", "'ask-box.png'", {}),
    "ask-box-dark.png": (B + "e2e.test.js", "'ask-box-dark.png'", {}),
    "code-light-1280.png": (
        B + "look.test.js",
        "`code-${scheme}-${width}.png`",
        {"scheme": "light", "width": "1280"},
    ),
    "code-dark-375.png": (
        B + "look.test.js",
        "`code-${scheme}-${width}.png`",
        {"scheme": "dark", "width": "375"},
    ),
    "material-dark-highlight.png": (
        B + "look.test.js",
        "`material-${scheme}-highlight.png`",
        {"scheme": "dark"},
    ),
    "streaming-material-light-1280.png": (
        B + "streaming.test.js",
        "`streaming-${theme}-${scheme}-${width}.png`",
        {"theme": "material", "scheme": "light", "width": "1280"},
    ),
    "streaming-material-dark-375.png": (
        B + "streaming.test.js",
        "`streaming-${theme}-${scheme}-${width}.png`",
        {"theme": "material", "scheme": "dark", "width": "375"},
    ),
    **{
        f"highlight-{kind}.png": (
            B + "highlight.test.js",
            "`highlight-${name}.png`",
            {"name": kind},
        )
        for kind in ("prose", "code", "table")
    },
    "search-ask-light-1280.png": (
        B + "search.test.js",
        "`search-ask-${scheme === 'slate' ? 'dark' : 'light'}-${width}.png`",
        {"scheme === 'slate' ? 'dark' : 'light'": "light", "width": "1280"},
    ),
    "search-ask-dark-375.png": (
        B + "search.test.js",
        "`search-ask-${scheme === 'slate' ? 'dark' : 'light'}-${width}.png`",
        {"scheme === 'slate' ? 'dark' : 'light'": "dark", "width": "375"},
    ),
    "page-menu-light-1280.png": (
        B + "pagemenu.test.js",
        "`page-menu-${scheme}-${width}.png`",
        {"scheme": "light", "width": "1280"},
    ),
    "page-menu-dark-375.png": (
        B + "pagemenu.test.js",
        "`page-menu-${scheme}-${width}.png`",
        {"scheme": "dark", "width": "375"},
    ),
    "page-menu-mcp.png": (B + "pagemenu.test.js", "'page-menu-mcp.png'", {}),
    "back-conversation.png": (B + "docshots.test.js", "'back-conversation.png'", {}),
    "link-text-fragment.png": (B + "docshots.test.js", "'link-text-fragment.png'", {}),
    "languages.png": (B + "languages.test.js", "'languages.png'", {}),
    "versions-ask-latest.png": (B + "versions.test.js", "'versions-ask-latest.png'", {}),
    "zensical-ask-box.png": ("tests/test_zensical.py", '"zensical-ask-box.png"', {}),
    "mcp-session.png": ("tests/test_mcp_screenshot.py", '"mcp-session.png"', {}),
}

# Pictures the docs show that no file in the repo makes (fix by adding a maker above).
UNSCRIPTED = {
    "owners-report.png": "issue 13's report page; taken by hand, no test or script keeps it",
}


def _shown() -> dict[str, list[str]]:
    """Each picture the docs show -> the pages showing it."""
    found: dict[str, list[str]] = {}
    for page in sorted(SITE.rglob("*.md")):
        for name in re.findall(
            r"!\[[^\]]*\]\((?:\.\./)*images/([^)\s]+)\)", page.read_text("utf-8")
        ):
            found.setdefault(name, []).append(str(page.relative_to(ROOT)))
    return found


def test_every_picture_shown_exists() -> None:
    shown = _shown()
    assert len(shown) >= 15, sorted(shown)  # 18 when written: the regex finds them
    missing = {n: pages for n, pages in shown.items() if not (SITE / "images" / n).is_file()}
    assert not missing, f"pictures shown but not in site/images: {missing}"


@pytest.mark.parametrize("name", sorted(_shown()))
def test_every_picture_shown_is_made_by_a_file_in_the_repo(name: str) -> None:
    if name in UNSCRIPTED:
        pytest.skip(f"{name}: {UNSCRIPTED[name]}")
    assert name in MADE_BY, f"{name}: no test or script named as its maker (MADE_BY)"
    path, written, values = MADE_BY[name]
    source = (ROOT / path).read_text("utf-8")
    assert written in source, f"{path} does not write {written}"
    expanded = written.strip("`'\"")
    for part, value in values.items():
        expanded = expanded.replace("${" + part + "}", value)
    assert expanded == name, f"{written} with {values} gives {expanded}, not {name}"


def test_the_lists_name_only_pictures_the_docs_show() -> None:
    shown = _shown()
    stale = sorted(set(MADE_BY) - set(shown)) + sorted(set(UNSCRIPTED) - set(shown))
    assert not stale, f"listed here but shown nowhere in site/: {stale}"
