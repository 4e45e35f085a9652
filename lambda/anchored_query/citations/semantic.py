"""Semantic support: how close a sentence is in meaning to a passage it may cite.

:func:`make_support` gives :func:`anchored_query.citations.verify.verify` a callable
``(sentence, passage) -> 0..1``: the best cosine between the sentence's
embedding (the index's own model) and the passage's section chunks, or the
passage lines that share most of its terms (:func:`best_units`), put on one
scale per model by :data:`SEMANTIC_SCALE`. The other support tests (lexical,
pairing, polarity) are in :mod:`anchored_query.citations.support` and
:mod:`anchored_query.citations.polarity`.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from anchored_query.citations.sentences import is_cjk
from anchored_query.types import Passage
from build_index.tokenizer import tokenize

__all__ = [
    "SEMANTIC_SCALE",
    "UNITS_COMPARED",
    "SemanticSupport",
    "best_units",
    "make_support",
    "rescale",
]

# Per embedding model: (cosine mapped to 0, cosine mapped to 1, multilingual?), so that
# semantic support is on one scale for every model. Calibrated with
# tests/bench/calibrate_support.py; models not listed get no semantic test.
SEMANTIC_SCALE: dict[str, tuple[float, float, bool]] = {
    "all-MiniLM-L6-v2": (0.0, 1.0, False),
    "multilingual-e5-small": (0.8, 1.0, True),
}


class _Embedder(Protocol):
    def embed_query(self, text: str) -> npt.NDArray[np.float32]: ...

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


def make_support(embedder: _Embedder, model: str, index: Any = None) -> SemanticSupport | None:
    """Semantic support for :func:`anchored_query.citations.verify.verify`, or None for an
    uncalibrated ``model`` (see :class:`SemanticSupport`)."""
    scale = SEMANTIC_SCALE.get(model)
    if scale is None:
        return None
    return SemanticSupport(embedder, scale, index)


class SemanticSupport:
    """``(sentence, passage) -> 0..1``: how close the sentence is to the passage.

    The sentence is embedded once (cached, as a query) and compared with the
    vectors of the passage's section chunks in ``index`` (an
    :class:`build_index.index_format.Index`; the embedded passage text when the
    index has none) and with the :data:`UNITS_COMPARED` passage lines that share
    most of its terms (embedded once each). The best cosine is put on a common
    0..1 scale by :data:`SEMANTIC_SCALE`. NaN ("no opinion") for a sentence with
    CJK words when the model is not multilingual. :meth:`sections_only` leaves
    the lines out: the verifier uses it to search the whole context for a
    sentence that cites nothing, where a line matching by chance is likelier.
    """

    def __init__(self, embedder: _Embedder, scale: tuple[float, float, bool], index: Any) -> None:
        self.embedder = embedder
        self.low, self.high, self.multilingual = scale
        self.index = index
        self._sentences: dict[str, npt.NDArray[np.float32]] = {}
        self._primed: list[str] = []  # to embed together when the first of them is scored
        self._passages: dict[str, npt.NDArray[np.float32]] = {}
        self._units: dict[str, npt.NDArray[np.float32]] = {}

    def __call__(self, sentence: str, passage: Passage) -> float:
        return self._score(sentence, passage, units=True)

    def prime(self, sentences: Sequence[str]) -> None:
        """Name the sentences a check may score: the first one scored is embedded with
        all of them in one batch (one model run, not one each), and when no test gets as
        far as the semantic one, none is; an embedder without ``embed_queries`` embeds
        them as they come."""
        if getattr(self.embedder, "embed_queries", None) is None:
            return
        self._primed = list(dict.fromkeys(s for s in sentences if s not in self._sentences))

    def sections_only(self, sentence: str, passage: Passage) -> float:
        """The support by the passage's chunk vectors alone."""
        return self._score(sentence, passage, units=False)

    def _score(self, sentence: str, passage: Passage, *, units: bool) -> float:
        if not self.multilingual and _has_cjk_words(sentence):
            return math.nan
        vec = self._vector(sentence)
        key = passage.section_id + "\0" + "\0".join(passage.chunk_ids)
        pvecs = self._passages.get(key)
        if pvecs is None:
            pvecs = self._passages[key] = self._vectors(passage)
        cosine = float(np.max(pvecs @ vec))
        if units:
            cosine = max(cosine, self._unit_cosine(sentence, passage, vec))
        return rescale(cosine, self.low, self.high)

    def _vector(self, sentence: str) -> npt.NDArray[np.float32]:
        """The sentence's embedding (with the sentences primed beside it, in one batch)."""
        vec = self._sentences.get(sentence)
        if vec is not None:
            return vec
        if sentence in self._primed and len(self._primed) > 1:
            batch, self._primed = self._primed, []
            vectors = self.embedder.embed_queries(batch)  # type: ignore[attr-defined]
            self._sentences.update(zip(batch, vectors, strict=True))
            return self._sentences[sentence]
        vec = self._sentences[sentence] = self.embedder.embed_query(sentence)
        return vec

    def _vectors(self, passage: Passage) -> npt.NDArray[np.float32]:
        index = self.index
        rows = _section_rows(index, passage) if index is not None else []
        if rows:
            return np.stack([index.vectors[r].astype(np.float32) * index.scales[r] for r in rows])
        return self.embedder.embed_passages([passage.text or passage.highlight])

    def _unit_cosine(self, sentence: str, passage: Passage, vec: npt.NDArray[np.float32]) -> float:
        units = best_units(sentence, passage.text)
        missing = [u for u in units if u not in self._units]
        if missing:
            for u, v in zip(missing, self.embedder.embed_passages(missing), strict=True):
                self._units[u] = v
        return max((float(self._units[u] @ vec) for u in units), default=-1.0)


