"""Build-side memory: what a large site's build must not hold all at once (issue 15.3).

At 100k chunks the token lists of every chunk, held together as Python lists,
cost hundreds of MB (about 3.6 KB a chunk on this project's docs); the BM25
builder takes an iterable and keeps only int32 ids, so the pipeline must hand it
the token lists one at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from build_index import pipeline
from build_index.bm25 import BM25Index
from build_index.index_format import read_index
from build_index.pipeline import BuildConfig, bm25_text, build
from build_index.reuse import chunk_from_record
from build_index.tokenizer import tokenize
from tests.pages import numbered_pages


def test_bm25_gets_the_token_lists_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = BM25Index.build
    seen: dict[str, Any] = {}

    def spy(token_lists: Iterable[Sequence[str]], *args: Any, **kwargs: Any) -> BM25Index:
        seen["lazy"] = iter(token_lists) is token_lists  # an iterator, not a held list
        seen["lists"] = [list(t) for t in token_lists]
        return real(seen["lists"], *args, **kwargs)

    monkeypatch.setattr(pipeline.BM25Index, "build", spy)
    report = build(numbered_pages(6), tmp_path / "index", BuildConfig(cache_dir=tmp_path / "cache"))
    assert seen["lazy"], "the pipeline materialised every chunk's tokens for BM25"

    index = read_index(tmp_path / "index")
    assert len(seen["lists"]) == report.chunks == len(index.chunks) > 0
    # the same tokens as the written chunk records give, in row order
    expected = [tokenize(bm25_text(chunk_from_record(r))) for r in index.chunks]
    assert seen["lists"] == expected
