"""Cited spans: the exact part of a passage that backs the sentence citing it.

A passage is a whole section (or the chunks of it the model read), but a sentence
is backed by one or two of its sentences, a code line or a table row. For each
answer item and each passage it cites, :func:`attach` picks that part and adds it
to the ``/v1/ask`` response as ``answer[i].spans`` (``[{n, highlight, link}]``,
one per entry of ``citations``); each citation's own ``highlight``/``link`` become
the span of the first item citing it.

- **LLM answers** (:func:`cited_span`): the section is cut into *pieces* — a
  prose line's sentences, a code block's lines, a table row (the units of
  :func:`anchored_query.citations.units.section_units`). Each piece is scored with the
  signals verification uses: the sentence's content terms the piece holds
  (:func:`anchored_query.citations.support.lexical_support`), its checkable facts
  (numbers, options, identifiers, code; :mod:`anchored_query.citations.facts`, counted
  double) and, when the engine gives one, the embedder's similarity. The best
  piece is grown to a neighbour (in code, across up to three lines) while that
  covers a term or fact the span does not hold yet, within
  :data:`MAX_SPAN_CHARS`. Nothing found (no term or fact in any piece): the
  passage's own highlight stays.
- **Extractive answers**: an item is a quoted unit; its span is the unit it
  was rendered from (:func:`anchored_query.citations.units.render`), inside the quoted window.

Every span is ``section_text[start:end]`` with whitespace runs collapsed: the
page's visible text, which the widget finds (``plugin/assets/text.js``) and from
which :func:`anchored_query.citations.links.citation_link` builds a text fragment unique on
the page (the page's text is the index's sections of that page, in order).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from anchored_query.citations.facts import Claim, Haystack, claims
from anchored_query.citations.links import OnPage, citation_link
from anchored_query.citations.sentences import sentence_spans
from anchored_query.citations.support import SEMANTIC_SCALE, content_terms, lexical_support, rescale
from anchored_query.citations.units import Unit, render, section_units
from anchored_query.types import Passage

__all__ = ["MAX_SPAN_CHARS", "Piece", "Similarity", "attach", "cited_span", "make_similarity"]

# A span grows only while it stays this short (a long code block may exceed it by one line).
MAX_SPAN_CHARS = 700
# Neighbouring code lines a span may bridge to reach a line that backs the sentence.
CODE_BRIDGE = 3
# A neighbour joins the span only when it covers this much more of the sentence.
MIN_GAIN = 0.1
# Pieces scored by the embedder (the best by terms and facts), per sentence and passage.
SEMANTIC_CANDIDATES = 6
SEMANTIC_WEIGHT = 0.25
PREVIEW_CHARS = 600  # citations.PREVIEW_CHARS: the preview is the span, cut

# (sentence, piece texts) -> similarity 0..1 of each piece (NaN: no opinion).
Similarity = Callable[[str, Sequence[str]], list[float]]


@dataclass(frozen=True)
class Piece:
    """``section_text[start:end]``: one sentence, code line or table row; ``unit``
    numbers the section unit it belongs to (a code run, a paragraph, a row)."""

    start: int
    end: int
    kind: str
    unit: int


@dataclass(frozen=True)
class _Source:
    text: str  # the section's whole text
    units: list[Unit]
    region: list[tuple[int, int]]  # the parts the model read ([(0, len)] for all)


def _collapse(text: str) -> str:
    return " ".join(text.split())


def pieces(text: str, units: Sequence[Unit]) -> list[Piece]:
    """The pieces of a section: each prose sentence, each non-blank code line, each row."""
    out: list[Piece] = []
    for k, u in enumerate(units):
        if u.kind == "header" or (u.kind == "row" and u.text == u.header):
            continue
        raw = text[u.start : u.end]
        if u.kind == "prose":
            parts = [(s.start, s.end) for s in sentence_spans(raw) if s.text.strip()]
        elif u.kind == "code":
            parts = []
            offset = 0
            for line in raw.split("\n"):
                if line.strip():
                    lead = len(line) - len(line.lstrip())
                    parts.append((offset + lead, offset + len(line.rstrip())))
                offset += len(line) + 1
        else:
            parts = [(len(raw) - len(raw.lstrip()), len(raw.rstrip()))]
        out += [Piece(u.start + a, u.start + b, u.kind, k) for a, b in parts if b > a]
    return out


class _Sentence:
    def __init__(self, text: str) -> None:
        self.text = text
        self.is_code = text.startswith(("```", "~~~"))
        body = text
        if self.is_code:
            body = text.split("\n", 1)[1] if "\n" in text else ""
            body = re.sub(r"\n[ \t]*(?:`{3,}|~{3,})[ \t]*$", "", body)
        self.body = body
        self.terms = content_terms(body)
        self.claims: list[Claim] = claims(text)


def _bare(text: str) -> Passage:
    return Passage(0, [], "", "", "", "", [], text, "")


class _Scorer:
    """Coverage of one sentence by groups of pieces of one section (terms and facts)."""

    def __init__(self, sentence: _Sentence, src: _Source, ps: list[Piece]) -> None:
        self.s = sentence
        self.src = src
        self.ps = ps
        self.piece_terms = [content_terms(src.text[p.start : p.end]) for p in ps]
        self.piece_facts = [
            {i for i, c in enumerate(sentence.claims) if Haystack(_bare(self._text(p))).has(c)}
            for p in ps
        ]

    def _text(self, p: Piece) -> str:
        return self.src.text[p.start : p.end]

    def coverage(self, lo: int, hi: int) -> float:
        """Share of the sentence's terms and facts (facts count double) in pieces lo..hi."""
        s = self.s
        body: set[str] = set().union(*self.piece_terms[lo : hi + 1])
        lexical = lexical_support(s.terms, body, set()) if s.terms else None
        n_terms = len(s.terms) if lexical is not None else 0
        facts = len(set().union(*self.piece_facts[lo : hi + 1]))
        total = n_terms + 2 * len(s.claims)
        return ((lexical or 0.0) * n_terms + 2 * facts) / total if total else 0.0


