"""Anchored's llms.txt and Markdown twins beside mkdocs-llmstxt's, on the same real sites.

    pip install mkdocs-llmstxt        # the benchmark's peer (not a dependency)
    python tests/bench/bench_llmstxt.py [--sites mkdocs,httpx,material,anchored] [--runs 3]

Each site (the three shared real MkDocs sites in ``/work/shared/realdocs``, their
plugins and hooks removed as ``realdocs.py`` does, and this project's docs) is
built five ways with ``mkdocs build``, each into its own folder:

* ``search`` only (the baseline);
* ``search`` + ``llmstxt`` (mkdocs-llmstxt 0.5: ``sections: {Docs: ["*.md"]}``, every
  page, ``full_output: llms-full.txt``);
* ``search`` + ``anchored`` with ``llms_txt``, ``llms_full_txt`` and ``llms_twins``
  off; with them on (the default) and their cache removed before each build, so
  every file is made from the pages (as after an edit); and on with the cache (an
  unchanged build). The index is built once before (the embedding is not what is
  timed here): every timed build finds it unchanged.

A site without ``site_url`` gets ``https://docs.example.test/`` (mkdocs-llmstxt needs
one). The first table compares what each wrote, against the built HTML, page by page
(``tests/llms_check.py``, the checks ``test_llmstxt.py`` runs):

* pages: HTML pages that have a Markdown file beside them;
* size: the Markdown files, and llms-full.txt;
* code blocks kept: ``<pre>`` blocks of the pages' content found in the Markdown as
  fences with the same code; languages kept: of the blocks whose HTML declares a
  language (``language-X``), those whose fence carries it. Sections whose heading says
  ``data-search-exclude`` count too (Anchored leaves them out, as its index does);
* tables kept: HTML tables found as Markdown tables with the same number of rows;
* broken links: links into the site in llms.txt, llms-full.txt and the Markdown files
  that resolve to no built file (links the HTML itself left dangling not counted);
* llms.txt: passes the strict llmstxt.org parser; summaries: its items with notes.

The second table: the CPU time (user + sys) of each ``mkdocs build`` process, and its
wall time, medians of ``--runs`` rounds (each round builds every variant once, so a
busy spell on a shared machine slows all of them; CPU time is the steadier figure).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from selectolax.lexbor import LexborNode  # noqa: E402

from build_index.html import content_root  # noqa: E402
from build_index.llmstxt import CACHE_FILE, twin_path  # noqa: E402
from build_index.static_site import pages_from_site_dir  # noqa: E402
from tests.bench.realdocs import REALDOCS, rewrite_config  # noqa: E402
from tests.llms_check import (  # noqa: E402
    code_blocks,
    html_broken_targets,
    links,
    parse_llms_txt,
    table_rows,
    target_file,
)

WORK = Path("/tmp/anchored-bench/llmstxt")
SITES = ("mkdocs", "httpx", "material", "anchored")
PLACEHOLDER_URL = "https://docs.example.test/"
VARIANTS = ("search", "llmstxt", "anchored-off", "anchored-made", "anchored-on")
_LANGUAGE = re.compile(r"^language-(\S+)$")


@dataclass
class Output:
    pages: int = 0
    twin_bytes: int = 0
    full_bytes: int = 0
    code: int = 0
    code_kept: int = 0
    languages: int = 0
    languages_kept: int = 0
    tables: int = 0
    tables_kept: int = 0
    links: int = 0
    broken: int = 0
    llms_ok: bool = False
    items: int = 0
    summaries: int = 0


def project_for(site: str, root: Path) -> tuple[Path, str]:
    """The site's sources copied under ``root``; its plain mkdocs.yml text."""
    if site == "anchored":
        yml, docs = REPO / "mkdocs.yml", REPO / "site"
    else:
        yml = REALDOCS / site / "mkdocs.yml"
        docs = yml.parent / "docs"
    project = root / "project"
    if project.exists():
        shutil.rmtree(project)
    project.mkdir(parents=True)
    shutil.copytree(docs, project / docs.name)
    text = rewrite_config(yml.read_text("utf-8"), root=root, model="unused")
    text = text.split("\n# Added by tests/bench/realdocs.py\n", 1)[0]
    if not re.search(r"^site_url:", text, re.M):
        text += f"\nsite_url: {PLACEHOLDER_URL}\n"
    return project, text


