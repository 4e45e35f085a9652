"""The answering core: index in, JSON-ready answers out. Knows nothing of HTTP.

One ``Engine`` per process. It loads the index once, swaps in a newer build
when the store publishes one (requests in flight keep the build they started
with), and answers with the LLM when configured or extractively otherwise.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anchored_query import logsafe
from anchored_query.citations import CitationItem, parse_answer, renumber, verify
from anchored_query.errors import LLMError, QueryError
from anchored_query.extractive import answer_extractively
from anchored_query.index_store import IndexSource
from anchored_query.llm import ChatMessage, LLMClient, make_client
from anchored_query.prompt import (
    build_messages,
    build_rewrite_messages,
    echoes_instructions,
    estimate_tokens,
    parse_rewrites,
)
from anchored_query.retrieval import Retriever, Scope
from anchored_query.settings import Settings
from anchored_query.types import Passage, Turn
from anchored_query.validation import AskRequest
from build_index.embedder import Embedder, ModelSpec
from build_index.errors import AnchoredError
from build_index.index_format import Index, read_index

log = logging.getLogger("anchored.query")

# The extractive answerer reads only the best passages; the LLM reads them all.
EXTRACTIVE_PASSAGES = 12
# After a failed first load, requests fail fast for this long (doubling to the max).
COLD_RETRY_BASE_S = 1.0
COLD_RETRY_MAX_S = 16.0
SNIPPET_CHARS = 300


@dataclass(frozen=True)
class Loaded:
    """One loaded build: everything a request needs, swapped as a unit."""

    index: Index
    retriever: Retriever
    path: Path
    loaded_at: float


class Engine:
    """Loads the index, retrieves, answers."""

    def __init__(self, settings: Settings, llm: LLMClient | None = None) -> None:
        self.settings = settings
        self.source = IndexSource.from_location(
            settings.index, cache_dir=Path(settings.cache_dir), refresh_s=settings.refresh_s
        )
        self.llm = llm if llm is not None else make_client_from(settings)
        self._loaded: Loaded | None = None
        self._lock = threading.Lock()
        self._last_error = ""
        # Cold start: after a failed load, requests fail fast until _retry_at.
        self._failures = 0
        self._retry_at = 0.0
        self._unavailable = ""
        # Refresh: checked at most every refresh_s, in the background.
        self._next_check = time.monotonic() + settings.refresh_s
        self._refresher: threading.Thread | None = None
        logsafe.protect(settings.llm_api_key)

    # -- index lifecycle -------------------------------------------------

    def current(self) -> Loaded:
        """The loaded build, loading it on first use; 503 when there is none."""
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = self._cold_load()
                loaded = self._loaded
        else:
            self._maybe_refresh()
        assert loaded is not None
        return self._loaded or loaded

    def _cold_load(self) -> Loaded:
        """The first load, backing off after failures (call with the lock held).

        While the store is down every request would otherwise wait through its
        own round of retries, one after the other on the lock; instead, for
        ``COLD_RETRY_BASE_S`` doubling up to ``COLD_RETRY_MAX_S`` after each
        failure, requests get the same 503 at once with ``Retry-After``.
        """
        wait = self._retry_at - time.monotonic()
        if wait > 0:
            raise QueryError(
                503,
                "index_unavailable",
                self._unavailable,
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
        try:
            loaded = self._load(self.source.fetch)
        except QueryError as exc:
            self._failures += 1
            delay = min(COLD_RETRY_MAX_S, COLD_RETRY_BASE_S * 2 ** (self._failures - 1))
            self._retry_at = time.monotonic() + delay
            self._unavailable = exc.message
            exc.headers["Retry-After"] = str(max(1, math.ceil(delay)))
            raise
        self._failures, self._retry_at = 0, 0.0
        self._next_check = time.monotonic() + self.settings.refresh_s
        return loaded

    def _load(self, fetch: Any) -> Loaded:
        try:
            path = fetch()
            # Files the source verified as it wrote them are not hashed again (S3 cache).
            rehash = not self.source.verified
            index = read_index(Path(path), verify=rehash)
            embedder = Embedder(ModelSpec.from_dir(index.model_dir), verify=rehash)
        except AnchoredError as exc:
            self._last_error = str(exc)
            log.error("index unavailable: %s", exc)
            raise QueryError(503, "index_unavailable", f"the index is unavailable: {exc}") from exc
        except OSError as exc:
            self._last_error = f"{type(exc).__name__}: {exc}"
            log.error("index unavailable: %s", self._last_error)
            raise QueryError(
                503, "index_unavailable", f"the index could not be read ({type(exc).__name__})"
            ) from exc
        self._last_error = ""
        return Loaded(index, Retriever(index, embedder), Path(path), time.time())

    def _maybe_refresh(self) -> None:
        """At most every ``refresh_s``, look for a newer build in a background thread.

        No request waits for the check, the download or the load of a new build
        (an outage of the store can hold a check for a long time); requests keep
        the build they started with and later ones get the new one once it is
        verified and loaded. On any failure the previous build keeps serving.
        """
        now = time.monotonic()
        if now < self._next_check or not self._lock.acquire(blocking=False):
            return
        try:
            if self._refresher is not None and self._refresher.is_alive():
                return
            self._next_check = now + self.settings.refresh_s
            self._refresher = threading.Thread(
                target=self._refresh, name="anchored-index-refresh", daemon=True
            )
            self._refresher.start()
        finally:
            self._lock.release()

    def _refresh(self) -> None:
        try:
            new_path = self.source.check_for_update()
            if new_path is not None:
                loaded = self._load(lambda: new_path)
                self._loaded = loaded
                log.info("switched to build %s", loaded.index.build_id)
        except (QueryError, AnchoredError, OSError) as exc:
            log.warning("index refresh failed, still serving the previous build: %s", exc)
        except Exception:  # a background thread: nothing above it would log this
            log.exception("index refresh failed, still serving the previous build")

    def wait_for_refresh(self, timeout_s: float) -> bool:
        """Wait for a refresh in progress (tests, tools); True when none is running."""
        refresher = self._refresher
        if refresher is not None:
            refresher.join(timeout_s)
            return not refresher.is_alive()
        return True

    def close(self) -> None:
        """Release the LLM client's connections (on app shutdown)."""
        close = getattr(self.llm, "close", None)
        if callable(close):
            close()

    # -- routes ---------------------------------------------------------

    def health(self) -> dict[str, Any]:
        loaded = self.current()
        manifest = loaded.index.manifest
        return {
            "status": "ok",
            "build_id": loaded.index.build_id,
            "model": manifest["model"]["name"],
            "chunks": len(loaded.index.chunks),
            "created": manifest.get("created"),
            "index_age_s": round(time.time() - _created_ts(manifest.get("created")), 1),
            "llm": self.llm.name if self.llm else "none",
        }

    def search(self, query: str, k: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        loaded = self.current()
        t1 = time.perf_counter()
        hits = loaded.retriever.rank([query], depth=max(k * 4, 50))
        results = []
        seen: set[str] = set()
        chunks = loaded.index.chunks
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
                }
            )
            if len(results) >= k:
                break
        return {
            "results": results,
            "build_id": loaded.index.build_id,
            "timings_ms": {
                "load": _ms(t1 - t0),
                "retrieve": _ms(time.perf_counter() - t1),
            },
        }

    def ask(self, request: AskRequest) -> dict[str, Any]:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        loaded = self.current()
        use_llm = self.llm is not None and request.mode != "extractive"
        if request.mode == "llm" and self.llm is None:
            raise QueryError(400, "no_llm", "no LLM is configured; use mode 'auto' or 'extractive'")

        variants = [request.question]
        if request.history:
            # A follow-up ("and for S3?") needs the earlier question to be searchable.
            last_user = [t.content for t in request.history if t.role == "user"][-1:]
            variants += [f"{q} {request.question}" for q in last_user]
        reason = ""
        if use_llm:
            t = time.perf_counter()
            variants += self._rewrites(request)
            timings["rewrite"] = _ms(time.perf_counter() - t)

        t = time.perf_counter()
        hits = loaded.retriever.rank(variants, request.scope)
        budget = self.settings.context_tokens if use_llm else 4000
        max_passages = self.settings.max_passages if use_llm else EXTRACTIVE_PASSAGES
        passages = loaded.retriever.passages(
            hits, token_budget=budget, max_passages=max_passages, estimate_tokens=estimate_tokens
        )
        timings["retrieve"] = _ms(time.perf_counter() - t)

        result: dict[str, Any] | None = None
        if use_llm:
            t = time.perf_counter()
            try:
                result = self._answer_llm(request, passages, loaded)
            except LLMError as exc:
                log.warning("LLM failed (%s); answering extractively", exc.category)
                if request.mode == "llm":
                    status = 504 if exc.category == "timeout" else 502
                    raise QueryError(
                        status, "llm_failed", "the language model did not answer; try again"
                    ) from None
                reason = "the language model did not answer, so this answer quotes the docs"
            timings["llm"] = _ms(time.perf_counter() - t)
        if result is None:
            t = time.perf_counter()
            result = self._answer_extractive(
                request,
                passages,
                hits.best_similarity,
                loaded.index.manifest["model"]["name"],
                loaded.retriever.embedder,
                hits.query_vector,
                loaded.index,
            )
            timings["extractive"] = _ms(time.perf_counter() - t)
            if reason:
                result["reason"] = reason
        timings["total"] = _ms(time.perf_counter() - t0)
        result.update(
            id=uuid.uuid4().hex,
            passages_considered=len(passages),
            build_id=loaded.index.build_id,
            timings_ms=timings,
        )
        return result

    # -- answering ------------------------------------------------------

    def _rewrites(self, request: AskRequest) -> list[str]:
        assert self.llm is not None
        try:
            reply = self.llm.complete(
                [
                    ChatMessage(m.role, m.content)
                    for m in build_rewrite_messages(request.question, request.history)
                ],
                max_tokens=200,
                timeout_s=min(8.0, self.settings.llm_timeout_s),
            )
        except LLMError as exc:
            log.info("query rewrite skipped: %s", exc.category)
            return []
        return parse_rewrites(reply.text)[:4]

    def _answer_llm(
        self, request: AskRequest, passages: list[Passage], loaded: Loaded
    ) -> dict[str, Any]:
        assert self.llm is not None
        scope_note = _scope_note(request.scope)
        messages = build_messages(
            request.question,
            passages,
            history=request.history,
            site_name=self.settings.site_name,
            scope_note=scope_note,
        )
        completion = self.llm.complete(
            [ChatMessage(m.role, m.content) for m in messages],
            timeout_s=self.settings.llm_timeout_s,
        )
        if completion.truncated:
            raise LLMError("truncated", "reply cut at the token limit", provider=self.llm.name)
        reply = completion.text
        # A proxy that echoes the request into its answer must not hand the key to readers.
        reply = logsafe.without_secrets(reply)
        by_n = {p.n: p for p in passages}
        sentences = parse_answer(reply)
        # A reply that repeats its instructions shows none of them (rule 2's example
        # markers [3, 7] would otherwise pass the citation check).
        shown = [s for s in sentences if not echoes_instructions(s.text)]
        verified = verify(shown, by_n)
        answer, citations = renumber(verified, by_n)
        abstained = verified.abstained
        if abstained:
            answer, citations = [], _covered(passages[:5])
        return {
            "answer": answer,
            "citations": citations,
            "abstained": abstained,
            "mode": "llm",
            "removed_sentences": verified.removed + len(sentences) - len(shown),
        }

    def _answer_extractive(
        self,
        request: AskRequest,
        passages: list[Passage],
        similarity: float,
        model: str,
        embedder: Embedder | None = None,
        question_vector: np.ndarray | None = None,
        index: Index | None = None,
    ) -> dict[str, Any]:
        return answer_extractive(
            request.question,
            passages,
            similarity=similarity,
            model=model,
            embedder=embedder,
            question_vector=question_vector,
            index=index,
            history=request.history,
        )