def cited_span(
    sentence: str, src: _Source, similarity: Similarity | None = None
) -> tuple[int, int] | None:
    """``[start, end)`` in the section text of the part that backs ``sentence`` (None: none)."""
    ps = [p for p in pieces(src.text, src.units) if _inside(p, src.region)]
    if not ps:
        return None
    s = _Sentence(sentence)
    scorer = _Scorer(s, src, ps)
    score = [scorer.coverage(i, i) for i in range(len(ps))]
    if max(score) <= 0:
        return None
    if similarity is not None and not s.is_code:
        top = sorted(range(len(ps)), key=lambda i: -score[i])[:SEMANTIC_CANDIDATES]
        sims = similarity(sentence, [src.text[ps[i].start : ps[i].end] for i in top])
        for i, sim in zip(top, sims, strict=True):
            if not math.isnan(sim) and score[i] > 0:
                score[i] = (1 - SEMANTIC_WEIGHT) * score[i] + SEMANTIC_WEIGHT * sim
    allowed = set(range(len(ps)))
    if s.is_code:
        # A code block backs by its lines: those the block repeats (the index does not
        # always know a small code block from prose), else the code lines.
        body = _collapse(s.body)
        literal = {i for i, p in enumerate(ps) if _collapse(src.text[p.start : p.end]) in body}
        code = {i for i, p in enumerate(ps) if p.kind == "code"}
        allowed = {i for i in (literal or code or allowed) if score[i] > 0} or allowed
        score = [v if i in allowed else 0.0 for i, v in enumerate(score)]
    best = max(range(len(ps)), key=lambda i: (score[i], -i))
    lo = hi = best
    have = scorer.coverage(lo, hi)
    while have < 1.0:
        options: list[tuple[float, int, int]] = []
        for k in range(1, (CODE_BRIDGE if ps[lo].kind == "code" else 1) + 1):
            if lo - k in allowed and _joinable(ps, lo - k, lo):
                options.append((scorer.coverage(lo - k, hi) - have, lo - k, hi))
        for k in range(1, (CODE_BRIDGE if ps[hi].kind == "code" else 1) + 1):
            if hi + k in allowed and _joinable(ps, hi, hi + k):
                options.append((scorer.coverage(lo, hi + k) - have, lo, hi + k))
        options = [o for o in options if o[0] >= MIN_GAIN]
        options = [o for o in options if ps[o[2]].end - ps[o[1]].start <= MAX_SPAN_CHARS]
        if not options:
            break
        gain, lo, hi = max(options, key=lambda o: (o[0] / (o[2] - o[1] + 1), -o[1]))
        have += gain
    return ps[lo].start, ps[hi].end


