"""Build the real documentation sites with Anchored, and check the question sets against them.

``/work/shared/realdocs/{mkdocs,httpx,material}`` hold three real MkDocs projects
(``docs/`` + ``mkdocs.yml``, see its README). Each is copied to ``<out>/<site>/project``,
its ``mkdocs.yml`` is rewritten at the text level (``plugins:``, ``hooks:``, ``watch:``,
``extra_css:`` blocks, ``custom_dir:``, the ``mkdocs-click`` / ``mkautodoc`` extensions
and any ``site_dir:`` removed; ``plugins: [search, anchored]`` added; YAML tags such as
``!!python/name:`` are left for MkDocs to load) and built with ``mkdocs build``:

    <out>/<site>/site     the built HTML
    <out>/<site>/index    the Anchored index (``store`` option)
    <out>/<site>/cache    the embedding cache

The fourth site, ``anchored``, is this project's own docs (``site/`` + ``mkdocs.yml``).
A build is reused while its inputs (the source folder, the rewritten config, the model,
and the indexer's own code) are unchanged. ``--model NAME`` builds with another
embedding model into ``<out>/<NAME>/<site>``.

``--check`` verifies the question sets in ``tests/bench/data/realdocs/<site>.jsonl``:
every gold ref is a section of the built index (and has chunks), every fact occurs in
the text of one of its gold sections (whitespace normalised), and every line has the
fields and values of the format. It exits 1 listing the failures. Gold refs are written
as the API cites them: ``page/#anchor``, ``#anchor`` on the home page, and ``page/`` for
the untitled lead section of a page (section id ``page/#``).

    python tests/bench/realdocs.py                     # build all four (default model)
    python tests/bench/realdocs.py --sites httpx --model multilingual-e5-small
    python tests/bench/realdocs.py --check

The other sites (``EXTRA_SITES``: starlette, uvicorn, drf, hatch) are real projects'
``docs/`` and ``mkdocs.yml`` at the commits named below, unpacked from a clone into
``$ANCHORED_EXTRA_DOCS/<site>`` (default ``/tmp/anchored-bench/extradocs``); a snapshot
without some images needs the text files only:

    git -C REPO ls-tree -r --name-only REV -- docs mkdocs.yml | while read -r f; do
      mkdir -p "OUT/$(dirname "$f")"; git -C REPO show "REV:$f" > "OUT/$f" || rm "OUT/$f"
    done
    python tests/bench/realdocs.py --sites starlette uvicorn drf hatch
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
REALDOCS = REPO.parent / "shared" / "realdocs"
DATA = Path(__file__).resolve().parent / "data" / "realdocs"
DEFAULT_OUT = Path("/tmp/anchored-bench/realdocs")
DEFAULT_MODEL = "all-MiniLM-L6-v2"
SITES = ("mkdocs", "httpx", "material", "anchored")  # the development sets
# Real docs that are not in ../shared (the reader model's training corpora, issue 26):
# ``git archive`` of the project's docs/ and mkdocs.yml, unpacked in <EXTRA>/<site>.
# starlette: encode/starlette at cb8f84f5 (Version 0.47.3). uvicorn: encode/uvicorn at
# e6c7ce79, the quoted answer's fifth set, never tuned on (issue 25): its questions
# (data/realdocs/uvicorn.jsonl) were written before any answer was looked at.
# drf: encode/django-rest-framework at 751a19fe; hatch: pypa/hatch at ed8e30be (more
# training corpora for the reader; their snapshots lack some images, so the Markdown
# files and mkdocs.yml are unpacked one by one with ``git show``).
EXTRA = Path(os.environ.get("ANCHORED_EXTRA_DOCS", "/tmp/anchored-bench/extradocs"))
EXTRA_SITES = ("starlette", "uvicorn", "drf", "hatch")
STYLES = {"short", "long", "typo", "followup", "zh", "unanswerable"}

# Top-level keys whose whole block is dropped, and nested lines dropped alone.
_DROP_BLOCKS = ("plugins", "hooks", "watch", "extra_css", "site_dir")
_DROP_LINES = re.compile(r"^\s+custom_dir\s*:.*$")
_DROP_EXTENSIONS = ("mkdocs-click", "mkdocs_click", "mkautodoc")
# Code whose change changes the index (the embedding cache keeps a rebuild cheap).
_CODE_DIRS = ("build_index", "plugin")


def source_of(site: str) -> tuple[Path, Path]:
    """The site's ``mkdocs.yml`` and its docs folder."""
    root = EXTRA if site in EXTRA_SITES else REALDOCS
    yml = REPO / "mkdocs.yml" if site == "anchored" else root / site / "mkdocs.yml"
    if not yml.exists():
        raise SystemExit(f"{yml} is missing")
    return yml, yml.parent / docs_dir_of(yml.read_text("utf-8"))


def docs_dir_of(yml_text: str) -> str:
    match = re.search(r"^docs_dir:\s*['\"]?([^'\"\s#]+)", yml_text, re.M)
    return match.group(1) if match else "docs"


