"""The build pipeline: pages in, index out; unchanged inputs redo nothing."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from s3server import S3Bucket, moto_s3, s3

from build_index.embedder import Embedder, get_model
from build_index.index_format import read_index
from build_index.pipeline import BuildConfig, BuildFailed, build, embedding_text
from build_index.reuse import chunk_from_record
from build_index.types import Chunk, PageInput

__all__ = ["moto_s3", "s3"]  # fixtures used by name


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


# -- the published build is the cache (issue 15) -------------------------------


def _vectors(index_dir: Path) -> np.ndarray:
    index = read_index(index_dir)
    return np.asarray(index.vectors, dtype=np.float32) * index.scales[:, None]


def test_a_fresh_folder_reuses_the_vectors_of_an_earlier_index(tmp_path: Path) -> None:
    build(pages(), tmp_path / "index", BuildConfig())  # no cache at all
    report = build(pages(" Then run it."), tmp_path / "index", BuildConfig())
    assert report.embedded == 1 and report.cached == 0
    assert report.reused == report.chunks - 1 and not report.reuse_refused


def test_reuse_from_names_another_index_folder(tmp_path: Path) -> None:
    build(pages(), tmp_path / "published", BuildConfig())
    config = BuildConfig(reuse_from=str(tmp_path / "published"))
    report = build(pages(" Then run it."), tmp_path / "fresh", config)
    assert report.embedded == 1 and report.reused == report.chunks - 1
    assert str(tmp_path / "published") in report.reused_from[0]


def test_the_reused_vectors_are_cached_locally(tmp_path: Path) -> None:
    build(pages(), tmp_path / "index", BuildConfig())
    config = BuildConfig(cache_dir=tmp_path / "cache")
    first = build(pages(" Then run it."), tmp_path / "index", config)
    assert first.reused == first.chunks - 1
    again = build(pages(" And stop it."), tmp_path / "other", config)
    assert again.cached == again.chunks - 1 and again.embedded == 1


def _corrupt_vectors(index_dir: Path) -> None:
    path = index_dir / "vectors.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # same size, another sha256
    path.write_bytes(bytes(data))


def _foreign_text_layout(index_dir: Path) -> None:
    manifest = json.loads((index_dir / "manifest.json").read_text())
    manifest["extra"]["embedding_text"] = 99
    (index_dir / "manifest.json").write_text(json.dumps(manifest))


def _foreign_model(index_dir: Path) -> None:
    manifest = json.loads((index_dir / "manifest.json").read_text())
    manifest["model"]["sha256"] = "0" * 64
    (index_dir / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_corrupt_vectors, "sha256"),
        (_foreign_text_layout, "text layout"),
        (_foreign_model, "another model"),
    ],
)
def test_a_corrupt_or_foreign_index_is_refused_naming_why(
    tmp_path: Path, damage: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    build(pages(), tmp_path / "index", BuildConfig())
    damage(tmp_path / "index")
    with caplog.at_level(logging.WARNING, logger="anchored"):
        report = build(pages(" Then run it."), tmp_path / "index", BuildConfig())
    assert report.reused == 0 and report.embedded == report.chunks
    assert len(report.reuse_refused) == 1 and reason in report.reuse_refused[0]
    assert any(reason in r.getMessage() and "not reused" in r.getMessage() for r in caplog.records)
    assert reason not in " ".join(report.warnings)  # not carried into the manifest


def test_an_index_of_non_unit_vectors_is_refused(tmp_path: Path) -> None:
    """Right checksums, wrong content: vectors that are not unit length are not reused."""
    from build_index.bm25 import BM25Index
    from build_index.embedder import get_model
    from build_index.index_format import ModelInfo, write_index
    from build_index.pipeline import EMBEDDING_TEXT_VERSION, BuildReport, collect_chunks

    spec = get_model()
    sections, chunks = collect_chunks(pages(), BuildConfig(), BuildReport())
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(len(chunks), spec.dim)).astype(np.float32)  # norms ~20
    write_index(
        tmp_path / "index",
        sections=sections,
        chunks=chunks,
        vectors=vecs,
        bm25=BM25Index.build([["x"]] * len(chunks)),
        model=ModelInfo.from_spec(spec),
        site_url=None,
        extra={"embedding_text": EMBEDDING_TEXT_VERSION},
    )
    report = build(pages(), tmp_path / "index", BuildConfig())
    assert report.reused == 0 and "not a unit vector" in report.reuse_refused[0]


def test_fresh_runner_against_s3_embeds_only_the_changed_chunks(
    tmp_path: Path, s3: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publish to a real (moto, HTTP) S3, change one page, rebuild in an empty folder with
    no cache: only the changed chunk is embedded and the index equals a cold build."""
    from build_index.publish import publish

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    first = build(pages(), tmp_path / "ci1" / "index", BuildConfig())
    publish(tmp_path / "ci1" / "index", s3.url)

    changed = pages(" Then run it.")
    runner = BuildConfig(cache_dir=tmp_path / "ci2" / "cache", reuse_from=s3.url)
    report = build(changed, tmp_path / "ci2" / "index", runner)
    assert report.embedded == 1 and report.cached == 0
    assert report.reused == report.chunks - 1 == first.chunks - 1
    assert report.reused_from and first.manifest is not None
    assert first.manifest["build_id"] in report.reused_from[0]

    cold = build(changed, tmp_path / "cold", BuildConfig())
    assert cold.embedded == cold.chunks
    new, published = read_index(tmp_path / "ci2" / "index"), read_index(tmp_path / "ci1" / "index")
    assert list(new.chunks) == list(read_index(tmp_path / "cold").chunks)
    # A reused row is the published int8 row exactly; the changed one is what the
    # embedder gives for its text (within fp16 tolerance).
    edited = [i for i, row in enumerate(new.chunks) if "Then run it" in row["text"]]
    same = [i for i in range(len(new.chunks)) if i not in edited]
    assert len(edited) == 1 and same
    assert np.array_equal(new.vectors[same], published.vectors[same])
    text = embedding_text(chunk_from_record(new.chunks[edited[0]]))
    alone = Embedder(get_model()).embed_passages([text])[0]
    assert np.abs(_vectors(tmp_path / "ci2" / "index")[edited[0]] - alone).max() < 2e-3
    # Against the cold build every row agrees to cosine 0.99: the int8 model quantises
    # activations per batch, so a text's vector moves by ~1e-2 with its batch-mates.
    cosines = (_vectors(tmp_path / "ci2" / "index") * _vectors(tmp_path / "cold")).sum(axis=1)
    assert cosines.min() > 0.99


