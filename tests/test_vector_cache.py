"""The query function's embedder keeps what it embedded (retrieval/vector_cache.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from anchored_query.engine import Engine
from anchored_query.retrieval.vector_cache import CachingEmbedder
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from starlette.testclient import TestClient

from build_index.embedder import Embedder, get_model

LINES = [
    "Timeouts: the default is five seconds for every operation.",
    "You can set a different timeout per request by passing timeout= to the call, "
    "which overrides the client's default, or disable it entirely with None.",
    "pip install httpx",
    "Proxies are configured with the proxy argument.",
]


@pytest.fixture(scope="module")
def plain() -> Embedder:
    return Embedder(get_model(), threads=1)


def test_a_cached_vector_is_the_vector_bit_for_bit(plain: Embedder) -> None:
    # A text's vector does not depend on what it was batched with, so an answer is the
    # same whether its lines came from the cache or not.
    cached = CachingEmbedder(get_model(), threads=1)
    first = cached.embed_passages(LINES[:2])
    again = cached.embed_passages([LINES[1], LINES[2], LINES[0], LINES[1]])
    assert cached.passage_cache.hits == 3 and cached.passage_cache.misses == 3
    expected = plain.embed_passages(LINES)
    assert np.array_equal(first, expected[:2])
    assert np.array_equal(again, expected[[1, 2, 0, 1]])
    assert np.array_equal(cached.embed_query(LINES[3]), plain.embed_query(LINES[3]))
    assert np.array_equal(cached.embed_queries(LINES[2:]), plain.embed_queries(LINES[2:]))
    assert cached.query_cache.hits == 1
    assert cached.embed_passages([]).shape == (0, plain.dim)


def test_what_a_caller_changes_does_not_change_the_cache(plain: Embedder) -> None:
    cached = CachingEmbedder(get_model(), threads=1)
    cached.embed_passages(LINES[:1])[0] *= 0  # a caller scaling its copy in place
    query = cached.embed_query(LINES[1])
    query *= 0
    assert np.array_equal(cached.embed_passages(LINES[:1]), plain.embed_passages(LINES[:1]))
    assert np.array_equal(cached.embed_query(LINES[1]), plain.embed_query(LINES[1]))


def test_the_least_recently_used_go_first(plain: Embedder) -> None:
    cached = CachingEmbedder(get_model(), threads=1, capacity=2)
    cached.embed_passages(LINES[:2])
    cached.embed_passages(LINES[:1])  # LINES[0] used again: LINES[1] is now the oldest
    cached.embed_passages(LINES[2:3])
    assert len(cached.passage_cache) == 2
    misses = cached.passage_cache.misses
    cached.embed_passages([LINES[0], LINES[2]])
    assert cached.passage_cache.misses == misses  # both kept
    cached.embed_passages(LINES[1:2])
    assert cached.passage_cache.misses == misses + 1  # dropped
    cached.forget()
    assert len(cached.passage_cache) == len(cached.query_cache) == 0


def test_the_builds_calls_bypass_it() -> None:
    cached = CachingEmbedder(get_model(), threads=1)
    out = np.zeros((2, cached.dim), dtype=np.float32)
    cached.embed_passages(LINES[:2], out=out)
    assert len(cached.passage_cache) == 0 and out.any()


def test_a_warm_function_embeds_a_repeated_questions_lines_once(
    qa_index: Path, tmp_path: Path
) -> None:
    engine = Engine(
        Settings(
            index=str(qa_index),
            cache_dir=str(tmp_path / "cache"),
            feedback=str(tmp_path / "feedback"),
            refresh_s=0,
            rate_limit_per_min=0,
        )
    )
    client = TestClient(create_app(engine.settings, engine=engine))
    question = {"question": "Which port does Skylark use by default?"}
    first = client.post("/v1/ask", json=question)
    embedder = engine.current().retriever.embedder
    assert isinstance(embedder, CachingEmbedder)
    cache = embedder.passage_cache
    assert first.status_code == 200 and cache.misses > 0 and cache.hits == 0
    misses = cache.misses
    again = client.post("/v1/ask", json=question)
    assert cache.misses == misses and cache.hits > 0
    assert again.json()["answer"] == first.json()["answer"]
