"""llms.txt, llms-full.txt and the Markdown twins on real built sites.

Five sites, each built once: the three shared real MkDocs sites
(``/work/shared/realdocs/{mkdocs,httpx,material}``, their plugins and hooks removed
as ``tests/bench/realdocs.py`` does), this project's docs built by MkDocs, and
this project's docs built by Zensical. They are built without the anchored plugin
(its index would cost a minute of embedding here) and given their files by
``write_llms_for_site`` (``anchored llms`` / ``anchored index --inject``); the
plugin's own build writes the same twins (``test_the_plugin_writes_what_the_static_path_writes``
on the qa site, built with the plugin in ``conftest.qa_project``).

On each: ``llms.txt`` passes a strict parser of the llmstxt.org format and lists
every twin once, in nav order; every link in ``llms.txt``, ``llms-full.txt`` and the
twins resolves to a built file (except those the page's own HTML already left
dangling); each twin keeps every code block with its language and every table
with its rows, page by page against the HTML; a second run rewrites nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from mkdocs_anchored.inject import write_llms_for_site

from build_index.llmstxt import LlmsOptions, LlmsReport, twin_path
from build_index.static_site import pages_from_site_dir
from tests.bench.realdocs import REALDOCS, rewrite_config
from tests.llms_check import (
    code_blocks,
    html_broken_targets,
    html_code_blocks,
    html_table_rows,
    links,
    parse_llms_txt,
    same_code,
    table_rows,
    target_file,
)

REPO = Path(__file__).resolve().parents[1]
SITES = ("mkdocs", "httpx", "material", "anchored", "anchored-zensical")


@dataclass(frozen=True)
class Built:
    name: str
    site: Path
    report: LlmsReport


def plain_config(yml: Path, project: Path) -> str:
    """A site's mkdocs.yml with its plugins, hooks and generators removed, ``search`` only."""
    text = rewrite_config(yml.read_text("utf-8"), root=project, model="unused")
    text = text.split("\n# Added by tests/bench/realdocs.py\n", 1)[0]
    return text + "\nsite_dir: built\nplugins:\n  - search\n"


def build_site(name: str, project: Path) -> Path:
    """Copy one site's sources into ``project`` and build it; the built site folder."""
    if name.startswith("anchored"):
        yml, docs = REPO / "mkdocs.yml", REPO / "site"
    else:
        yml = REALDOCS / name / "mkdocs.yml"
        docs = yml.parent / "docs"
        if not yml.is_file():
            pytest.skip(f"{yml} is not here (the shared real documentation sites)")
    shutil.copytree(docs, project / docs.name)
    (project / "mkdocs.yml").write_text(plain_config(yml, project), "utf-8")
    if name == "anchored-zensical":
        zensical = shutil.which("zensical", path=str(Path(sys.executable).parent))
        if zensical is None:
            pytest.skip("zensical is not installed")
        command = [zensical, "build"]
    else:
        command = [sys.executable, "-m", "mkdocs", "build", "-q"]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        command, cwd=project, capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return project / "built"


@pytest.fixture(scope="module", params=SITES)
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    name = request.param
    site = build_site(name, tmp_path_factory.mktemp(name) / "project")
    report = write_llms_for_site(site, LlmsOptions())
    return Built(name, site, report)


def test_llms_txt_follows_the_format_and_lists_every_twin_once(built: Built) -> None:
    parsed = parse_llms_txt((built.site / "llms.txt").read_text("utf-8"))
    assert parsed.title
    listed = [url for _, items in parsed.sections for _, url, _ in items]
    assert len(listed) == len(set(listed)) == built.report.pages > 0
    twins = {str(path.relative_to(built.site)) for path in built.site.rglob("*.md")}
    assert len(twins) == built.report.pages
    for _, items in parsed.sections:
        for title, url, notes in items:
            assert title.strip() and "\n" not in notes
            assert url.endswith(".md")
    first_section, first_items = parsed.sections[0]
    assert first_section == "Docs"
    if built.name != "mkdocs":  # its nav has no summary of the home page
        assert parsed.summary
    assert first_items[0][1].endswith("/index.md")  # the home page first, as in the nav


def test_every_link_resolves_to_a_built_file(built: Built) -> None:
    site = built.site
    base = parse_llms_txt((site / "llms.txt").read_text("utf-8")).sections[0][1][0][1]
    base = base[: -len("index.md")]  # the home page's twin is at the site root
    allowed: set[Path] = set()
    for page in pages_from_site_dir(site):
        allowed |= html_broken_targets(site, page)
    checked = 0
    broken: list[str] = []
    for path in [site / "llms.txt", site / "llms-full.txt", *site.rglob("*.md")]:
        for url in links(path.read_text("utf-8")):
            target = target_file(site, base, url)
            if target is None:
                continue
            checked += 1
            if not target.is_file() and target not in allowed:
                broken.append(f"{path.relative_to(site)}: {url}")
    assert checked > built.report.pages
    assert not broken, "\n".join(broken[:20])


