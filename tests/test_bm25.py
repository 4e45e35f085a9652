"""BM25 with precomputed weights: agrees with bm25s, round-trips through files."""

from __future__ import annotations

import json
from pathlib import Path

import bm25s
import numpy as np
import pytest

from build_index import bm25 as bm25_module
from build_index.bm25 import BM25Index, top_k_ids
from build_index.errors import IndexFormatError
from build_index.tokenizer import tokenize

# float16 weights: relative error per weight below 2**-11
RTOL = 2e-3


def random_corpus(n_docs: int, n_terms: int, seed: int) -> list[list[str]]:
    """Zipf-like random documents, as tokens."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_terms + 1)
    p /= p.sum()
    terms = np.array([f"t{i}" for i in range(n_terms)])
    return [list(rng.choice(terms, size=rng.integers(0, 60), p=p)) for _ in range(n_docs)]


def reference(corpus: list[list[str]], k1: float = 1.2, b: float = 0.75) -> bm25s.BM25:
    ref = bm25s.BM25(method="lucene", k1=k1, b=b)
    ref.index(corpus, show_progress=False)
    return ref


def assert_same_ranking(ours: np.ndarray, ref_scores: np.ndarray, k: int = 10) -> None:
    """Our top-k is bm25s's top-k, up to the order of near-ties."""
    ids = top_k_ids(ours.astype(np.float32), k)
    expected = np.argsort(-ref_scores, kind="stable")[:k]
    expected = expected[ref_scores[expected] > 0]
    assert len(ids) == len(expected)
    got = ref_scores[ids]
    # in bm25s's own scores, our ranking never goes up by more than the fp16 noise
    assert np.all(np.diff(got) <= RTOL * got[:-1] + 1e-6)
    assert got.min() >= ref_scores[expected].min() * (1 - RTOL) - 1e-6


@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (1.5, 0.3), (0.9, 1.0)])
def test_scores_and_top10_agree_with_bm25s_lucene(k1: float, b: float) -> None:
    corpus = random_corpus(400, 300, seed=1)
    ours = BM25Index.build(corpus, k1=k1, b=b)
    ref = reference(corpus, k1, b)
    rng = np.random.default_rng(2)
    for _ in range(40):
        query = [f"t{i}" for i in rng.integers(0, 300, size=rng.integers(1, 6))]
        expected = ref.get_scores(query)
        got = ours.score(query)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=1e-5)
        assert_same_ranking(got, expected)


def test_a_repeated_query_term_counts_each_time_like_bm25s() -> None:
    corpus = random_corpus(100, 50, seed=3)
    ours, ref = BM25Index.build(corpus), reference(corpus)
    query = ["t1", "t1", "t7"]
    np.testing.assert_allclose(ours.score(query), ref.get_scores(query), rtol=RTOL, atol=1e-5)
    np.testing.assert_allclose(
        ours.score(query), 2 * ours.score(["t1"]) + ours.score(["t7"]), rtol=1e-6
    )


def test_idf_and_length_normalisation_follow_lucene() -> None:
    index = BM25Index.build([["a", "b"], ["a"], ["c", "c", "c", "c"]])
    n, df, avgdl = 3, 2, 7 / 3
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    expected = idf * 1 / (1 + 1.2 * (1 - 0.75 + 0.75 * 2 / avgdl))
    assert index.score(["a"])[0] == pytest.approx(expected, rel=RTOL)
    assert index.params == {"k1": 1.2, "b": 0.75, "avgdl": pytest.approx(avgdl)}


def test_unknown_terms_score_zero() -> None:
    index = BM25Index.build(random_corpus(50, 20, seed=4))
    assert not index.score(["never-seen", "nor-this"]).any()
    assert index.score([]).shape == (50,)
    ids, scores = index.top_k(["never-seen"], 10)
    assert len(ids) == len(scores) == 0


def test_an_empty_corpus_builds_scores_and_round_trips(tmp_path: Path) -> None:
    index = BM25Index.build([])
    assert index.n_chunks == 0 and index.vocab == {} and index.avgdl == 0.0
    assert index.score(["x"]).shape == (0,)
    assert len(index.top_k(["x"], 5)[0]) == 0
    index.save(tmp_path)
    loaded = BM25Index.load(tmp_path)
    assert loaded.n_chunks == 0 and loaded.score(["x"]).shape == (0,)


def test_chunks_without_tokens_never_match() -> None:
    index = BM25Index.build([[], ["a"], []])
    np.testing.assert_array_equal(index.score(["a"]) > 0, [False, True, False])


