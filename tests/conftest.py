"""Shared fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import FakeOpenAIServer

SITE_FIXTURE = Path(__file__).parent / "fixtures" / "site-fixture"


@pytest.fixture(scope="session")
def fixture_site_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tests/fixtures/site-fixture`` built once with ``mkdocs build --strict``; the site dir."""
    site_dir = tmp_path_factory.mktemp("site-fixture") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--quiet",
            "-f",
            str(SITE_FIXTURE / "mkdocs.yml"),
            "-d",
            str(site_dir),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"mkdocs build of the fixture site failed:\n{result.stderr}")
    return site_dir


QA_SITE = Path(__file__).parent / "fixtures" / "qa-site"


@pytest.fixture(scope="session")
def qa_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tests/fixtures/qa-site`` copied and built once with the anchored plugin.

    The project folder holds ``site/`` (the built pages) and ``.anchored/index``.
    """
    import shutil

    project = tmp_path_factory.mktemp("qa") / "project"
    shutil.copytree(QA_SITE, project)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--quiet"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"mkdocs build of the qa site failed:\n{result.stderr}")
    return project


@pytest.fixture(scope="session")
def qa_index(qa_project: Path) -> Path:
    """The index folder of the built qa site."""
    return qa_project / ".anchored" / "index"


@pytest.fixture
def openai() -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible server over real HTTP (a test module may define its own,
    with other default replies)."""
    with FakeOpenAIServer() as srv:
        yield srv
