"""The ONNX embedder with the real shipped model, on small texts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from build_index.embedder import Embedder
from build_index.errors import ModelError
from build_index.hashing import sha256_file
from build_index.model_registry import (
    DESCRIPTOR_NAME,
    MINILM_SHA256,
    ModelSpec,
    get_model,
    known_models,
)


@pytest.fixture(scope="module")
def spec() -> ModelSpec:
    return get_model()


@pytest.fixture(scope="module")
def embedder(spec: ModelSpec) -> Embedder:
    return Embedder(spec, threads=2)


def _cpu_flags() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_default_model_spec(spec: ModelSpec) -> None:
    assert spec.name == "all-MiniLM-L6-v2"
    assert spec.dim == 384
    assert (spec.dtype, spec.pooling, spec.max_tokens) == ("int8", "mean", 256)
    assert spec.sha256 == MINILM_SHA256 == sha256_file(spec.path)
    assert spec.tokenizer_path.is_file()
    assert (spec.query_prefix, spec.passage_prefix) == ("", "")
    assert spec.compute == "float32"
    assert get_model("ALL-minilm-l6-v2") == spec
    described = spec.describe()
    assert "path" not in described and described["sha256"] == MINILM_SHA256


def test_shapes_dtype_and_normalisation(embedder: Embedder) -> None:
    texts = ["Install the plugin with pip.", "Configure the index store in mkdocs.yml.", "x"]
    vecs = embedder.embed_passages(texts)
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    q = embedder.embed_query("how to install")
    assert q.shape == (384,) and q.dtype == np.float32
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5
    assert embedder.embed_passages([]).shape == (0, 384)


def test_empty_and_whitespace_texts(embedder: Embedder) -> None:
    vecs = embedder.embed_passages(["", "   ", "\n", "real text here"])
    assert vecs.shape == (4, 384)
    assert np.isfinite(vecs).all()
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert embedder.embed_query("").shape == (384,)


def test_order_preserved_under_length_sorting(spec: ModelSpec) -> None:
    # tiny batches force many length-sorted batches; each text must get its own vector
    emb = Embedder(spec, threads=1, batch_size=2, token_budget=64, sort_window=5)
    texts = [
        "word " * 150,  # truncated at max_tokens
        "short",
        "a medium sized sentence about configuring the search index",
        "",
        "tiny",
        "another fairly long passage " * 10,
        "short",
    ]
    calls: list[tuple[int, int]] = []
    vecs = emb.embed_passages(texts, progress=lambda done, total: calls.append((done, total)))
    one_by_one = np.stack([emb.embed_passages([t])[0] for t in texts])
    # per-tensor dynamic activation scales differ with batch neighbours: a small drift
    # only (0.992 seen for the empty text on this kind of CPU), never another text's vector
    assert (np.sum(vecs * one_by_one, axis=1) > 0.98).all()
    sims = vecs @ one_by_one.T  # each row is nearest to its own text's vector
    assert [texts[int(j)] for j in sims.argmax(axis=1)] == texts
    assert calls[-1] == (len(texts), len(texts))
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert len(calls) >= 4


def test_tokenised_in_steps_same_as_at_once(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # texts are tokenised a few at a time (the tokenizer's Encodings of a whole
    # 8,192-text window held 300 MB at 100k chunks); the ids, hence the vectors, are
    # those of one encode_batch over all of them
    texts = ["word " * 300, "", "tiny", "a medium sized sentence about the index", "x y z"]
    whole = embedder._tokenizer.encode_batch(texts, add_special_tokens=True)
    monkeypatch.setattr("build_index.embedder._ENCODE_STEP", 2)
    ids, types = embedder._tokenize(texts)
    assert [list(map(int, a)) for a in ids] == [e.ids for e in whole]
    assert [list(map(int, a)) for a in types] == [e.type_ids for e in whole]
    assert len(ids[0]) == embedder.spec.max_tokens  # truncation kept
    stepped = embedder.embed_passages(texts)
    monkeypatch.setattr("build_index.embedder._ENCODE_STEP", 256)
    assert np.array_equal(stepped, embedder.embed_passages(texts))


def test_vectors_written_into_the_callers_array(embedder: Embedder) -> None:
    texts = ["first passage about ports", "second, on themes", ""]
    out = np.full((3, embedder.dim), np.nan, dtype=np.float32)
    assert embedder.embed_passages(texts, out=out) is out
    assert np.array_equal(out, embedder.embed_passages(texts))
    with pytest.raises(ValueError, match="expected float32"):
        embedder.embed_passages(texts, out=np.zeros((2, embedder.dim), dtype=np.float32))
    with pytest.raises(ValueError, match="expected float32"):
        embedder.embed_passages(texts, out=np.zeros((3, embedder.dim), dtype=np.float64))
    # rows: text i into row rows[i] of a larger array, the other rows untouched
    wide = np.full((5, embedder.dim), 7.0, dtype=np.float32)
    embedder.embed_passages(texts, out=wide, rows=np.array([4, 0, 2]))
    assert np.array_equal(wide[[4, 0, 2]], out) and (wide[[1, 3]] == 7.0).all()
    with pytest.raises(ValueError, match="rows has 2 entries"):
        embedder.embed_passages(texts, out=wide, rows=np.array([0, 1]))


def test_long_text_is_truncated_not_rejected(embedder: Embedder) -> None:
    long = "The deployment guide explains every step in detail. " * 400
    vec = embedder.embed_passages([long])
    assert vec.shape == (1, 384) and np.isfinite(vec).all()


def test_semantic_sanity(embedder: Embedder) -> None:
    a, para, other = embedder.embed_passages(
        [
            "How do I change the port of the development server?",
            "Which setting changes the port the local preview server listens on?",
            "Bananas are rich in potassium and easy to digest.",
        ]
    )
    assert cos(a, para) > cos(a, other) + 0.3
    q = embedder.embed_query("publish the index to S3")
    docs = embedder.embed_passages(
        [
            "Upload the built index to an S3 bucket with anchored publish.",
            "The widget shows citations as numbered links.",
        ]
    )
    assert cos(q, docs[0]) > cos(q, docs[1])


def _model_dir_copy(spec: ModelSpec, dest: Path, **changes: object) -> Path:
    spec.copy_to(dest)
    desc = json.loads((dest / DESCRIPTOR_NAME).read_text())
    desc.update(changes)
    (dest / DESCRIPTOR_NAME).write_text(json.dumps(desc))
    return dest


def test_prefixes_applied(spec: ModelSpec, embedder: Embedder, tmp_path: Path) -> None:
    prefixed = ModelSpec.from_dir(
        _model_dir_copy(
            spec, tmp_path / "e5like", query_prefix="query: ", passage_prefix="passage: "
        )
    )
    emb = Embedder(prefixed, threads=1)
    text = "where are the build logs"
    assert np.allclose(emb.embed_query(text), embedder.embed_passages(["query: " + text])[0])
    assert np.allclose(
        emb.embed_passages([text])[0], embedder.embed_passages(["passage: " + text])[0]
    )
    assert not np.allclose(emb.embed_query(text), emb.embed_passages([text])[0])


def test_compute_float32_folds_the_int8_weights(
    spec: ModelSpec, embedder: Embedder, tmp_path: Path
) -> None:
    # The shipped graph stores int8 weights behind DequantizeLinear nodes. Run as it
    # is, onnxruntime fuses them into int8 kernels (dynamically quantised
    # activations: other vectors, and other ones on another CPU); with the
    # descriptor's "compute": "float32" they are folded into float32 once.
    as_is = Embedder(ModelSpec.from_dir(_model_dir_copy(spec, tmp_path / "as-is", compute="")))
    texts = ["Set the bucket and the prefix in mkdocs.yml.", "def f(x): return x * 2"]
    folded, fused = embedder.embed_passages(texts), as_is.embed_passages(texts)
    assert not np.allclose(folded, fused, atol=1e-4)
    assert (folded * fused).sum(axis=1).min() > 0.98  # the same model all the same
    assert spec.session_entries() == {"session.disable_quant_qdq": "1"}
    assert "compute" not in replace(spec, compute="").describe()


def test_bad_compute_refused(spec: ModelSpec, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="compute 'int4'"):
        ModelSpec.from_dir(_model_dir_copy(spec, tmp_path / "c", compute="int4"))


@pytest.mark.skipif(
    shutil.which("valgrind") is None or "avx512" not in _cpu_flags(),
    reason="needs valgrind on an AVX-512 CPU (valgrind hides AVX-512, as a CPU without it)",
)
def test_same_vectors_without_avx512(spec: ModelSpec, embedder: Embedder, tmp_path: Path) -> None:
    # Builds run on CI runners with or without AVX-512, queries on arm64 Lambda; a
    # question must be embedded as its passages were. Under valgrind onnxruntime
    # takes the AVX2 kernels (tests/bench/bench_model_cpus.py adds arm64).
    texts = ["How do I keep a page out of the index?", "mkdocs serve --dev-addr 0.0.0.0:8000"]
    script = (
        "import sys, json, numpy as np\n"
        "from build_index.embedder import Embedder\n"
        "from build_index.model_registry import get_model\n"
        "v = Embedder(get_model()).embed_passages(json.loads(sys.argv[1]))\n"
        "np.save(sys.argv[2], v)\n"
    )
    out = tmp_path / "avx2.npy"
    subprocess.run(
        ["valgrind", "--tool=none", "-q", sys.executable, "-c", script, json.dumps(texts), out],
        check=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])),
    )
    elsewhere, here = np.load(out), embedder.embed_passages(texts)
    assert (elsewhere * here).sum(axis=1).min() > 0.99999


def test_from_dir_round_trip_and_bring_your_own(spec: ModelSpec, tmp_path: Path) -> None:
    names = spec.copy_to(tmp_path / "m")
    assert sorted(names) == sorted(["model.onnx", "tokenizer.json", DESCRIPTOR_NAME])
    loaded = ModelSpec.from_dir(tmp_path / "m")
    assert loaded.describe() == spec.describe()
    assert get_model(str(tmp_path / "m")).describe() == spec.describe()


def test_sha_mismatch_refused(spec: ModelSpec, tmp_path: Path) -> None:
    wrong = "0" * 64
    with pytest.raises(ModelError) as err:
        Embedder(replace(spec, sha256=wrong))
    assert wrong in str(err.value) and MINILM_SHA256 in str(err.value)

    # a modified file on disk (same descriptor) is caught too, despite the hash memo
    d = tmp_path / "tampered"
    spec.copy_to(d)
    with (d / "model.onnx").open("ab") as fh:
        fh.write(b"\0")
    with pytest.raises(ModelError, match="sha256"):
        Embedder(ModelSpec.from_dir(d))


def test_unknown_model_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="known models"):
        get_model("  ")
    with pytest.raises(ModelError) as err:
        get_model("no-such-model")
    for name in known_models():
        assert name in str(err.value)
    with pytest.raises(ModelError, match=r"does not exist|no directory"):
        get_model(str(tmp_path / "missing"))
    with pytest.raises(ModelError, match=DESCRIPTOR_NAME):
        get_model(str(tmp_path))  # a directory, but not a model directory


def test_bad_descriptor_refused(spec: ModelSpec, tmp_path: Path) -> None:
    d = _model_dir_copy(spec, tmp_path / "bad", pooling="max")
    with pytest.raises(ModelError, match="pooling"):
        ModelSpec.from_dir(d)
    (d / DESCRIPTOR_NAME).write_text("{not json")
    with pytest.raises(ModelError, match="JSON"):
        ModelSpec.from_dir(d)
    shutil.rmtree(d)


def test_wrong_dim_refused(spec: ModelSpec, tmp_path: Path) -> None:
    d = _model_dir_copy(spec, tmp_path / "dim", dim=768)
    emb = Embedder(ModelSpec.from_dir(d), threads=1)
    with pytest.raises(ModelError, match="768"):
        emb.embed_query("x")


def test_multilingual_missing_gives_instructions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANCHORED_MODEL_HOME", str(tmp_path))
    with pytest.raises(ModelError) as err:
        get_model("multilingual-e5-small")
    assert "anchored model install multilingual-e5-small" in str(err.value)
    assert str(tmp_path / "multilingual-e5-small") in str(err.value)


def test_multilingual_when_converted() -> None:
    """Runs where the multilingual model is installed (skipped elsewhere)."""
    try:
        e5 = get_model("multilingual-e5-small")
    except ModelError:
        pytest.skip("multilingual-e5-small not converted on this machine")
    assert (e5.query_prefix, e5.passage_prefix, e5.dim) == ("query: ", "passage: ", 384)
    emb = Embedder(e5, threads=2)
    q = emb.embed_query("如何把索引发布到 S3？")
    zh, en, other = emb.embed_passages(
        [
            "使用 anchored publish 命令将索引上传到 S3 存储桶。",
            "Use anchored publish to upload the index to an S3 bucket.",
            "香蕉富含钾。",
        ]
    )
    assert cos(q, zh) > cos(q, other) and cos(q, en) > cos(q, other)
