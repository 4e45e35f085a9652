"""The MkDocs adapter: typed config, widget injection, a real `mkdocs build`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mkdocs_anchored.config import AnchoredConfig
from mkdocs_anchored.plugin import AnchoredPlugin, inject_widget

FIXTURE = Path(__file__).parent / "fixtures" / "site-fixture"


def load(options: dict[str, object]) -> tuple[list[object], list[object]]:
    plugin = AnchoredPlugin()
    return plugin.load_config(options)


def test_defaults_load_without_errors() -> None:
    errors, warnings = load({})
    assert errors == [] and warnings == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"store": "s3://"}, "names no bucket"),
        ({"store": "gs://bucket/x"}, "neither a local folder"),
        ({"enabled": "yes"}, "Expected type"),
        ({"widget_starters": "How?"}, "list"),
        ({"widget_timeout": 0.5}, "outside 1–300 s"),
        ({"widget_timeout": "soon"}, "Expected type"),
        ({"widget_timeout": True}, "number of seconds"),
        ({"widget_search_ask": "no"}, "Expected type"),
        ({"widget_page_menu": ["copy", "gemini"]}, "gemini"),
        ({"widget_page_menu": "copy"}, "list"),
        ({"widget_ask_links": "no"}, "Expected type"),
    ],
)
def test_bad_options_are_reported(options: dict[str, object], message: str) -> None:
    errors, _ = load(options)
    assert errors and message in str(errors[0][1])


def test_widget_settings_carry_search_ask_and_the_timeout_in_ms() -> None:
    plugin = AnchoredPlugin()
    errors, _ = plugin.load_config({"widget_timeout": 45, "widget_search_ask": False})
    assert errors == []

    class Page:
        url = "guide/install/"

    settings = plugin.widget_settings(Page())  # type: ignore[arg-type]
    assert settings["timeout"] == 45000 and settings["search_ask"] is False
    assert settings["root"] == "../../"
    defaults = AnchoredPlugin()
    defaults.load_config({})
    assert defaults.widget_settings(Page())["timeout"] == 30000  # type: ignore[arg-type]
    assert defaults.widget_settings(Page())["search_ask"] is True  # type: ignore[arg-type]


def test_widget_settings_carry_the_page_menu_and_question_links() -> None:
    class Page:
        url = "guide/install/"

    defaults = AnchoredPlugin()
    defaults.load_config({})
    settings = defaults.widget_settings(Page())  # type: ignore[arg-type]
    assert settings["page_menu"] == ["copy", "view", "chatgpt", "claude", "mcp"]
    assert settings["ask_links"] is True
    plugin = AnchoredPlugin()
    errors, _ = plugin.load_config({"widget_page_menu": ["mcp", "copy"], "widget_ask_links": False})
    assert errors == []
    settings = plugin.widget_settings(Page())  # type: ignore[arg-type]
    assert settings["page_menu"] == ["mcp", "copy"] and settings["ask_links"] is False
    off = AnchoredPlugin()
    assert off.load_config({"widget_page_menu": []})[0] == []
    assert off.widget_settings(Page())["page_menu"] == []  # type: ignore[arg-type]


def test_config_starts_with_enabled() -> None:
    assert next(iter(AnchoredConfig._schema))[0] == "enabled"


def test_inject_widget_escapes_the_settings_and_defers_the_script() -> None:
    page = "<html><head><title>x</title></head><body>hi</body></html>"
    out = inject_widget(page, {"root": "../", "title": "</script><script>alert(1)</script>"})
    assert out.count("</head>") == 1
    config = re.search(r'id="anchored-config" type="application/json">(.*?)</script>', out, re.S)
    assert config is not None
    assert "</script><script>" not in config.group(1)
    assert json.loads(config.group(1))["title"] == "</script><script>alert(1)</script>"
    assert '<script type="module" src="../assets/anchored/anchored.js">' in out


def test_store_inside_site_dir_is_refused(tmp_path: Path) -> None:
    from mkdocs.config import load_config
    from mkdocs.exceptions import PluginError

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Hi\n")
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: t\nplugins:\n  - anchored:\n      store: site/index\n"
    )
    config = load_config(str(tmp_path / "mkdocs.yml"))
    with pytest.raises(PluginError, match="inside site_dir"):
        config.plugins.on_config(config)


def mkdocs_build(project: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q", *extra],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_mkdocs_build_writes_an_index_and_the_ask_box(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    shutil.copytree(FIXTURE, project)
    yml = project / "mkdocs.yml"
    text = yml.read_text()
    assert "plugins:\n  - search\n" in text
    yml.write_text(text.replace("plugins:\n  - search\n", "plugins:\n  - search\n  - anchored\n"))
    done = mkdocs_build(project)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((project / ".anchored" / "index" / "manifest.json").read_text())
    assert manifest["format"] == "anchored-index" and manifest["counts"]["chunks"] > 0
    site = project / "site"
    assert (site / "assets" / "anchored" / "anchored.js").exists()
    home = (site / "index.html").read_text()
    assert 'id="anchored-config"' in home
    # The index (with its model file) is never published with the pages.
    assert not list(site.rglob("*.onnx"))

    # A second, unchanged build redoes nothing.
    done = mkdocs_build(project, "-v")
    assert done.returncode == 0, done.stderr
    assert "anchored: index unchanged" in done.stderr + done.stdout

    # One page changed: rebuilt, and only its changed chunks are embedded again.
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + "\n\nA brand new closing paragraph about caching.\n")
    done = mkdocs_build(project, "-v")
    assert done.returncode == 0, done.stderr
    found = re.search(
        r"anchored: indexed \d+ chunks .*\((\d+) embedded, (\d+) from cache", done.stderr
    )
    assert found, done.stderr
    assert 1 <= int(found.group(1)) <= 2 and int(found.group(2)) > 10
