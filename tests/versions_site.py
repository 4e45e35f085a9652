"""A small versioned site built by the real ``mike``: 1.0, then 2.0 with alias ``latest``.

A temporary git repository holds an MkDocs project (Material, mike's version
selector, the anchored plugin with a local store outside the repository). Its
``docs/`` differ between the versions (the default timeout is 10 s in 1.0 and
30 s in 2.0; 2.0 adds a page). ``mike deploy 1.0`` then
``ANCHORED_VERSION_ALIASES=latest mike deploy --update-aliases 2.0 latest``
commit the built sites to ``gh-pages``; the plugin, run by mike's ``mkdocs
build`` with ``MIKE_DOCS_VERSION`` set, writes each version's index to
``store/versions/<version>/`` and names it in ``store/versions.json``. The
``gh-pages`` tree is checked out into ``pages/`` for serving.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent

MKDOCS_YML = """\
site_name: Versioned Fixture
site_url: https://docs.example.test/
theme:
  name: material
extra:
  version:
    provider: mike
plugins:
  - search
  - anchored:
      store: ../store
      cache_dir: ../cache
      widget_starters: ["What is the default timeout?"]
nav:
  - Home: index.md
  - Configuration: configuration.md
{extra_nav}
"""

PAGES = {
    "1.0": {
        "index.md": "# Versioned Fixture\n\nVersioned Fixture is a small HTTP client.\n",
        "configuration.md": (
            "# Configuration\n\n"
            "## Timeout\n\n"
            "The `timeout` option sets how long one request may take before it fails. "
            "The default timeout is 10 seconds.\n\n"
            "## Retries\n\n"
            "Failed requests are not retried unless `retries` is set.\n"
        ),
    },
    "2.0": {
        "index.md": "# Versioned Fixture\n\nVersioned Fixture is a small HTTP client, now async.\n",
        "configuration.md": (
            "# Configuration\n\n"
            "## Timeout\n\n"
            "The `timeout` option sets how long one request may take before it fails. "
            "The default timeout is 30 seconds.\n\n"
            "## Retries\n\n"
            "Failed requests are retried twice by default; set `retries` to change it.\n"
        ),
        "streaming.md": (
            "# Streaming\n\n## Streaming responses\n\n"
            "Call `client.stream()` to read a response body in chunks as it arrives.\n"
        ),
    },
}


@dataclass(frozen=True)
class MikeSite:
    """Where the built versions are."""

    repo: Path  # the git repository (mkdocs.yml, docs/)
    store: Path  # the anchored store: versions.json, versions/<v>/
    pages: Path  # the gh-pages tree: versions.json, 1.0/, 2.0/, latest/


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout + result.stderr


def _write_version(repo: Path, version: str) -> None:
    docs = repo / "docs"
    shutil.rmtree(docs, ignore_errors=True)
    docs.mkdir(parents=True)
    for name, text in PAGES[version].items():
        (docs / name).write_text(text, encoding="utf-8")
    extra = "  - Streaming: streaming.md" if "streaming.md" in PAGES[version] else ""
    (repo / "mkdocs.yml").write_text(MKDOCS_YML.format(extra_nav=extra), encoding="utf-8")


def mike_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment mike runs in: no ANCHORED_* of the caller, the venv first on PATH."""
    base = {k: v for k, v in (env or os.environ).items() if not k.startswith("ANCHORED_")}
    base["PATH"] = f"{BIN}{os.pathsep}{base.get('PATH', '')}"  # mike runs `mkdocs build`
    base.update(
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.test",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.test",
    )
    return base


def mike_deploy(
    repo: Path, version: str, aliases: str = "", *, config: str = "", env: dict[str, str]
) -> str:
    """``ANCHORED_VERSION_ALIASES=aliases mike deploy [--update-aliases] version [aliases]``."""
    mike = shutil.which("mike", path=str(BIN)) or shutil.which("mike")
    if mike is None:
        raise RuntimeError("mike is not installed (pip install -e '.[dev]')")
    cmd = [mike, "deploy", *(["--config-file", config] if config else []), version]
    if aliases:
        cmd[2:2] = ["--update-aliases"]
        cmd.append(aliases)
    return _run(cmd, repo, {**env, "ANCHORED_VERSION_ALIASES": aliases})


def build_mike_site(root: Path, *, env: dict[str, str] | None = None) -> MikeSite:
    """Build both versions with the real mike under ``root``; returns where they are."""
    mike = shutil.which("mike", path=str(BIN)) or shutil.which("mike")
    if mike is None:
        raise RuntimeError("mike is not installed (pip install -e '.[dev]')")
    repo = root / "repo"
    repo.mkdir(parents=True)
    base = mike_env(env)
    git = ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]
    _run([*git, "init", "-q"], repo, base)
    (repo / ".gitignore").write_text("site/\n", encoding="utf-8")
    for version, aliases in (("1.0", ""), ("2.0", "latest")):
        _write_version(repo, version)
        _run([*git, "add", "-A"], repo, base)
        _run([*git, "commit", "-q", "-m", f"docs {version}"], repo, base)
        mike_deploy(repo, version, aliases, env=base)
    _run([mike, "set-default", "latest"], repo, base)
    pages = root / "pages"
    pages.mkdir()
    archive = subprocess.run(
        ["git", "archive", "gh-pages"], cwd=repo, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(pages)], input=archive, check=True)
    return MikeSite(repo=repo, store=root / "store", pages=pages)