# Semantic support also compares a sentence with this many of the passage's own lines or
# sentences (those sharing most of its terms): a chunk vector averages a whole section,
# and a sentence restating one line of it scores low against it (recorded reply
# mkdocs-17: "The path must be relative to the location of the primary file.", copied
# from its passage, had cosine 0.24 with the section's chunks).
UNITS_COMPARED = 2
_UNIT_SPLIT = re.compile(r"\n+|(?<=[.!?。！？])\s+(?=\S)")


def best_units(sentence: str, text: str, k: int = UNITS_COMPARED) -> list[str]:
    """The ``k`` lines or sentences of ``text`` that share most content terms with
    ``sentence`` (at least one), in order of overlap."""
    terms = set(tokenize(sentence))
    if not terms:
        return []
    scored = []
    for position, unit in enumerate(u.strip() for u in _UNIT_SPLIT.split(text)):
        if len(unit) < 12:
            continue
        shared = len(terms & set(tokenize(unit)))
        if shared:
            scored.append((-shared, position, unit[:500]))
    return [unit for _, _, unit in sorted(scored)[:k]]


def _section_rows(index: Any, passage: Passage) -> list[int]:
    """Index rows of the passage's chunks and of every chunk of its section (``<id>~k``):
    the passage the model read is the section, the matched chunks are only part of it."""
    rows: list[int] = []
    for chunk_id in passage.chunk_ids:
        with contextlib.suppress(KeyError):
            rows.append(index.chunks.row_of(chunk_id))
    for k in range(_MAX_SECTION_CHUNKS):
        try:
            rows.append(index.chunks.row_of(f"{passage.section_id}~{k}"))
        except KeyError:
            break
    return list(dict.fromkeys(rows))


_MAX_SECTION_CHUNKS = 64


def rescale(cosine: float, low: float, high: float) -> float:
    """``cosine`` mapped linearly from ``[low, high]`` onto ``[0, 1]`` (clipped)."""
    return min(1.0, max(0.0, (cosine - low) / max(1e-9, high - low)))


def _has_cjk_words(text: str) -> bool:
    """A fifth of the letters or more are CJK: an English-only model reads noise
    ("支持的模型服务包括 OpenAI 和 Bedrock" is half Latin letters, all of them names)."""
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(is_cjk(c) for c in letters) * 5 >= len(letters)