def answer_extractive(
    question: str,
    passages: list[Passage],
    *,
    similarity: float,
    model: str,
    embedder: Embedder | None = None,
    question_vector: np.ndarray | None = None,
    index: Index | None = None,
    history: Sequence[Turn] = (),
) -> dict[str, Any]:
    """The extractive answer to ``question`` as ``/v1/ask`` returns it (without ids, timings).

    A quote of the passage that holds the answer (:func:`answer_extractively`:
    ``index`` gives it whole sections, chunk types, IDF and spelling;
    ``history`` resolves a follow-up): one answer item per quoted paragraph,
    list line, table row or code block (a fenced block), each citing its
    passage, whose ``highlight`` is exactly the quoted text. It refuses when
    the retrieval evidence says the docs are silent, and then cites the
    sections that come closest.
    """
    result = answer_extractively(
        question,
        passages,
        index=index,
        embedder=embedder,
        model=model,
        question_vector=question_vector,
        similarity=similarity,
        history=history,
    )
    by_n = {p.n: p for p in passages}
    if result.abstained or not result.quotes:
        covered = [by_n[n] for n in result.covered if n in by_n] or passages[:5]
        return {
            "answer": [],
            "citations": _covered(covered),
            "abstained": True,
            "mode": "extractive",
        }
    answer: list[dict[str, Any]] = []
    cited = [q.passage for q in result.quotes]
    for n, quote in enumerate(result.quotes, start=1):
        answer += [{"text": text, "citations": [n]} for text in quote.items]
    return {
        "answer": answer,
        "citations": _covered(cited),
        "abstained": False,
        "mode": "extractive",
    }


