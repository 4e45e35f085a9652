"""Shared fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