def site_root(out: Path, site: str, model: str = DEFAULT_MODEL) -> Path:
    """``<out>/<site>`` for the shipped model, ``<out>/<model>/<site>`` for another."""
    return out / site if model == DEFAULT_MODEL else out / model / site


def _drop_blocks(lines: list[str], keys: Iterable[str]) -> list[str]:
    """Remove top-level ``key:`` blocks: the key line and the lines under it.

    A block ends at the next line that starts at column 0 and is not a list item
    (``- x`` directly under the key); a column-0 comment ends it too, so the next
    block's heading comment stays.
    """
    keys = tuple(keys)
    out: list[str] = []
    dropping = False
    for line in lines:
        at_col0 = bool(line) and not line[0].isspace()
        if at_col0 and not line.startswith("- "):
            dropping = any(re.match(rf"{re.escape(k)}\s*:", line) for k in keys)
            if dropping:
                continue
        if dropping and (not at_col0 or line.startswith("- ") or not line.strip()):
            continue
        out.append(line)
    return out


def _drop_list_items(lines: list[str], names: Iterable[str]) -> list[str]:
    """Remove ``- name`` / ``- name:`` list items with the lines nested under them."""
    pattern = re.compile(
        r"^(\s*)-\s+['\"]?(" + "|".join(re.escape(n) for n in names) + r")['\"]?\s*:?\s*(#.*)?$"
    )
    out: list[str] = []
    skip_deeper_than: int | None = None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if skip_deeper_than is not None:
            if not line.strip() or indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        match = pattern.match(line)
        if match:
            skip_deeper_than = len(match.group(1))
            continue
        out.append(line)
    return out


def rewrite_config(yml_text: str, *, root: Path, model: str) -> str:
    """The site's ``mkdocs.yml`` with generators, hooks and plugins replaced by ours."""
    lines = yml_text.splitlines()
    lines = _drop_blocks(lines, _DROP_BLOCKS)
    lines = [line for line in lines if not _DROP_LINES.match(line)]
    lines = _drop_list_items(lines, _DROP_EXTENSIONS)
    text = "\n".join(lines).rstrip() + "\n"
    text += (
        "\n# Added by tests/bench/realdocs.py\n"
        f"site_dir: {json.dumps(str(root / 'site'))}\n"
        "plugins:\n"
        "  - search\n"
        "  - anchored:\n"
        f"      store: {json.dumps(str(root / 'index'))}\n"
        f"      cache_dir: {json.dumps(str(root / 'cache'))}\n"
        f"      model: {json.dumps(model)}\n"
    )
    return text


def _hash_tree(digest: Any, folder: Path, suffixes: tuple[str, ...] | None = None) -> None:
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        if suffixes and path.suffix not in suffixes:
            continue
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")


def inputs_hash(site: str, config_text: str, model: str) -> str:
    _, docs = source_of(site)
    digest = hashlib.sha256()
    digest.update(config_text.encode())
    digest.update(model.encode())
    _hash_tree(digest, docs)
    for name in _CODE_DIRS:
        _hash_tree(digest, REPO / name, (".py", ".json"))
    return digest.hexdigest()


def build(
    site: str,
    out: Path,
    model: str = DEFAULT_MODEL,
    *,
    force: bool = False,
    stale_ok: bool = False,
) -> Path:
    """Build one site (or reuse its build); return ``<root>`` holding site/ and index/.

    ``stale_ok`` reuses an existing build even when its inputs changed.
    """
    yml, docs = source_of(site)
    root = site_root(out, site, model).resolve()
    config_text = rewrite_config(yml.read_text("utf-8"), root=root, model=model)
    stamp_path = root / "stamp.json"
    digest = inputs_hash(site, config_text, model)
    previous: dict[str, Any] = {}
    if stamp_path.exists():
        previous = json.loads(stamp_path.read_text("utf-8"))
    unchanged = previous.get("inputs") == digest
    if not force and previous and (unchanged or stale_ok) and (root / "index").is_dir():
        state = "unchanged" if unchanged else "changed (stale_ok)"
        print(f"{site}: {state}, reusing {root}", file=sys.stderr)
        return root
    project = root / "project"
    if project.exists():
        shutil.rmtree(project)
    project.mkdir(parents=True)
    shutil.copytree(docs, project / docs.name)
    (project / "mkdocs.yml").write_text(config_text, "utf-8")
    cache_cold = not any((root / "cache").glob("*"))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("GOOGLE_ANALYTICS_KEY", None)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(project / "mkdocs.yml")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    (root / "build.log").write_text(proc.stdout + proc.stderr, "utf-8")
    if proc.returncode != 0 or not (root / "index" / "manifest.json").exists():
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise SystemExit(f"{site}: mkdocs build failed (exit {proc.returncode}):\n{tail}")
    stamp = {
        "inputs": digest,
        "model": model,
        "site": site,
        "build_s": round(seconds, 2),  # the whole mkdocs build, plugin included
        "cache_cold": cache_cold,  # True: every chunk was embedded in this build
    }
    # The last build that embedded everything (stamps without cache_cold were cold builds).
    if cache_cold:
        stamp["cold_build_s"] = stamp["build_s"]
    elif "cold_build_s" in previous:
        stamp["cold_build_s"] = previous["cold_build_s"]
    elif previous and previous.get("cache_cold", True):
        stamp["cold_build_s"] = previous["build_s"]
    stamp_path.write_text(json.dumps(stamp, indent=1), "utf-8")
    print(f"{site}: built in {seconds:.1f} s → {root}", file=sys.stderr)
    return root