def make_client_from(settings: Settings) -> LLMClient | None:
    """The configured LLM client, or None for the extractive answerer."""
    if settings.llm_provider == "none":
        return None
    return make_client(
        settings.llm_provider,
        model=settings.llm_model,
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key,
        # Only Bedrock has a region; from_env always fills one in (AWS_REGION or
        # us-east-1), which the openai client would reject as an unknown setting.
        region=settings.llm_region if settings.llm_provider == "bedrock" else None,
        timeout_s=settings.llm_timeout_s,
    )


def _covered(passages: list[Passage]) -> list[CitationItem]:
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
        )
        for i, p in enumerate(passages, start=1)
    ]


def _scope_note(scope: Scope) -> str:
    if scope.is_whole_site():
        return "All sections of the site are in scope."
    parts = []
    if scope.include:
        parts.append("Only these sections are in scope: " + ", ".join(scope.include))
    if scope.exclude:
        parts.append("The reader excluded these sections: " + ", ".join(scope.exclude))
    return ". ".join(parts) + "."


def _url(page: str, anchor: str) -> str:
    return f"{page}#{anchor}" if anchor else page


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rstrip() + "…"


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _created_ts(created: object) -> float:
    from datetime import datetime

    if isinstance(created, str):
        try:
            return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return time.time()
