"""The build pipeline: pages in, index out; unchanged inputs redo nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from build_index.index_format import read_index
from build_index.pipeline import BuildConfig, BuildFailed, build, embedding_text
from build_index.types import Chunk, PageInput


def pages(extra: str = "") -> list[PageInput]:
    return [
        PageInput(
            url="guide/",
            title="Guide",
            html=f'<h1 id="guide">Guide</h1><p>Install with pip.{extra}</p>'
            '<h2 id="port">Port</h2><p>The server listens on port 8000.</p>',
        ),
        PageInput(url="faq/", title="FAQ", html='<h1 id="faq">FAQ</h1><p>Ask anything.</p>'),
    ]


def test_unchanged_inputs_skip_the_build_and_changes_reuse_the_cache(tmp_path: Path) -> None:
    config = BuildConfig(cache_dir=tmp_path / "cache")
    first = build(pages(), tmp_path / "index", config)
    assert not first.unchanged and first.embedded == first.chunks > 0

    again = build(pages(), tmp_path / "index", config)
    assert again.unchanged and again.embedded == 0
    assert again.manifest and again.manifest["build_id"] == first.manifest["build_id"]  # type: ignore[index]

    changed = build(pages(" Then run it."), tmp_path / "index", config)
    assert not changed.unchanged
    assert changed.embedded == 1 and changed.cached == changed.chunks - 1


def test_a_tampered_index_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    config = BuildConfig(cache_dir=tmp_path / "cache")
    build(pages(), tmp_path / "index", config)
    (tmp_path / "index" / "chunks.jsonl").write_text("{}\n")  # another size
    report = build(pages(), tmp_path / "index", config)
    assert not report.unchanged
    assert len(read_index(tmp_path / "index").chunks) == report.chunks


def test_bad_pages_are_skipped_with_a_named_warning_or_fail_in_strict(tmp_path: Path) -> None:
    junk = PageInput(url="junk/", title="Junk", html="\x00\x01\x02" * 5000)
    report = build([*pages(), junk], tmp_path / "index", BuildConfig())
    assert report.pages_skipped == 1
    assert any("junk/" in w for w in report.warnings)
    with pytest.raises(BuildFailed, match="junk/"):
        build([*pages(), junk], tmp_path / "strict", BuildConfig(strict=True))
    assert not (tmp_path / "strict").exists()


def test_an_empty_site_gives_an_empty_loadable_index(tmp_path: Path) -> None:
    report = build([], tmp_path / "index", BuildConfig())
    assert report.chunks == 0 and report.warnings
    index = read_index(tmp_path / "index")
    assert len(index.chunks) == 0 and index.vectors.shape[0] == 0


def test_embedded_text_carries_the_heading_path() -> None:
    chunk = Chunk(
        id="p#a~0",
        page="p/",
        anchor="a",
        title="Config",
        heading_path=["Config", "Options"],
        type="table",
        text="port | 8000",
        parent="p/#a",
        offsets=(0, 11),
        header="name | value",
    )
    text = embedding_text(chunk)
    assert text.startswith("Config > Options\n") and "name | value\nport | 8000" in text


def test_excluded_pages_stay_out(tmp_path: Path) -> None:
    hidden = PageInput(
        url="secret/",
        title="S",
        html='<h1 id="s">S</h1><p>Hidden.</p>',
        meta={"search": {"exclude": True}},
    )
    build([*pages(), hidden], tmp_path / "index", BuildConfig(exclude=("faq/",)))
    rows = (tmp_path / "index" / "chunks.jsonl").read_text().splitlines()
    assert {json.loads(r)["page"] for r in rows} == {"guide/"}
