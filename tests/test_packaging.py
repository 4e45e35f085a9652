"""The packaging configuration that keeps set-up output clean (issue 12 item 7): every
folder of the three packages that holds shipped files is a listed package (setuptools
warns, once per file, about data in a folder that is not: the wall of
``Package 'build_index.models' is absent from the packages configuration`` a newcomer
saw), and every data file is matched by package-data, so the wheel carries it. Checked
on the source tree: building a wheel takes an isolated build that downloads setuptools
(the venv's 65.5 refuses the SPDX license string; 76.1 builds it). A wheel built that
way on 2026-12-01 printed no warning and held every file below."""

from __future__ import annotations

import fnmatch
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
SETUPTOOLS = CONFIG["tool"]["setuptools"]


def _tracked(folder: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [Path(line) for line in out.splitlines() if line]


def _shipped() -> dict[str, list[str]]:
    """Dotted folder name -> the tracked files in it (relative to that folder). A folder
    whose name is no Python identifier (``models/all-MiniLM-L6-v2``) is data of the
    nearest folder above it that is (setuptools does not take it for a package)."""
    folders: dict[str, list[str]] = {}
    for package, source in SETUPTOOLS["package-dir"].items():
        for path in _tracked(source):
            parts = path.relative_to(source).parts
            depth = len(parts) - 1
            while depth and not all(p.isidentifier() for p in parts[:depth]):
                depth -= 1
            dotted = ".".join([package, *parts[:depth]])
            folders.setdefault(dotted, []).append("/".join(parts[depth:]))
    return folders


def test_every_folder_with_files_is_a_listed_package() -> None:
    folders = _shipped()
    assert {"build_index.models", "mkdocs_anchored.assets", "anchored_query.llm"} <= set(folders)
    missing = sorted(set(folders) - set(SETUPTOOLS["packages"]))
    assert not missing, f"folders with files that are not listed packages: {missing}"


def test_every_data_file_is_package_data() -> None:
    data = SETUPTOOLS["package-data"]
    unshipped = [
        f"{package}: {name}"
        for package, names in _shipped().items()
        for name in names
        if not name.endswith(".py")
        and not any(fnmatch.fnmatch(name, pattern) for pattern in data.get(package, []))
    ]
    assert not unshipped, f"tracked data files the wheel would leave out: {unshipped}"
    assert any(n.endswith("model.onnx") for n in _shipped()["build_index.models"])