def test_a_corrupt_published_build_in_s3_is_refused(
    tmp_path: Path, s3: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    from build_index.publish import Pointer, publish

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    build(pages(), tmp_path / "ci1" / "index", BuildConfig())
    publish(tmp_path / "ci1" / "index", s3.url)
    pointer = Pointer.from_json(s3.get("site/current.json"), "current.json")
    key = f"site/builds/{pointer.build_id}/vector_scales.npy"
    data = bytearray(s3.get(key))
    data[-1] ^= 0x40
    s3.client.put_object(Bucket=s3.name, Key=key, Body=bytes(data))

    runner = BuildConfig(reuse_from=s3.url)
    report = build(pages(" Then run it."), tmp_path / "ci2" / "index", runner)
    assert report.reused == 0 and report.embedded == report.chunks
    assert "vector_scales.npy" in report.reuse_refused[0]
    assert "sha256" in report.reuse_refused[0]


def test_a_warm_cache_missing_a_few_chunks_does_not_read_the_published_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import build_index.pipeline as pipeline

    config = BuildConfig(cache_dir=tmp_path / "cache")
    build(pages(), tmp_path / "index", config)
    opened: list[object] = []
    monkeypatch.setattr(pipeline, "open_published", lambda *a, **k: opened.append(a))
    report = build(pages(" Then run it."), tmp_path / "index", config)
    assert report.embedded == 1 and report.cached == report.chunks - 1 and opened == []
    report = build(pages(" Then run it."), tmp_path / "other", BuildConfig())  # no cache
    assert opened  # a cold cache does read it


def test_a_model_run_another_way_neither_hits_the_cache_nor_reuses(tmp_path: Path) -> None:
    # The same ONNX file run as it is (int8 kernels) instead of in float32 gives other
    # vectors; the cache and the published build are keyed by how the model is run.
    spec = get_model()
    as_is = tmp_path / "as-is"
    spec.copy_to(as_is)
    desc = json.loads((as_is / "anchored-model.json").read_text())
    assert desc["compute"] == "float32"
    del desc["compute"]
    (as_is / "anchored-model.json").write_text(json.dumps(desc))

    build(pages(), tmp_path / "index", BuildConfig(cache_dir=tmp_path / "cache"))
    other = BuildConfig(cache_dir=tmp_path / "cache", model=str(as_is))
    report = build(pages(" Then run it."), tmp_path / "index", other)
    assert report.cached == 0 and report.reused == 0 and report.embedded == report.chunks
    assert "compute" in report.reuse_refused[0]