def _inside(p: Piece, region: list[tuple[int, int]]) -> bool:
    return any(a <= p.start and p.end <= b for a, b in region)


def _joinable(ps: list[Piece], a: int, b: int) -> bool:
    """Pieces a..b may form one span: of one kind, code lines only within their code run,
    sentences and rows of neighbouring units."""
    if len({ps[i].kind for i in range(a, b + 1)}) > 1:
        return False
    if ps[a].kind == "code":
        return ps[a].unit == ps[b].unit
    return b - a == 1 and ps[b].unit - ps[a].unit <= 1


def make_similarity(embedder: Any, model: str) -> Similarity | None:
    """Embedding similarity of a sentence and pieces on support's 0..1 scale (None for
    a model :data:`anchored_query.citations.support.SEMANTIC_SCALE` does not calibrate)."""
    scale = SEMANTIC_SCALE.get(model)
    if scale is None or embedder is None:
        return None
    low, high, _ = scale
    cache: dict[str, npt.NDArray[np.float32]] = {}

    def similarity(sentence: str, texts: Sequence[str]) -> list[float]:
        missing = [t for t in dict.fromkeys([sentence, *texts]) if t not in cache]
        if sentence in missing:
            cache[sentence] = embedder.embed_query(sentence)
            missing.remove(sentence)
        if missing:
            for t, v in zip(missing, embedder.embed_passages(missing), strict=True):
                cache[t] = v
        q = cache[sentence]
        return [rescale(float(cache[t] @ q), low, high) for t in texts]

    return similarity


# ---- the index side: a passage's section, its page's text


def _source(p: Passage, index: Any) -> _Source:
    """The passage's section (text, units) and the part of it the model read."""
    text, chunks, code = p.text, [], None
    if index is not None:
        try:
            section = index.sections[p.section_id]
            text = str(section["text"])
            chunks = _section_chunks(index, p.section_id)
            # The code blocks as the index recorded them, as the quote read them
            # (quote_window.read_sections): a quoted code item is found as its unit.
            recorded = (section.get("meta") or {}).get("code")
            code = recorded if isinstance(recorded, list) else None
        except KeyError:
            text, chunks, code = p.text, [], None
    units = section_units(text, chunks, code)
    region = [(0, len(text))]
    if chunks and _collapse(p.text) != _collapse(text):
        by_id = {str(c["id"]): c for c in chunks}
        seen = [by_id[i]["offsets"] for i in p.chunk_ids if i in by_id]
        if seen:
            region = [(int(a), int(b)) for a, b in seen]
    return _Source(text, units, region)


def _section_chunks(index: Any, section_id: str) -> list[Mapping[str, Any]]:
    out = []
    for k in range(256):
        try:
            out.append(index.chunks[index.chunks.row_of(f"{section_id}~{k}")])
        except KeyError:
            break
    return out


_PAGES: dict[tuple[int, str], dict[str, tuple[str, dict[str, int]]]] = {}
_SECTIONS_OF: dict[tuple[int, str], dict[str, list[str]]] = {}


def page_text(index: Any, page: str) -> tuple[str, dict[str, int]] | None:
    """A page's visible text as the index knows it — its headings (which the table of
    contents repeats above the content), then each section's heading and text — and
    where each section's text starts in it. Cached per loaded index."""
    if index is None:
        return None
    key = (id(index), str(getattr(index, "build_id", "")))
    pages = _PAGES.get(key)
    if pages is None:
        _PAGES.clear()
        pages = _PAGES[key] = {}
    by_page = _SECTIONS_OF.get(key)
    if by_page is None:
        _SECTIONS_OF.clear()
        by_page = _SECTIONS_OF[key] = {}
        for section_id in index.sections:  # one pass over the ids, in page order
            by_page.setdefault(section_id.split("#", 1)[0], []).append(section_id)
    if page not in pages:
        ids = by_page.get(page, [])
        if not ids:
            return None
        sections = [index.sections[i] for i in ids]
        titles = [str(s.get("title") or "") for s in sections]
        parts = ["\n".join(t for t in titles if t)]
        offsets: dict[str, int] = {}
        pos = len(parts[0]) + 1
        for i, s, t in zip(ids, sections, titles, strict=True):
            head = t + "\n" if t else ""
            offsets[i] = pos + len(head)
            body = str(s["text"])
            parts.append(head + body)
            pos += len(head) + len(body) + 1
        pages[page] = ("\n".join(parts), offsets)
    return pages[page]


