"""Response assembly: the finish step of ``/v1/ask`` (cited spans, languages, id,
build, timings), ``/v1/search`` results, the citations of covered sections."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from anchored_query.answer import languages
from anchored_query.citations.links import citation_link
from anchored_query.citations.spans import attach as attach_spans
from anchored_query.citations.spans import make_similarity
from anchored_query.citations.verify import CitationItem
from anchored_query.guard.ids import new_answer_id
from anchored_query.types import Passage

if TYPE_CHECKING:
    from anchored_query.answer.prepared import Prepared

SNIPPET_CHARS = 300


def finish(prepared: Prepared, result: dict[str, Any], answer_id_secret: str) -> dict[str, Any]:
    """``result`` with its id, the passages considered, the build and the timings."""
    timings = prepared.timings
    # Each chip's own cited span and text-fragment link (spans.py).
    loaded = prepared.loaded
    model = loaded.index.manifest["model"]["name"]
    similarity = make_similarity(loaded.retriever.embedder, model) if prepared.use_llm else None
    attach_spans(result, prepared.passages, loaded.index, similarity)
    languages.annotate(result, prepared.language, loaded.retriever)
    timings["total"] = ms(time.perf_counter() - prepared.started)
    result.setdefault("coverage", coverage_of(result))
    result.update(
        id=new_answer_id(answer_id_secret),
        passages_considered=len(prepared.passages),
        build_id=prepared.loaded.index.build_id,
        timings_ms=timings,
    )
    if prepared.loaded.version is not None:
        result["version"] = prepared.loaded.version
    return result


def coverage_of(result: dict[str, Any]) -> str:
    """What of the question an answer covers: ``none`` (an abstention), ``partial`` (a
    quote that is only the closest passage, or an answer that says what is missing),
    ``full``. The LLM answer step sets its own (citations/verify.py)."""
    if result.get("abstained"):
        return "none"
    if result.get("tentative") or any(a.get("note") for a in result.get("answer", [])):
        return "partial"
    return "full"


def covered(passages: list[Passage]) -> list[CitationItem]:
    """Citations for the sections the docs do cover (shown with an abstention)."""
    return [
        CitationItem(
            n=i,
            chunk_id=p.chunk_ids[0],
            url=p.url,
            title=p.title,
            heading_path=p.heading_path,
            passage=p.highlight[:600],
            highlight=p.highlight,
            link=citation_link(p.url, p.highlight),
        )
        for i, p in enumerate(passages, start=1)
    ]


def search_results(chunks: Sequence[dict[str, Any]], hits: Any, k: int) -> list[dict[str, Any]]:
    """``/v1/search`` results: the first ``k`` sections of ``hits``, one per parent section."""
    results = []
    seen: set[str] = set()
    for hit in hits:
        chunk = chunks[hit.row]
        if chunk["parent"] in seen:
            continue
        seen.add(chunk["parent"])
        results.append(
            {
                "url": _url(chunk["page"], chunk["anchor"]),
                "chunk_id": chunk["id"],
                "title": chunk["title"],
                "heading_path": list(chunk["heading_path"]),
                "score": round(hit.score, 6),
                "snippet": _snippet(chunk["text"]),
                **({"lang": chunk["lang"]} if chunk.get("lang") else {}),
            }
        )
        if len(results) >= k:
            break
    return results


def ms(seconds: float) -> float:
    """Seconds as the milliseconds of ``timings_ms``."""
    return round(seconds * 1000, 2)


def created_ts(created: object) -> float:
    """The epoch time of a manifest's ``created`` (now when it is missing or unreadable)."""
    from datetime import datetime

    if isinstance(created, str):
        try:
            return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return time.time()


def _url(page: str, anchor: str) -> str:
    return f"{page}#{anchor}" if anchor else page


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rstrip() + "…"
