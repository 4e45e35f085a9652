"""Index format v1: what write_index writes is what read_index gives back, and
read_index refuses any index it cannot trust, saying why."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from build_index import index_format, index_writer
from build_index.bm25 import BM25Index
from build_index.errors import IndexFormatError, ModelError
from build_index.index_format import (
    Index,
    JsonlRows,
    Manifest,
    ModelInfo,
    read_index,
    write_index,
)
from build_index.tokenizer import TOKENIZER_SETTINGS, tokenize
from build_index.types import Chunk, Section

DIM = 8


@pytest.fixture
def model(tmp_path: Path) -> ModelInfo:
    """A stand-in model folder: the format only copies and hashes these files."""
    source = tmp_path / "model-src"
    source.mkdir()
    (source / "model.onnx").write_bytes(b"not really onnx, but bytes to hash " * 100)
    (source / "tokenizer.json").write_text('{"model": {"type": "WordPiece"}}')
    return ModelInfo(
        name="test-model",
        sha256=hashlib.sha256((source / "model.onnx").read_bytes()).hexdigest(),
        dim=DIM,
        pooling="mean",
        max_tokens=256,
        query_prefix="query: ",
        passage_prefix="passage: ",
        source_dir=source,
    )


def make_site(n_pages: int = 3, seed: int = 0) -> tuple[list[Section], list[Chunk], np.ndarray]:
    """Pages of two sections with two chunks each, and normalised vectors."""
    sections: list[Section] = []
    chunks: list[Chunk] = []
    for p in range(n_pages):
        page = f"guide/page-{p}/" if p else ""
        for s, anchor in enumerate(["", f"setup-{p}"]):
            first, second = f"Install plugin {p}.{s}", f'Set "use_directory_urls" ü {p}'
            text = f"{first}\n{second}"
            sid = f"{page}#{anchor}"
            sections.append(
                Section(sid, page, anchor, f"Page {p}", [f"Page {p}", anchor], text, {"lang": "en"})
            )
            chunks.append(
                Chunk(
                    f"{sid}~0",
                    page,
                    anchor,
                    f"Page {p}",
                    [f"Page {p}"],
                    "text",
                    first,
                    sid,
                    (0, len(first)),
                )
            )
            chunks.append(
                Chunk(
                    f"{sid}~1",
                    page,
                    anchor,
                    f"Page {p}",
                    [f"Page {p}"],
                    "table",
                    second,
                    sid,
                    (len(first) + 1, len(text)),
                    header="| a | b |",
                    meta={"version": "1.0"},
                )
            )
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((len(chunks), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return sections, chunks, vectors


def write_site(out: Path, model: ModelInfo, n_pages: int = 3, seed: int = 0) -> Manifest:
    sections, chunks, vectors = make_site(n_pages, seed)
    bm25 = BM25Index.build([tokenize(c.text) for c in chunks])
    return write_index(
        out,
        sections=sections,
        chunks=chunks,
        vectors=vectors,
        bm25=bm25,
        model=model,
        site_url="https://docs.example.com/",
        extra={"chunking": {"max_tokens": 200}},
    )


def edit_manifest(index_dir: Path, **changes: Any) -> None:
    data = json.loads((index_dir / "manifest.json").read_text())
    data.update(changes)
    (index_dir / "manifest.json").write_text(json.dumps(data))


# -- round trip ----------------------------------------------------------------


def test_an_index_reads_back_what_was_written(tmp_path: Path, model: ModelInfo) -> None:
    sections, chunks, _ = make_site()
    manifest = write_site(tmp_path / "index", model)
    index = read_index(tmp_path / "index")

    assert index.manifest == manifest
    assert index.build_id == manifest["build_id"]
    assert len(index.chunks) == len(chunks)
    for row, chunk in zip(index.chunks, chunks, strict=True):
        assert row["id"] == chunk.id and row["text"] == chunk.text
        assert row["offsets"] == list(chunk.offsets)
        assert row["heading_path"] == chunk.heading_path
        assert row.get("header", "") == chunk.header and row.get("meta", {}) == chunk.meta
    assert index.chunks.ids == [c.id for c in chunks]
    assert index.chunks.pages == [c.page for c in chunks]
    assert index.chunks.row_of(chunks[3].id) == 3
    assert set(index.sections) == {s.id for s in sections}
    assert index.sections[sections[1].id]["text"] == sections[1].text
    assert index.sections.get("nope#nothing") is None


def test_the_manifest_describes_the_build(tmp_path: Path, model: ModelInfo) -> None:
    manifest = write_site(tmp_path / "index", model)
    assert (manifest["format"], manifest["version"]) == ("anchored-index", 1)
    assert len(manifest["build_id"]) == 16
    assert manifest["created"].endswith("Z")
    assert manifest["site_url"] == "https://docs.example.com/"
    assert manifest["model"] == {
        "name": "test-model",
        "sha256": model.sha256,
        "dim": DIM,
        "dtype": "int8",
        "pooling": "mean",
        "max_tokens": 256,
        "query_prefix": "query: ",
        "passage_prefix": "passage: ",
        "file": "model.onnx",
        "tokenizer_file": "tokenizer.json",
    }
    assert manifest["tokenizer"] == TOKENIZER_SETTINGS
    assert set(manifest["bm25"]) == {"k1", "b", "avgdl"}
    assert manifest["counts"] == {
        "pages": 3,
        "sections": 6,
        "chunks": 12,
        "vocab": manifest["counts"]["vocab"],
    }
    assert manifest["extra"] == {"chunking": {"max_tokens": 200}}
    on_disk = {p.name for p in (tmp_path / "index").iterdir()} - {"manifest.json"}
    assert set(manifest["files"]) == on_disk == index_format.REQUIRED_FILES
    for name, entry in manifest["files"].items():
        data = (tmp_path / "index" / name).read_bytes()
        assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def test_the_build_id_is_a_content_hash(tmp_path: Path, model: ModelInfo) -> None:
    first = write_site(tmp_path / "a", model)
    again = write_site(tmp_path / "b", model)
    other = write_site(tmp_path / "c", model, seed=1)
    assert first["build_id"] == again["build_id"] != other["build_id"]


def test_the_model_travels_with_the_index(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    index = read_index(tmp_path / "index")
    assert (index.model_dir / "model.onnx").read_bytes() == (
        model.source_dir / "model.onnx"
    ).read_bytes()
    assert (index.model_dir / "tokenizer.json").is_file()
    descriptor = json.loads((index.model_dir / "anchored-model.json").read_text())
    assert descriptor["sha256"] == model.sha256 and descriptor["onnx"] == "model.onnx"
    assert "source_dir" not in descriptor and str(model.source_dir) not in json.dumps(descriptor)


def test_vectors_are_int8_with_a_scale_per_row(tmp_path: Path, model: ModelInfo) -> None:
    _, _, vectors = make_site()
    write_site(tmp_path / "index", model)
    index = read_index(tmp_path / "index")
    assert index.vectors.dtype == np.int8 and index.vectors.shape == vectors.shape
    assert index.scales.dtype == np.float32
    restored = index.vectors.astype(np.float32) * index.scales[:, None]
    np.testing.assert_allclose(restored, vectors, atol=1 / 127)
    assert np.abs(index.vectors).max() == 127


def test_dense_scores_approximate_the_float_dot_product(tmp_path: Path, model: ModelInfo) -> None:
    _, _, vectors = make_site()
    write_site(tmp_path / "index", model)
    index = read_index(tmp_path / "index")
    query = vectors[4]
    scores = index.dense_scores(query)
    assert scores.dtype == np.float32 and scores.shape == (len(vectors),)
    np.testing.assert_allclose(scores, vectors @ query, atol=0.02)
    assert int(np.argmax(scores)) == 4
    with pytest.raises(ValueError, match="shape"):
        index.dense_scores(np.ones(DIM + 1, dtype=np.float32))


def test_bm25_reads_back_with_the_index(tmp_path: Path, model: ModelInfo) -> None:
    _, chunks, _ = make_site()
    write_site(tmp_path / "index", model)
    index = read_index(tmp_path / "index", mmap=False)
    expected = BM25Index.build([tokenize(c.text) for c in chunks])
    query = tokenize("use_directory_urls plugin")
    np.testing.assert_array_equal(index.bm25.score(query), expected.score(query))


def test_an_empty_site_gives_a_valid_index(tmp_path: Path, model: ModelInfo) -> None:
    manifest = write_index(
        tmp_path / "index",
        sections=[],
        chunks=[],
        vectors=np.zeros((0, DIM), np.float32),
        bm25=BM25Index.build([]),
        model=model,
        site_url=None,
    )
    index = read_index(tmp_path / "index")
    assert manifest["counts"] == {"pages": 0, "sections": 0, "chunks": 0, "vocab": 0}
    assert len(index.chunks) == 0 and len(index.sections) == 0
    assert index.vectors.shape == (0, DIM) and index.scales.shape == (0,)
    assert index.dense_scores(np.ones(DIM, np.float32)).shape == (0,)
    assert index.bm25.score(["anything"]).shape == (0,)
    assert index.chunks.ids == [] and index.chunks.pages == []


def test_inconsistent_inputs_are_refused(tmp_path: Path, model: ModelInfo) -> None:
    sections, chunks, vectors = make_site()
    bm25 = BM25Index.build([tokenize(c.text) for c in chunks])

    def write(**change: Any) -> None:
        args: dict[str, Any] = dict(
            sections=sections, chunks=chunks, vectors=vectors, bm25=bm25, model=model, site_url=None
        )
        write_index(tmp_path / "index", **{**args, **change})

    with pytest.raises(ValueError, match="shape"):
        write(vectors=vectors[:-1])
    with pytest.raises(ValueError, match="NaN"):
        write(vectors=np.full_like(vectors, np.nan))
    with pytest.raises(ValueError, match="BM25"):
        write(bm25=BM25Index.build([]))
    with pytest.raises(ValueError, match="twice"):
        write(chunks=[chunks[0], *chunks[:-1]])
    with pytest.raises(ValueError, match="parent"):
        write(sections=sections[1:])
    assert not (tmp_path / "index").exists()


def test_a_model_file_that_does_not_match_its_hash_is_refused(
    tmp_path: Path, model: ModelInfo
) -> None:
    wrong = ModelInfo(**{**model.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelError, match="sha256"):
        write_site(tmp_path / "index", wrong)
    missing = ModelInfo(**{**model.__dict__, "source_dir": tmp_path / "nowhere"})
    with pytest.raises(ModelError, match="missing"):
        write_site(tmp_path / "index", missing)
    assert not (tmp_path / "index").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["model-src"]  # no temp folder left


# -- refusing what cannot be trusted -------------------------------------------


def test_a_missing_index_says_how_to_build_one(tmp_path: Path) -> None:
    with pytest.raises(IndexFormatError, match=r"mkdocs build.*anchored index"):
        read_index(tmp_path / "nothing-here")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexFormatError, match=r"no manifest\.json.*mkdocs build"):
        read_index(tmp_path / "empty")


def test_an_unknown_version_is_refused(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    edit_manifest(tmp_path / "index", version=2)
    with pytest.raises(IndexFormatError) as err:
        read_index(tmp_path / "index")
    assert str(err.value) == (
        "index format version 2 is not supported by this Anchored (reads 1); "
        "rebuild the index or upgrade"
    )


def test_something_else_than_an_index_is_refused(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    edit_manifest(tmp_path / "index", format="something-else")
    with pytest.raises(IndexFormatError, match="not an Anchored index"):
        read_index(tmp_path / "index")
    (tmp_path / "index" / "manifest.json").write_text("{broken")
    with pytest.raises(IndexFormatError, match="not valid JSON"):
        read_index(tmp_path / "index")


def test_a_tampered_file_is_refused_by_name(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    path = tmp_path / "index" / "chunks.jsonl"
    data = bytearray(path.read_bytes())
    data[10] ^= 1  # same size, different content
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match=r"chunks\.jsonl.*sha256"):
        read_index(tmp_path / "index")
    read_index(tmp_path / "index", verify=False)  # sizes only: the caller's choice


def test_a_truncated_file_is_refused_even_without_hashing(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    path = tmp_path / "index" / "vectors.npy"
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(
        IndexFormatError, match=r"vectors\.npy in .* has 219 bytes, the manifest says 224"
    ):
        read_index(tmp_path / "index", verify=False)


def test_a_missing_file_is_refused_by_name(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    (tmp_path / "index" / "bm25_data.npy").unlink()
    with pytest.raises(IndexFormatError, match=r"bm25_data\.npy is missing"):
        read_index(tmp_path / "index")


def test_a_manifest_that_omits_a_file_is_refused(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    data = json.loads((tmp_path / "index" / "manifest.json").read_text())
    del data["files"]["vocab.json"]
    (tmp_path / "index" / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(IndexFormatError, match=r"does not list vocab\.json"):
        read_index(tmp_path / "index")


def test_an_edited_checksum_breaks_the_build_id(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    path = tmp_path / "index" / "chunks.jsonl"
    path.write_bytes(path.read_bytes().replace(b"Install", b"Inst4ll"))
    data = json.loads((tmp_path / "index" / "manifest.json").read_text())
    data["files"]["chunks.jsonl"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / "index" / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(IndexFormatError, match="altered"):
        read_index(tmp_path / "index")


def test_another_model_is_refused(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    read_index(tmp_path / "index", expected_model_sha256=model.sha256)
    with pytest.raises(IndexFormatError, match=r"test-model.*expected.*rebuild"):
        read_index(tmp_path / "index", expected_model_sha256="f" * 64)


def test_a_swapped_model_file_is_refused(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    data = json.loads((tmp_path / "index" / "manifest.json").read_text())
    data["model"]["sha256"] = "e" * 64  # the manifest names another model
    (tmp_path / "index" / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(IndexFormatError, match=r"model\.onnx is not the model"):
        read_index(tmp_path / "index")


def test_another_tokenizer_is_refused(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    edit_manifest(tmp_path / "index", tokenizer={**TOKENIZER_SETTINGS, "stemmer": "none"})
    with pytest.raises(IndexFormatError, match=r"tokenized.*stemmer.*rebuild"):
        read_index(tmp_path / "index")


def test_no_array_is_a_pickle(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    for path in (tmp_path / "index").glob("*.npy"):
        np.load(path, allow_pickle=False)  # raises on object arrays


# -- atomic replacement -------------------------------------------------------


def test_rewriting_replaces_the_index_and_leaves_nothing_beside_it(
    tmp_path: Path, model: ModelInfo
) -> None:
    write_site(tmp_path / "index", model, seed=0)
    second = write_site(tmp_path / "index", model, seed=1)
    assert read_index(tmp_path / "index").build_id == second["build_id"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "model-src"]


def test_a_crash_while_writing_keeps_the_previous_index(
    tmp_path: Path, model: ModelInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write_site(tmp_path / "index", model)

    def crash(*args: object) -> None:  # chunks and sections are on disk by now
        raise RuntimeError("power cut")

    monkeypatch.setattr(index_writer, "quantize", crash)
    with pytest.raises(RuntimeError, match="power cut"):
        write_site(tmp_path / "index", model, seed=1)
    assert read_index(tmp_path / "index").build_id == first["build_id"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "model-src"]


def test_a_failed_swap_puts_the_previous_index_back(
    tmp_path: Path, model: ModelInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write_site(tmp_path / "index", model)
    real_rename = os.rename

    def rename(src: Any, dst: Any) -> None:
        if ".tmp-" in str(src):
            raise OSError("disk full")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="disk full"):
        write_site(tmp_path / "index", model, seed=1)
    monkeypatch.undo()
    assert read_index(tmp_path / "index").build_id == first["build_id"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "model-src"]


def test_a_folder_that_is_not_an_index_is_never_replaced(tmp_path: Path, model: ModelInfo) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# My docs")
    with pytest.raises(IndexFormatError, match="not an Anchored index"):
        write_site(docs, model)
    assert (docs / "index.md").read_text() == "# My docs"


def test_an_open_index_keeps_working_after_a_rebuild(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model, seed=0)
    old = read_index(tmp_path / "index")
    write_site(tmp_path / "index", model, seed=1)
    assert old.dense_scores(np.ones(DIM, np.float32)).shape == (12,)
    assert old.chunks[0]["id"] == "#~0"


# -- JSON Lines rows ----------------------------------------------------------


def test_jsonl_rows_parse_escapes_and_fall_back_when_keys_are_reordered() -> None:
    rows = [
        {"id": 'a"b\\c', "page": "ü/\u2028/", "text": "line\nbreak"},
        {"id": "x", "page": "y", "text": ""},
    ]
    ours = JsonlRows(
        "".join(
            json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows
        ).encode(),
        "test",
    )
    assert list(ours) == rows and ours[-1] == rows[1] and ours[0:1] == rows[:1]
    assert ours.ids == ['a"b\\c', "x"] and ours.pages == ["ü/\u2028/", "y"]
    reordered = JsonlRows(b'{"page":"p","id":"i"}\n{"id":"j","page":"q"}', "test")
    assert reordered.ids == ["i", "j"] and reordered.pages == ["p", "q"]
    with pytest.raises(IndexError):
        ours[2]


def test_index_is_the_public_reader_type(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    assert isinstance(read_index(tmp_path / "index"), Index)


def test_page_meta_dates_are_written_as_text(tmp_path: Path, model: ModelInfo) -> None:
    sections, chunks, vectors = make_site(n_pages=1)
    day = datetime.date(2024, 5, 17)  # YAML front matter gives dates, not strings
    chunks = [Chunk(**{**c.__dict__, "meta": {"updated": day}}) for c in chunks]
    manifest = write_index(
        tmp_path / "index",
        sections=sections,
        chunks=chunks,
        vectors=vectors,
        bm25=BM25Index.build([tokenize(c.text) for c in chunks]),
        model=model,
        site_url=None,
        extra={"built": day},
    )
    index = read_index(tmp_path / "index")
    assert index.chunks[0]["meta"] == {"updated": "2024-05-17"}
    assert index.manifest == manifest and manifest["extra"] == {"built": "2024-05-17"}


def test_the_index_folder_is_readable_by_others(tmp_path: Path, model: ModelInfo) -> None:
    write_site(tmp_path / "index", model)
    assert (tmp_path / "index").stat().st_mode & 0o755 == 0o755