def _locate(text: str, highlight: str) -> tuple[int, int] | None:
    """Where ``highlight`` (whitespace collapsed) is in ``text``."""
    words = highlight.split()
    if not words:
        return None
    at = text.find(highlight)
    if at >= 0:
        return at, at + len(highlight)
    m = re.search(r"\s+".join(re.escape(w) for w in words), text)
    return (m.start(), m.end()) if m else None


def _on_page(index: Any, p: Passage, src: _Source, span: tuple[int, int]) -> OnPage | None:
    found = page_text(index, p.page)
    if found is None or p.section_id not in found[1]:
        return None
    text, offsets = found
    base = offsets[p.section_id]
    if text[base : base + len(src.text)] != src.text:
        return None
    return OnPage(text, base + span[0], base + span[1])


# ---- the response


def attach(
    result: dict[str, Any],
    passages: Sequence[Passage],
    index: Any = None,
    similarity: Similarity | None = None,
) -> None:
    """Add ``answer[i].spans`` to a ``/v1/ask`` result and make each citation's
    ``highlight``, ``passage`` and ``link`` those of its first span (see the module
    docstring). ``passages`` are the ones the answer was made from."""
    citations = {c["n"]: c for c in result.get("citations", [])}
    extractive = result.get("mode") == "extractive"
    sources: dict[str, _Source] = {}
    first: dict[int, dict[str, str]] = {}

    def passage_of(c: Mapping[str, Any]) -> Passage | None:
        for p in passages:
            same = c["chunk_id"] in p.chunk_ids or c["chunk_id"] == p.section_id
            if p.url == c["url"] and same:
                return p
        return None

    def source(p: Passage) -> _Source:
        if p.section_id not in sources:
            sources[p.section_id] = _source(p, index)
        return sources[p.section_id]

    for item in result.get("answer", []):
        spans = []
        for n in item.get("citations", []):
            c = citations.get(n)
            if c is None:
                continue
            p = passage_of(c)
            found: tuple[int, int] | None = None
            on_page = None
            highlight = str(c["highlight"])
            if p is not None:
                src = source(p)
                if extractive:
                    found = _quoted_unit(str(item["text"]), highlight, src)
                else:
                    found = cited_span(str(item["text"]), src, similarity)
                found = found or _locate(src.text, highlight)
                if found is not None:
                    highlight = _collapse(src.text[found[0] : found[1]])
                    on_page = _on_page(index, p, src, found)
            span = {
                "n": n,
                "highlight": highlight,
                "link": citation_link(c["url"], highlight, on_page),
            }
            spans.append(span)
            first.setdefault(n, span)
        item["spans"] = spans
    for n, c in citations.items():
        if n in first and not extractive:
            c["highlight"] = first[n]["highlight"]
            c["passage"] = _preview(first[n]["highlight"])
            c["link"] = first[n]["link"]
            continue
        p = passage_of(c)
        if p is None:
            continue
        whole = source(p)
        found = _locate(whole.text, str(c["highlight"]))
        if found is not None:
            c["link"] = citation_link(c["url"], c["highlight"], _on_page(index, p, whole, found))


def _quoted_unit(item: str, quoted: str, src: _Source) -> tuple[int, int] | None:
    """The unit of the quoted window that ``item`` was rendered from; for a table item,
    its first to its last row. A code block's title is its caption: the span is the code."""
    window = _locate(src.text, quoted)
    if window is None:
        return None
    a, b = window
    inside = [u for u in src.units if a <= u.start and u.end <= b and u.kind != "header"]
    plain = _TITLE.sub(r"\1", item, count=1)
    for u in inside:
        if render([u]) == [plain]:
            return u.start, u.end
    rows = item.split("\n")[2:] if item.startswith("|") else []
    found = [u for u in inside if u.kind == "row" and render([u])[0].split("\n")[-1] in rows]
    return (found[0].start, found[-1].end) if rows and found else None


# The title in a code block's fence info (```yaml title="mkdocs.yml"): not on the page.
_TITLE = re.compile(r'^(`{3,}[^\n]*?) title="[^"]*"')


def _preview(text: str) -> str:
    if len(text) <= PREVIEW_CHARS:
        return text
    cut = text[:PREVIEW_CHARS]
    space = cut.rfind(" ")
    if space > PREVIEW_CHARS * 0.8:
        cut = cut[:space]
    return cut.rstrip(" \n,;:") + "…"
