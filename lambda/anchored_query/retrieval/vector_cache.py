"""The query function's embedder: the index's model, with the texts it embedded kept.

Answering a question embeds about ten of the best sections' lines at query time
(the extractive answer's semantic match: three quarters of its CPU), and the
sentence checks of an LLM answer embed more. Readers ask about the same sections
over and over, so the same lines come back: on the realdocs question sets, which
are all different questions, 20–48% of the lines an answer embeds were embedded for
an earlier one. :class:`CachingEmbedder` keeps the last :data:`CAPACITY` passage
vectors and the last :data:`QUERY_CAPACITY` query vectors of one loaded build by
their text (least recently used out), so a warm function embeds each only once.

A text's vector does not depend on the texts embedded with it (the embedder masks
padding; checked bit for bit in ``tests/test_vector_cache.py``), so an answer is the
same whether its lines came from the cache or not.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from build_index.embedder import Embedder

__all__ = ["CAPACITY", "QUERY_CAPACITY", "CachingEmbedder"]

#: Passage vectors kept (384 float32 each: with the query vectors and their tables
#: 7.6 MB for MiniLM, plus the texts, 0.6-4.3 MB; site/benchmarks.md).
CAPACITY = 4096
#: Query vectors kept (the same question asked again, a follow-up's earlier turn).
QUERY_CAPACITY = 512

FloatArray = npt.NDArray[np.float32]


class _LRU:
    """Vectors by text, the least recently used dropped past ``capacity``; thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._vectors: OrderedDict[str, FloatArray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, texts: Sequence[str]) -> list[FloatArray | None]:
        with self._lock:
            found = [self._vectors.get(t) for t in texts]
            for t, v in zip(texts, found, strict=True):
                if v is not None:
                    self._vectors.move_to_end(t)
            hits = sum(v is not None for v in found)
            self.hits += hits
            self.misses += len(texts) - hits
            return found

    def put(self, texts: Sequence[str], vectors: FloatArray) -> None:
        with self._lock:
            for t, v in zip(texts, vectors, strict=True):
                v = v.copy()
                v.setflags(write=False)  # shared between requests
                self._vectors[t] = v
                self._vectors.move_to_end(t)
            while len(self._vectors) > self.capacity:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    def __len__(self) -> int:
        return len(self._vectors)


class CachingEmbedder(Embedder):
    """An :class:`~build_index.embedder.Embedder` that keeps what it embedded (see the
    module). Calls with ``progress``, ``on_batch``, ``out`` or ``rows`` (the build's)
    bypass the cache."""

    def __init__(
        self,
        *args: Any,
        capacity: int = CAPACITY,
        query_capacity: int = QUERY_CAPACITY,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.passage_cache = _LRU(capacity)
        self.query_cache = _LRU(query_capacity)

    def forget(self) -> None:
        """Drop every kept vector (a benchmark measuring each path from cold)."""
        self.passage_cache.clear()
        self.query_cache.clear()

    def embed_passages(self, texts: Sequence[str], *args: Any, **kwargs: Any) -> FloatArray:
        if args or any(v is not None for v in kwargs.values()):
            return super().embed_passages(texts, *args, **kwargs)
        return self._cached(texts, self.passage_cache, super().embed_passages)

    def embed_query(self, text: str) -> FloatArray:
        vector: FloatArray = self._cached([text], self.query_cache, super().embed_queries)[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> FloatArray:
        return self._cached(texts, self.query_cache, super().embed_queries)

    def _cached(
        self, texts: Sequence[str], cache: _LRU, embed: Callable[[list[str]], FloatArray]
    ) -> FloatArray:
        texts = list(texts)
        found = cache.get(texts)
        missing = list(dict.fromkeys(t for t, v in zip(texts, found, strict=True) if v is None))
        if missing:
            fresh = embed(missing)
            cache.put(missing, fresh)
            made = dict(zip(missing, fresh, strict=True))
            found = [made[t] if v is None else v for t, v in zip(texts, found, strict=True)]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([v for v in found if v is not None]).astype(np.float32, copy=False)