# --- checking the question sets -------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.split())


def load_sections(index: Path) -> tuple[dict[str, str], set[str]]:
    """Section id → text, and the section ids that have at least one chunk."""
    sections: dict[str, str] = {}
    with open(index / "sections.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            sections[row["id"]] = row["text"]
    chunked: set[str] = set()
    with open(index / "chunks.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            chunked.add(f"{row['page']}#{row['anchor']}")
    return sections, chunked


def load_set(path: Path) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if line.strip():
                row = json.loads(line)
                row["_line"] = number
                rows.append(row)
    return rows


def check_set(rows: list[dict[str, Any]], index: Path) -> list[str]:
    """Every problem with one question set, as ``qid: message`` lines."""
    sections, chunked = load_sections(index)
    normed = {sid: _norm(text) for sid, text in sections.items()}
    problems: list[str] = []
    seen: set[str] = set()
    for row in rows:
        qid = str(row.get("qid", f"line {row['_line']}"))
        bad = problems.append
        if qid in seen:
            bad(f"{qid}: duplicate qid")
        seen.add(qid)
        for key, kind in (("question", str), ("gold_refs", list), ("answerable", bool)):
            if not isinstance(row.get(key), kind):
                bad(f"{qid}: '{key}' missing or not {kind.__name__}")
        if row.get("lang") not in ("en", "zh"):
            bad(f"{qid}: lang must be en or zh")
        if row.get("split") not in ("dev", "test"):
            bad(f"{qid}: split must be dev or test")
        if row.get("style") not in STYLES:
            bad(f"{qid}: style must be one of {sorted(STYLES)}")
        history = row.get("history", [])
        if not isinstance(history, list) or any(
            not isinstance(t, dict) or t.get("role") not in ("user", "assistant") for t in history
        ):
            bad(f"{qid}: history must be a list of {{role, content}} turns")
        if row.get("style") == "followup" and not history:
            bad(f"{qid}: a followup needs history")
        refs = [str(r).lstrip("/") for r in row.get("gold_refs", [])]
        facts = row.get("facts", [])
        if row.get("answerable"):
            if not refs:
                bad(f"{qid}: answerable without gold_refs")
            if not facts:
                bad(f"{qid}: answerable without facts")
        elif refs or facts:
            bad(f"{qid}: unanswerable with gold_refs or facts")
        # The API cites a page's untitled lead section as ``page/`` (no ``#``).
        refs = [ref if "#" in ref else ref + "#" for ref in refs]
        for ref in refs:
            if ref not in sections:
                bad(f"{qid}: gold ref {ref!r} is not a section of the index")
            elif ref not in chunked:
                bad(f"{qid}: gold ref {ref!r} has no chunk")
        for fact in facts:
            if not any(_norm(fact) in normed.get(ref, "") for ref in refs):
                bad(f"{qid}: fact {fact!r} is in none of its gold sections")
    return problems


def check(out: Path, sites: Iterable[str], model: str = DEFAULT_MODEL) -> int:
    failures = 0
    for site in sites:
        path = DATA / f"{site}.jsonl"
        if not path.exists():
            print(f"{site}: no question set at {path}")
            failures += 1
            continue
        index = build(site, out, model) / "index"  # reused while its inputs are unchanged
        rows = load_set(path)
        problems = check_set(rows, index)
        counts = summarise(rows)
        print(f"{site}: {len(rows)} questions {counts}: {len(problems)} problem(s)")
        for problem in problems:
            print(f"  {problem}")
        failures += len(problems)
    return 1 if failures else 0


def summarise(rows: list[dict[str, Any]]) -> str:
    def tally(key: str) -> str:
        values: dict[str, int] = {}
        for row in rows:
            values[str(row.get(key))] = values.get(str(row.get(key)), 0) + 1
        return ",".join(f"{k}={v}" for k, v in sorted(values.items()))

    return f"[split {tally('split')}; style {tally('style')}; answerable {tally('answerable')}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--sites", nargs="+", choices=SITES + EXTRA_SITES, default=list(SITES))
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--force", action="store_true", help="rebuild even when unchanged")
    parser.add_argument("--check", action="store_true", help="check the question sets")
    args = parser.parse_args(argv)
    if args.check:
        return check(args.out, args.sites, args.model)
    for site in args.sites:
        build(site, args.out, args.model, force=args.force)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