def test_each_twin_keeps_every_code_block_and_table(built: Built) -> None:
    problems: list[str] = []
    code_total = 0
    for page in pages_from_site_dir(built.site):
        twin_file = built.site / twin_path(page.url)
        if not twin_file.is_file():
            continue
        twin = twin_file.read_text("utf-8")
        expected = html_code_blocks(page)
        got = code_blocks(twin)
        code_total += len(expected)
        if len(got) != len(expected):
            problems.append(f"{page.url}: {len(expected)} code blocks, twin has {len(got)}")
        else:
            for (language, code), (got_language, got_code) in zip(expected, got, strict=True):
                if language.lower() != got_language or not same_code(code, got_code):
                    problems.append(f"{page.url}: code block {language!r} -> {got_language!r}")
        if html_table_rows(page) != table_rows(twin):
            problems.append(f"{page.url}: table rows {html_table_rows(page)} -> {table_rows(twin)}")
    assert code_total > 0
    assert not problems, "\n".join(problems[:20])


def test_a_second_run_rewrites_nothing(built: Built) -> None:
    again = write_llms_for_site(built.site, LlmsOptions())
    assert again.written == () and again.unchanged == built.report.pages + 2


# -- the plugin's build, and the options ---------------------------------------------


def _outputs(site: Path) -> dict[str, str]:
    found = [*site.rglob("*.md"), *site.glob("llms*.txt")]
    return {str(path.relative_to(site)): path.read_text("utf-8") for path in found}


def test_the_plugin_writes_what_the_static_path_writes(qa_project: Path, tmp_path: Path) -> None:
    """``mkdocs build`` with the plugin (page.content, MkDocs' nav) and ``anchored llms``
    on the built pages (the whole HTML, the nav read from the home page) agree."""
    site = qa_project / "site"
    from_plugin = _outputs(site)
    assert {"llms.txt", "llms-full.txt", "index.md", "guide/configuration/index.md"} <= set(
        from_plugin
    )
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    for name in from_plugin:
        (copy / name).unlink()
    write_llms_for_site(copy, LlmsOptions())
    assert _outputs(copy) == from_plugin


def test_plugin_options_turn_each_file_off_and_exclude_pages(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(REPO / "tests" / "fixtures" / "qa-site", project)
    yml = project / "mkdocs.yml"
    text = yml.read_text("utf-8").replace(
        "  - anchored:\n",
        "  - anchored:\n      llms_twins: false\n      llms_full_txt: false\n"
        "      llms_exclude: ['notes/']\n      exclude: ['troubleshooting/']\n",
    )
    yml.write_text(text, "utf-8")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    site = project / "site"
    assert not list(site.rglob("*.md")) and not (site / "llms-full.txt").exists()
    parsed = parse_llms_txt((site / "llms.txt").read_text("utf-8"))
    urls = [url for _, items in parsed.sections for _, url, _ in items]
    # without twins llms.txt links the pages themselves; both exclusions apply
    assert "/guide/configuration/" in urls and "/" in urls
    assert not any("notes" in url or "troubleshooting" in url for url in urls)


def test_anchored_llms_command_and_its_flags(qa_project: Path, tmp_path: Path) -> None:
    from mkdocs_anchored.cli import main

    site = tmp_path / "site"
    shutil.copytree(qa_project / "site", site)
    for name in _outputs(site):
        (site / name).unlink()
    assert main(["llms", str(site), "--no-llms-full-txt", "--llms-exclude", "guide/*"]) == 0
    assert (site / "llms.txt").is_file() and not (site / "llms-full.txt").exists()
    assert (site / "troubleshooting" / "index.md").is_file()
    assert not (site / "guide" / "configuration" / "index.md").exists()
    base = "https://docs.example.test/"
    assert main(["llms", str(site), "--site-url", base, "--no-twins"]) == 0
    parsed = parse_llms_txt((site / "llms.txt").read_text("utf-8"))
    assert all(url.startswith(base) for _, items in parsed.sections for _, url, _ in items)


@pytest.mark.parametrize("theme", ["mkdocs", "readthedocs"])
def test_the_nav_of_other_themes_gives_the_same_llms_txt(
    qa_project: Path, tmp_path: Path, theme: str
) -> None:
    """The nav is read from the built home page: MkDocs' and Read the Docs' themes give
    the llms.txt the plugin wrote from MkDocs' own nav (Material)."""
    project = tmp_path / "project"
    shutil.copytree(REPO / "tests" / "fixtures" / "qa-site", project)
    yml = project / "mkdocs.yml"
    text = yml.read_text("utf-8")
    text = re.sub(r"theme:\n(?:  .*\n)+", f"theme:\n  name: {theme}\n", text)
    text = re.sub(r"  - anchored:\n(?:      .*\n)+", "", text)
    yml.write_text(text, "utf-8")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    write_llms_for_site(project / "site", LlmsOptions(llms_full_txt=False))
    ours = (project / "site" / "llms.txt").read_text("utf-8")
    assert ours == (qa_project / "site" / "llms.txt").read_text("utf-8")
