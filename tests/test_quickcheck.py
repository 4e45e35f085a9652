"""Unchanged rebuilds are answered before anything heavy is imported; build progress lines."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

from build_index.progress import LineProgress, TerminalBar, format_duration, progress_line
from build_index.quickcheck import inputs_digest, read_unchanged, write_stamp
from build_index.types import PageInput

FIXTURE = Path(__file__).parent / "fixtures" / "site-fixture"
HEAVY = ("numpy", "onnxruntime", "tokenizers", "selectolax", "Stemmer", "build_index.pipeline")

# Runs `mkdocs build` in-process, then prints which heavy modules it imported.
BUILD_AND_LIST_MODULES = (
    "import json, sys\n"
    "from mkdocs.__main__ import cli\n"
    "cli.main(args=['build', '-q'], standalone_mode=False)\n"
    f"print('HEAVY', json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
)


def _build(project: Path) -> tuple[list[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", BUILD_AND_LIST_MODULES],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    line = [x for x in done.stdout.splitlines() if x.startswith("HEAVY ")][-1]
    return json.loads(line[len("HEAVY ") :]), done.stderr


def test_an_unchanged_mkdocs_build_imports_nothing_heavy(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    shutil.copytree(FIXTURE, project)
    yml = project / "mkdocs.yml"
    yml.write_text(yml.read_text().replace("plugins:\n  - search\n", "plugins:\n  - anchored\n"))
    first, _ = _build(project)
    assert "numpy" in first and "build_index.pipeline" in first  # it did build
    stamp = json.loads((project / ".anchored" / "cache" / "build-stamp.json").read_text())
    manifest = json.loads((project / ".anchored" / "index" / "manifest.json").read_text())
    assert stamp["build_id"] == manifest["build_id"]

    again, _ = _build(project)
    assert again == []
    # llms.txt and the Markdown twins are written (from their cache) all the same
    assert (project / "site" / "llms.txt").is_file() and (project / "site" / "index.md").is_file()

    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + "\n\nOne more paragraph.\n")
    changed, _ = _build(project)
    assert "build_index.pipeline" in changed
    manifest2 = json.loads((project / ".anchored" / "index" / "manifest.json").read_text())
    assert manifest2["build_id"] != manifest["build_id"]


def _index(tmp_path: Path) -> tuple[Path, dict[str, object], Path]:
    index = tmp_path / "index"
    index.mkdir()
    (index / "chunks.jsonl").write_text('{"id": "a"}\n')
    manifest = {
        "build_id": "b1",
        "files": {"chunks.jsonl": {"sha256": "0" * 64, "size": 12}},
        "counts": {"chunks": 1},
    }
    (index / "manifest.json").write_text(json.dumps(manifest))
    model = tmp_path / "model.onnx"
    model.write_bytes(b"model")
    return index, manifest, model


def test_the_stamp_notices_a_changed_input_index_or_model(tmp_path: Path) -> None:
    index, manifest, model = _index(tmp_path)
    stamp = tmp_path / "cache" / "build-stamp.json"
    pages = [PageInput(url="a/", html="<p>x</p>", title="A")]
    digest = inputs_digest(pages, {"model": "m"})
    assert read_unchanged(stamp, digest, index) is None  # no stamp yet
    write_stamp(stamp, digest, index, manifest, model_files=[model], pages=1, warnings=["w"])
    found = read_unchanged(stamp, digest, index)
    assert found is not None and found.chunks == 1 and found.warnings == ["w"]

    other_page = [PageInput(url="a/", html="<p>y</p>", title="A")]
    assert read_unchanged(stamp, inputs_digest(other_page, {"model": "m"}), index) is None
    assert read_unchanged(stamp, inputs_digest(pages, {"model": "n"}), index) is None
    assert read_unchanged(stamp, digest, tmp_path / "elsewhere") is None

    (index / "chunks.jsonl").write_text('{"id": "ab"}\n')  # another size
    assert read_unchanged(stamp, digest, index) is None
    (index / "chunks.jsonl").write_text('{"id": "a"}\n')
    assert read_unchanged(stamp, digest, index) is not None

    model.write_bytes(b"another model")
    assert read_unchanged(stamp, digest, index) is None


def test_log_progress_is_one_line_every_few_seconds_with_rate_and_eta() -> None:
    lines: list[str] = []
    now = [0.0]
    progress = LineProgress(lines.append, every_s=5.0, clock=lambda: now[0])
    total = 1000
    for done in range(0, total + 1, 10):  # 100 batches, one every 0.2 s
        progress(done, total)
        now[0] += 0.2
    assert 3 <= len(lines) <= 6  # 20 s of work: not one line per batch
    assert lines[0] == "embedding 1000 chunks"
    assert "chunks/s" in lines[1] and "ETA" in lines[1]
    assert lines[-1].startswith("embedded 1000/1000 chunks (100%) in 20s")


def test_progress_line_and_durations() -> None:
    assert progress_line(250, 1000, 10.0) == (
        "embedded 250/1000 chunks (25%), 25.0 chunks/s, ETA 30s"
    )
    assert format_duration(185) == "3m 05s" and format_duration(3720) == "1h 02m"


def test_terminal_bar_redraws_in_place_and_ends_the_line() -> None:
    out = io.StringIO()
    now = [0.0]
    bar = TerminalBar(out, width=10, clock=lambda: now[0])
    for done in range(0, 101, 10):
        bar(done, 100)
        now[0] += 1.0
    text = out.getvalue()
    assert text.count("\r") >= 5 and text.endswith("\n")
    assert "[##########] embedded 100/100 chunks (100%)" in text