def test_top_k_is_best_first_with_ties_broken_by_lower_id() -> None:
    index = BM25Index.build([["a"], ["b"], ["a"], ["a", "b"], ["c"]])
    ids, scores = index.top_k(["a"], 10)
    assert list(ids) == [0, 2, 3]  # 0 and 2 tie; 3 is longer
    assert scores[0] == scores[1] > scores[2] > 0
    assert list(index.top_k(["a"], 1)[0]) == [0]


def test_top_k_matches_a_full_sort_on_a_large_corpus() -> None:
    # large enough for the block-maximum pruning to kick in
    index = BM25Index.build(random_corpus(5000, 400, seed=5))
    rng = np.random.default_rng(6)
    for _ in range(20):
        query = [f"t{i}" for i in rng.integers(0, 400, size=3)]
        scores = index.score(query)
        for k in (1, 10, 100):
            ids, top = index.top_k(query, k)
            order = np.lexsort((np.arange(len(scores)), -scores))[:k]
            order = order[scores[order] > 0]
            np.testing.assert_array_equal(ids, order)
            np.testing.assert_array_equal(top, scores[order])


def test_a_mask_removes_chunks_from_the_results() -> None:
    index = BM25Index.build([["a"], ["a"], ["a", "b"]])
    mask = np.array([True, False, True])
    assert index.score(["a"], mask)[1] == 0
    assert 1 not in index.top_k(["a"], 3, mask)[0]
    with pytest.raises(ValueError, match="mask"):
        index.score(["a"], np.ones(2, dtype=bool))


def test_building_in_blocks_gives_the_same_index(monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = random_corpus(300, 100, seed=7)
    whole = BM25Index.build(corpus)
    monkeypatch.setattr(bm25_module, "_BLOCK_TOKENS", 50)  # many small blocks
    blocked = BM25Index.build(corpus)
    assert blocked.vocab == whole.vocab
    np.testing.assert_array_equal(blocked.indptr, whole.indptr)
    np.testing.assert_array_equal(blocked.indices, whole.indices)
    np.testing.assert_array_equal(blocked.data, whole.data)


def test_postings_are_term_major_csr_with_ascending_chunk_ids() -> None:
    index = BM25Index.build(random_corpus(200, 60, seed=8))
    assert index.indptr.dtype == np.int64 and len(index.indptr) == len(index.vocab) + 1
    assert index.indices.dtype == np.int32 and index.data.dtype == np.float16
    for row in range(len(index.vocab)):
        ids = index.indices[index.indptr[row] : index.indptr[row + 1]]
        assert np.all(np.diff(ids) > 0)
    assert np.all(index.data > 0)


@pytest.mark.parametrize("mmap", [True, False])
def test_save_and_load_round_trip(tmp_path: Path, mmap: bool) -> None:
    index = BM25Index.build([*random_corpus(100, 40, seed=9), ["ünïcödé", "配置"]])
    files = index.save(tmp_path)
    assert files == {
        "bm25_indptr.npy": "bm25-indptr",
        "bm25_indices.npy": "bm25-indices",
        "bm25_data.npy": "bm25-data",
        "vocab.json": "bm25-vocab",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)
    loaded = BM25Index.load(tmp_path, mmap=mmap)
    assert loaded.vocab == index.vocab
    assert (loaded.n_chunks, loaded.params) == (index.n_chunks, index.params)
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(index, name))
    np.testing.assert_array_equal(loaded.score(["t1", "配置"]), index.score(["t1", "配置"]))


def test_load_refuses_damaged_files(tmp_path: Path) -> None:
    BM25Index.build([["a", "b"], ["b"]]).save(tmp_path)
    meta = json.loads((tmp_path / "vocab.json").read_text())
    meta["terms"].append("extra")  # vocab no longer fits indptr
    (tmp_path / "vocab.json").write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match="do not fit"):
        BM25Index.load(tmp_path)
    (tmp_path / "vocab.json").write_text("{not json")
    with pytest.raises(IndexFormatError, match="rebuild"):
        BM25Index.load(tmp_path)


def test_an_exact_identifier_outranks_its_parts() -> None:
    chunks = [
        "Set use_directory_urls to false in mkdocs.yml.",
        "The directory holds the urls of every page, use it.",
        "Nothing relevant here.",
    ]
    index = BM25Index.build([tokenize(c) for c in chunks])
    ids, _ = index.top_k(tokenize("use_directory_urls"), 3)
    assert ids[0] == 0
    # ...and the words alone still find the identifier
    assert 0 in index.top_k(tokenize("directory urls"), 3)[0]
