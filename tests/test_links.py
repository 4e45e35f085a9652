"""Citation links: the widget's parameter (as text.js encodes it) plus a URL text fragment."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest
from anchored_query.citations.links import citation_link, encode_param, text_fragment

ROOT = Path(__file__).resolve().parents[1]
TEXT_JS = ROOT / "plugin" / "assets" / "text.js"

LONG = (
    "Set the endpoint option to the base URL of the query API. An empty string means the "
    "API is served from the same origin as the site, which is what anchored serve does."
)
HIGHLIGHTS = [
    "hello world",
    LONG,
    'Option | Default | Meaning\nendpoint | "" | base URL, e.g. https://x.example/a,b&c',
    "plugins:\n  - search\n  - anchored:\n      endpoint: https://api.example.com/",
    "Ünïcödé straße — 東京都 の設定 ~tilde~ 50% + 1 = 2 #hash ?q &amp;",
    "one two three four five six seven eight nine ten eleven twelve thirteen",
    "averyveryverylongidentifier_" * 5 + " and two words",
    "¶ pilcrow\u00ad soft\u200bhyphen",
]


def _fragment_terms(link: str) -> list[str]:
    directive = link.split(":~:text=", 1)[1]
    return [urllib.parse.unquote(t) for t in directive.split(",")]


def test_short_highlight_is_one_term_and_the_parameter_holds_it_whole() -> None:
    link = citation_link("user-guide/#endpoint", "hello world")
    assert link == "user-guide/?anchored-hl=hello+world#endpoint:~:text=hello%20world"


def test_long_highlight_gets_start_and_end_terms_from_its_ends() -> None:
    link = citation_link("user-guide/configuration/#endpoint", LONG)
    assert link.startswith("user-guide/configuration/?anchored-hl=Set+the+endpoint+option+to+the~")
    assert "#endpoint:~:text=" in link
    start, end = _fragment_terms(link)
    assert LONG.startswith(start) and LONG.endswith(end)
    assert 16 <= len(start) <= 60 and 16 <= len(end) <= 60


def test_fragment_terms_escape_the_directive_syntax() -> None:
    fragment = text_fragment("a-b, c&d e-f, g&h i-j, k&l m-n, o&p")
    body = fragment.removeprefix("text=")
    for raw in ("-", "&", " "):
        assert raw not in body.replace(",", ""), fragment
    assert body.count(",") <= 1  # only the separator between start and end
    assert "%2D" in body and "%26" in body and "%2C" in body


def test_table_cells_and_lines_are_separate_blocks() -> None:
    table = "Option | Default\nendpoint | the base URL of the query API | required"
    start, end = _fragment_terms(citation_link("a/", table))
    assert "|" not in start + end and "\n" not in start + end
    # short cells are skipped at the start (they would match too early); any end will do
    assert start == "the base URL of the" and end == "required"
    code = "- anchored:\n      endpoint: https://api.example.com/\n      shortcut: a"
    start, end = _fragment_terms(citation_link("a/", code))
    assert start == "endpoint: https://api.example.com/" and end == "shortcut: a"


def test_existing_query_and_missing_anchor_are_kept() -> None:
    link = citation_link("a/?lang=en#x", "hi there")
    assert link.startswith("a/?lang=en&anchored-hl=hi+there#x:~:")
    assert citation_link("a/?anchored-hl=old", "new") == "a/?anchored-hl=new#:~:text=new"
    assert citation_link("https://docs.example.com/a/", "hi") == (
        "https://docs.example.com/a/?anchored-hl=hi#:~:text=hi"
    )
    assert citation_link("a/#x", "") == "a/#x"
    assert citation_link("a/#x", " ¶ | ") == "a/#x"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run text.js")
def test_the_parameter_is_exactly_what_the_widget_builds() -> None:
    """The same `?anchored-hl=` as text.js's citationHref, for awkward passages too."""
    script = (
        f"import({json.dumps(TEXT_JS.as_uri())}).then((m) => {{"
        "const hs = JSON.parse(process.argv[1]);"
        "console.log(JSON.stringify(hs.map((h) => m.encodeSpec(m.specFor(h)))));"
        "});"
    )
    out = subprocess.run(
        ["node", "-e", script, json.dumps(HIGHLIGHTS)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert json.loads(out.stdout) == [encode_param(h) for h in HIGHLIGHTS]