def config_for(base: str, variant: str, root: Path) -> str:
    plugins = ["  - search"]
    if variant == "llmstxt":
        plugins += [
            "  - llmstxt:",
            "      full_output: llms-full.txt",
            "      sections:",
            "        Docs:",
            "          - '*.md'",
        ]
    elif variant.startswith("anchored"):
        flag = "false" if variant == "anchored-off" else "true"
        plugins += [
            "  - anchored:",
            f"      store: {json.dumps(str(root / 'index'))}",
            f"      cache_dir: {json.dumps(str(root / 'cache'))}",
            f"      llms_txt: {flag}",
            f"      llms_full_txt: {flag}",
            f"      llms_twins: {flag}",
        ]
    return base + f"\nsite_dir: built-{variant}\nplugins:\n" + "\n".join(plugins) + "\n"


def build(project: Path, config: str, variant: str) -> tuple[float, float]:
    """One ``mkdocs build`` of ``variant`` into ``built-<variant>``: (CPU, wall) seconds.

    ``anchored-made``: the llms files' cache is removed first, so they are made from
    the pages (as when pages changed); ``anchored-on`` finds it (an unchanged build)."""
    if variant == "anchored-made":
        (project.parent / "cache" / CACHE_FILE).unlink(missing_ok=True)
    yml = project / f"mkdocs-{variant}.yml"
    yml.write_text(config, "utf-8")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(yml)],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{variant} build failed:\n{result.stderr[-3000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return cpu, seconds


def measure(site_dir: Path, base: str) -> Output:
    """What one tool wrote into ``site_dir``, against the built HTML."""
    out = Output()
    allowed: set[Path] = set()
    markdown: list[Path] = []
    for page in pages_from_site_dir(site_dir):
        allowed |= html_broken_targets(site_dir, page)
        twin_file = site_dir / twin_path(page.url)
        if not twin_file.is_file():
            continue
        markdown.append(twin_file)
        twin = twin_file.read_text("utf-8")
        out.pages += 1
        out.twin_bytes += len(twin.encode())
        fences = Counter((lang.lower(), " ".join(code.split())) for lang, code in code_blocks(twin))
        texts = Counter(" ".join(code.split()) for _, code in code_blocks(twin))
        root = content_root(page)
        for pre in root.css("pre") if root is not None else []:
            code = " ".join(pre.text(deep=True).split())
            if not code:
                continue
            out.code += 1
            if texts[code] > 0:
                texts[code] -= 1
                out.code_kept += 1
            language = _language_of(pre)
            if language:
                out.languages += 1
                if fences[(language.lower(), code)] > 0:
                    fences[(language.lower(), code)] -= 1
                    out.languages_kept += 1
        expected = Counter(_html_tables(root))
        got = Counter(table_rows(twin))
        out.tables += sum(expected.values())
        out.tables_kept += sum(min(n, got[rows]) for rows, n in expected.items())
    full = site_dir / "llms-full.txt"
    out.full_bytes = full.stat().st_size if full.is_file() else 0
    llms = site_dir / "llms.txt"
    if llms.is_file():
        try:
            parsed = parse_llms_txt(llms.read_text("utf-8"))
            out.llms_ok = True
            out.items = sum(len(items) for _, items in parsed.sections)
            out.summaries = sum(1 for _, items in parsed.sections for *_, n in items if n)
        except ValueError as exc:
            print(f"  {site_dir}: llms.txt: {exc}", file=sys.stderr)
    for path in [llms, full, *markdown]:
        if not path.is_file():
            continue
        for url in links(path.read_text("utf-8")):
            target = target_file(site_dir, base, url)
            if target is None:
                continue
            out.links += 1
            if not target.is_file() and target not in allowed:
                out.broken += 1
    return out


def _language_of(pre: LexborNode) -> str:
    for node in (pre.css_first("code"), pre, pre.parent):
        names = (node.attributes.get("class") or "").split() if node is not None else []
        for name in names:
            match = _LANGUAGE.match(name)
            if match:
                return match.group(1)
    return ""


def _html_tables(root: LexborNode | None) -> list[int]:
    found: list[int] = []
    for table in root.css("table") if root is not None else []:
        if "highlighttable" in (table.attributes.get("class") or ""):
            continue
        rows = [
            tr
            for tr in table.css("tr")
            if any(c.text(deep=True).strip() or c.css_first("img") for c in tr.css("td, th"))
        ]
        if rows:
            found.append(len(rows) - 1)
    return found


def _site_url(config: str) -> str:
    match = re.search(r"^site_url:\s*['\"]?([^'\"\s#]+)", config, re.M)
    return (match.group(1) if match else PLACEHOLDER_URL).rstrip("/") + "/"


def _kb(n: int) -> str:
    return f"{n / 1024:,.0f} KB"


def _share(kept: int, total: int) -> str:
    return f"{kept}/{total} ({100 * kept / total:.0f}%)" if total else "–"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sites", default=",".join(SITES))
    p.add_argument("--runs", type=int, default=3, help="timed builds of each variant")
    p.add_argument("--work", type=Path, default=WORK)
    args = p.parse_args()
    try:
        import mkdocs_llmstxt  # noqa: F401
    except ImportError:
        raise SystemExit("pip install mkdocs-llmstxt (the benchmark's peer)") from None
    from importlib.metadata import version

    peer = f"mkdocs-llmstxt {version('mkdocs-llmstxt')}"
    results: dict[str, dict[str, Output]] = {}
    times: dict[str, dict[str, tuple[float, float]]] = {}
    for site in args.sites.split(","):
        root = (args.work / site).resolve()
        project, base_config = project_for(site, root)
        site_url = _site_url(base_config)
        print(f"{site}: building (index first, once) ...", file=sys.stderr, flush=True)
        build(project, config_for(base_config, "anchored-on", root), "anchored-on")
        runs: dict[str, list[tuple[float, float]]] = {variant: [] for variant in VARIANTS}
        for _ in range(args.runs):  # rounds: a busy spell slows every variant alike
            for variant in VARIANTS:
                config = config_for(base_config, variant, root)
                runs[variant].append(build(project, config, variant))
        times[site] = {
            variant: (
                statistics.median(cpu for cpu, _ in timed),
                statistics.median(wall for _, wall in timed),
            )
            for variant, timed in runs.items()
        }
        results[site] = {
            "anchored": measure(project / "built-anchored-on", site_url),
            "peer": measure(project / "built-llmstxt", site_url),
        }
    print(f"\nWhat each wrote (Anchored vs {peer}), against the built HTML\n")
    print(
        "| site | tool | pages | Markdown | llms-full.txt | code blocks kept | "
        "languages kept | tables kept | broken links | llms.txt format | summaries |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for site, outputs in results.items():
        for tool, o in (("Anchored", outputs["anchored"]), (peer, outputs["peer"])):
            print(
                f"| {site} | {tool} | {o.pages} | {_kb(o.twin_bytes)} | {_kb(o.full_bytes)} | "
                f"{_share(o.code_kept, o.code)} | {_share(o.languages_kept, o.languages)} | "
                f"{_share(o.tables_kept, o.tables)} | {o.broken} of {o.links} | "
                f"{'passes' if o.llms_ok else 'fails'} | {o.summaries}/{o.items} |"
            )
    print(
        f"\nmkdocs build: CPU seconds (user + sys), median of {args.runs} (wall seconds in "
        "brackets); Anchored's index unchanged in all three of its builds\n"
    )
    print(
        "| site | search only | + mkdocs-llmstxt | + Anchored, llms off | "
        "+ Anchored, llms made | + Anchored, llms unchanged |"
    )
    print("|---|---|---|---|---|---|")
    for site, t in times.items():
        cells = " | ".join(f"{t[v][0]:.2f} ({t[v][1]:.2f})" for v in VARIANTS)
        print(f"| {site} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
