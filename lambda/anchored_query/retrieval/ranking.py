"""Recall-heavy hybrid retrieval: query variants x (dense, BM25), fused by rank.

Similarity is not relevance, so we keep a wide candidate set (hundreds of
passages within a token budget) and let the answerer judge. Passages are
grouped by page, adjacent child chunks of a section are merged, the parent
section is recovered where the budget allows, and every passage gets a global
number the model cites.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from anchored_query.question import crosslingual
from anchored_query.question.analysis import Question
from anchored_query.question.spelling import corrected
from anchored_query.types import Passage, Scope
from build_index.embedder import Embedder
from build_index.index_format import Index

RRF_K = 60

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class Hit:
    """One ranked chunk."""

    row: int
    score: float


class Ranking(list[Hit]):
    """Hits, best first, and how similar the best chunk in scope is to the question.

    ``best_similarity`` is the highest dense score (cosine) for the question as
    asked — the answerers' evidence that the docs speak about it at all;
    ``query_vector`` is that question's embedding (the extractive answerer
    compares it with sentences), None when dense retrieval did not run.
    """

    best_similarity: float = 0.0
    query_vector: np.ndarray | None = None
    # The English gloss searched for a Chinese question on docs in another language
    # (crosslingual.py), "" otherwise; best_similarity / query_vector are then the
    # better of the question's and the gloss's.
    gloss: str = ""
    # The language decision's extractive answer on these hits, with the languages it
    # was gathered over (languages.py): the answer step reuses it instead of
    # answering the same hits again.
    decided: tuple[tuple[str, ...], Any] | None = None


def rrf(rankings: Sequence[np.ndarray], n: int, k: int = RRF_K) -> np.ndarray:
    """Reciprocal-rank fusion of several rankings (arrays of row ids, best first)."""
    fused = np.zeros(n, dtype=np.float32)
    for ranking in rankings:
        if len(ranking):
            fused[ranking] += 1.0 / (k + 1 + np.arange(len(ranking), dtype=np.float32))
    return fused


def top_rows(scores: np.ndarray, k: int, mask: np.ndarray | None) -> np.ndarray:
    """Row ids of the ``k`` best scores (positive only for sparse scores), best first."""
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(-scores, k - 1)[:k]
    part = part[np.isfinite(scores[part])]
    ordered: np.ndarray = part[np.argsort(-scores[part], kind="stable")]
    return ordered


class Retriever:
    """Hybrid retrieval over one loaded index."""

    def __init__(self, index: Index, embedder: Embedder, per_variant: int = 400) -> None:
        self.index = index
        self.embedder = embedder
        self.per_variant = per_variant
        self.pages = np.array(index.chunks.pages, dtype=object)
        self._scope_cache: dict[tuple[Scope, tuple[str, ...]], np.ndarray | None] = {}
        self._langs: np.ndarray | None = None

    @property
    def langs(self) -> np.ndarray:
        """Each chunk's page language (``""`` unknown), row order (languages.py)."""
        if self._langs is None:
            self._langs = np.array(self.index.chunks.langs, dtype=object)
        return self._langs

    def mask(self, scope: Scope, langs: tuple[str, ...] = ()) -> np.ndarray | None:
        """Boolean row mask for a scope and, when ``langs`` names any, the chunks in
        those languages or of no known language (None = every chunk)."""
        if scope.is_whole_site() and not langs:
            return None
        cached = self._scope_cache.get((scope, langs))
        if cached is not None:
            return cached
        pages = self.pages
        keep = np.ones(len(pages), dtype=bool)
        if scope.include:
            keep &= np.array([p.startswith(scope.include) for p in pages], dtype=bool)
        if scope.exclude:
            keep &= ~np.array([p.startswith(scope.exclude) for p in pages], dtype=bool)
        if langs:
            keep &= np.isin(self.langs, [*langs, ""])
        if len(self._scope_cache) > 256:
            self._scope_cache.clear()
        self._scope_cache[(scope, langs)] = keep
        return keep

    def rank(
        self,
        variants: Sequence[str],
        scope: Scope = Scope(),
        depth: int | None = None,
        retrievers: Sequence[str] = ("dense", "bm25"),
        gloss: bool = True,
        langs: tuple[str, ...] = (),
        analysed: Question | None = None,
    ) -> Ranking:
        """Rank chunks for several phrasings of one question; best first.

        Per phrasing, dense and BM25 scores are fused by a convex combination
        of max-normalised scores (each retriever's best match counts 1, a
        non-match 0; equal weights) — it keeps how much better the best
        matches are, which reciprocal ranks throw away. Phrasings are then
        fused by reciprocal rank, so a rewrite adds candidates without
        drowning the question as asked.

        A Chinese question on docs in another language (``gloss``) is also
        searched as its dictionary gloss, and its CJK phrasings by dense
        retrieval only (their bigrams match nothing in such an index) — or not
        at all when the embedder does not place the question near its gloss.

        ``langs``: only chunks of pages in these languages (and of no known
        language); when none of them is written in CJK, a Chinese question is
        glossed as on an index without CJK.

        ``analysed``: the question analysed once (:mod:`.question.analysis`): each
        phrasing's terms, spelling and vector are read from it (and kept there).
        """
        analysed = analysed or Question.of(variants[0] if variants else "")
        n = len(self.index.chunks)
        ranking = Ranking()
        if n == 0:
            return ranking
        depth = depth or self.per_variant
        mask = self.mask(scope, langs)
        rankings: list[np.ndarray] = []
        last: np.ndarray | None = None
        texts = list(dict.fromkeys(v.strip() for v in variants if v.strip()))
        cross = gloss and bool(texts) and crosslingual.needs_gloss(texts[0], self.index.bm25)
        if gloss and langs and texts and not cross:
            cross = crosslingual.has_cjk(texts[0]) and not any(map(_cjk_language, langs))
        vectors: dict[str, np.ndarray] = {}
        glossed = crosslingual.Gloss()
        if cross:
            glossed = crosslingual.translate(texts[0], bm25=self.index.bm25)
            ranking.gloss = glossed.text
            if ranking.gloss:
                texts.append(ranking.gloss)
                if "dense" in retrievers:
                    vectors = {
                        t: analysed.vector(t, self.embedder.embed_query)
                        for t in (texts[0], ranking.gloss)
                    }
                    if not crosslingual.same_meaning(*vectors.values()):
                        # An embedder that does not place the question near its own
                        # translation (an English-only model) ranks noise for it.
                        texts = [t for t in texts if not crosslingual.has_cjk(t)]
        for text in texts:
            fused = np.zeros(n, dtype=np.float32)
            if "dense" in retrievers:
                vector = vectors.get(text)
                vector = (
                    analysed.vector(analysed.spelt(self.index, text), self.embedder.embed_query)
                    if vector is None
                    else vector
                )
                dense = self.index.dense_scores(vector)
                if not rankings or (ranking.gloss and text == ranking.gloss):
                    in_scope = dense if mask is None else dense[mask]
                    best = float(in_scope.max()) if len(in_scope) else 0.0
                    if not rankings or best > ranking.best_similarity:
                        ranking.best_similarity, ranking.query_vector = best, vector
                fused += _max_normalised(dense)
            # With a gloss (which keeps the question's Latin words), CJK bigrams
            # would only match the odd Chinese word of English docs.
            if "bm25" in retrievers and ranking.gloss and text == ranking.gloss:
                # One query term per Chinese word, however many senses glossed it.
                lexical = crosslingual.structured_scores(
                    self.index.bm25, glossed.groups, partial(corrected, self.index.bm25)
                )
                fused += _max_normalised(lexical)
            elif "bm25" in retrievers and not (ranking.gloss and crosslingual.has_cjk(text)):
                terms = analysed.corrected(self.index, text)  # typos: the index's spelling
                fused += _max_normalised(self.index.bm25.score(terms))
            rankings.append(top_rows(np.where(fused > 0, fused, -np.inf), depth, mask))
            last = fused
        if len(rankings) == 1 and last is not None:
            rows, scores = rankings[0], last
        else:
            scores = rrf(rankings, n)
            rows = top_rows(np.where(scores > 0, scores, -np.inf), depth, None)
        ranking.extend(Hit(int(r), float(scores[r])) for r in rows)
        return ranking

    def passages(
        self,
        hits: Sequence[Hit],
        *,
        token_budget: int,
        max_passages: int,
        estimate_tokens: TokenCounter,
    ) -> list[Passage]:
        """Turn ranked chunks into numbered passages within a token budget.

        Child chunks of one section are merged in reading order; when the whole
        parent section fits what is left of the budget it replaces its children.
        Passages are grouped by page (pages in order of their best hit) and
        numbered 1..n in that order.
        """
        chunks = self.index.chunks
        groups: dict[str, list[Hit]] = {}
        used = 0
        for hit in hits:
            chunk = chunks[hit.row]
            section_id = str(chunk["parent"])
            cost = estimate_tokens(_chunk_body(chunk))
            if used + cost > token_budget:
                break
            if section_id not in groups:
                if len(groups) >= max_passages:
                    continue
                groups[section_id] = []
            groups[section_id].append(hit)
            used += cost

        drafts: list[_Draft] = []
        for section_id, group in groups.items():
            group.sort(key=lambda h: chunks[h.row]["offsets"][0])
            draft = self._draft(section_id, group, token_budget - used, estimate_tokens)
            used += draft.extra_tokens
            drafts.append(draft)

        page_rank: dict[str, int] = {}
        for d in drafts:
            page_rank.setdefault(d.page, len(page_rank))
        drafts.sort(key=lambda d: page_rank[d.page])
        return [
            Passage(
                n=i + 1,
                chunk_ids=d.chunk_ids,
                section_id=d.section_id,
                page=d.page,
                anchor=d.anchor,
                title=d.title,
                heading_path=d.heading_path,
                text=d.text,
                highlight=d.highlight,
                score=d.score,
            )
            for i, d in enumerate(drafts)
        ]

    def _draft(
        self, section_id: str, group: list[Hit], spare: int, estimate_tokens: TokenCounter
    ) -> _Draft:
        chunks = self.index.chunks
        rows = [chunks[h.row] for h in group]
        best = rows[max(range(len(group)), key=lambda i: group[i].score)]
        text = "\n".join(_chunk_body(c) for c in rows)
        extra = 0
        section = self.index.sections.get(section_id)
        highlight = str(best["text"])
        if section is not None:
            parent = str(section["text"])
            start, end = best["offsets"]
            # The exact visible text on the page (a table chunk's text repeats the header).
            highlight = parent[start:end] or highlight
            parent_cost = estimate_tokens(parent) - estimate_tokens(text)
            if len(parent) > len(text) and 0 < parent_cost <= spare:
                text, extra = parent, parent_cost
        return _Draft(
            section_id=section_id,
            page=str(best["page"]),
            anchor=str(best["anchor"]),
            title=str(best["title"]),
            heading_path=[str(h) for h in best["heading_path"]],
            chunk_ids=[str(c["id"]) for c in rows],
            text=text,
            highlight=_SPACE.sub(" ", highlight).strip(),
            score=max(h.score for h in group),
            extra_tokens=extra,
        )


@dataclass
class _Draft:
    """A passage before it is numbered."""

    section_id: str
    page: str
    anchor: str
    title: str
    heading_path: list[str]
    chunk_ids: list[str]
    text: str
    highlight: str
    score: float
    extra_tokens: int


_SPACE = re.compile(r"\s+")
# Languages written in CJK characters (primary subtags): Chinese, Japanese, Korean.
_CJK_LANGUAGES = frozenset({"zh", "ja", "ko", "yue", "wuu", "cmn", "lzh", "hak", "nan"})


def _cjk_language(tag: str) -> bool:
    return tag.split("-", 1)[0] in _CJK_LANGUAGES


def _max_normalised(scores: np.ndarray) -> np.ndarray:
    """Scores divided by the best one; negative scores (and all, if none is positive) -> 0."""
    best = float(scores.max()) if len(scores) else 0.0
    if best <= 0:
        return np.zeros_like(scores, dtype=np.float32)
    out: np.ndarray = np.clip(scores / best, 0.0, 1.0).astype(np.float32)
    return out


def _chunk_body(chunk: Mapping[str, Any]) -> str:
    header = str(chunk.get("header") or "")
    text = str(chunk["text"])
    return f"{header}\n{text}" if header else text
