"""The answering core: index in, JSON-ready answers out. Knows nothing of HTTP.

One ``Engine`` per process. It loads the index once, swaps in a newer build
when the store publishes one (requests in flight keep the build they started
with), and answers with the LLM when configured or extractively otherwise.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from anchored_query import languages, logsafe
from anchored_query.budget import with_budget
from anchored_query.citations import CitationItem, parse_answer, renumber, verify
from anchored_query.errors import LLMError, QueryError
from anchored_query.extractive import answer_extractively
from anchored_query.ids import new_answer_id
from anchored_query.index_store import IndexSource, public_message
from anchored_query.links import citation_link
from anchored_query.llm import ChatMessage, Completion, LLMClient, make_client
from anchored_query.llm.calls import Deadline, complete_within, is_context_overflow
from anchored_query.prompt import (
    MAX_HISTORY_CHARS,
    build_messages,
    build_rewrite_messages,
    echoes_instructions,
    estimate_tokens,
    parse_rewrites,
)
from anchored_query.query_forms import search_forms
from anchored_query.retrieval import Retriever, Scope
from anchored_query.settings import Settings
from anchored_query.spans import attach as attach_spans
from anchored_query.spans import make_similarity
from anchored_query.support import make_support
from anchored_query.types import Passage, Turn
from anchored_query.validation import AskRequest, check_scope
from anchored_query.versions import CatalogUnreadable, VersionRouter, probe, unknown_version
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
# Time kept back from the request deadline for the extractive answer that replaces
# an LLM answer that did not come (retrieval is done by then; the answerer is fast).
EXTRACTIVE_RESERVE_S = 2.0
# The prompt is sized with a cheap token estimate (prompt.estimate_tokens); this share
# of the model's window is kept free in case the model's tokenizer counts more.
CONTEXT_SAFETY = 0.10
MESSAGE_OVERHEAD_TOKENS = 8  # chat template tokens around each message
HISTORY_SHARE = 0.2  # earlier turns take at most this share of the window (4 chars a token)
PASSAGE_OVERHEAD_TOKENS = 16  # "[n] Section: …" line and page wrapper per passage
# What the reader is told when the LLM answer is replaced by the extractive one.
FALLBACK_REASONS = {
    "timeout": "the language model did not answer in time, so this answer quotes the docs",
    "budget": "the site's spending limit for the language model is reached for now, "
    "so this answer quotes the docs",
    "truncated": "the language model's reply was cut off, so this answer quotes the docs",
    "rate_limited": "the language model is busy, so this answer quotes the docs",
    "overflow": "the question and its context were too long for the language model, "
    "so this answer quotes the docs",
}
FALLBACK_REASON = "the language model did not answer, so this answer quotes the docs"


@dataclass(frozen=True)
class Loaded:
    """One loaded build: everything a request needs, swapped as a unit."""

    index: Index
    retriever: Retriever
    path: Path
    loaded_at: float
    version: str | None = None  # the version it serves (versions.py), None: unversioned


@dataclass
class Prepared:
    """One ``/v1/ask`` request between the steps of :class:`Engine`: checked, retrieved."""

    request: AskRequest
    loaded: Loaded
    deadline: Deadline
    use_llm: bool
    hits: Any
    passages: list[Passage]
    timings: dict[str, float]
    started: float
    reason: str = ""  # set when the extractive answer replaces the LLM's
    fallback: str = ""
    # The reader's language and where the hits come from (languages.py).
    language: languages.LanguageChoice = field(default_factory=languages.LanguageChoice)


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
        # Versions (versions.py): probed for at the first request.
        self._versions: VersionRouter | None = None
        self._versions_probed = False
        logsafe.protect(settings.llm_api_key)

    # -- index lifecycle -------------------------------------------------

    def current(self, version: str | None = None) -> Loaded:
        """The loaded build (of ``version`` when the index is versioned; None: the default
        version), loading it on first use; 503 when there is none."""
        router = self.versions()
        if router is not None:
            return router.current(version)
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = self._cold_load()
                loaded = self._loaded
        else:
            self._maybe_refresh()
        if version is not None:  # an index that loads here is not versioned
            raise unknown_version(version, None)
        assert loaded is not None
        return self._loaded or loaded

    def versions(self) -> VersionRouter | None:
        """The version router when the index location has a versions catalog, else None
        (looked for once, at the first request)."""
        if not self._versions_probed:
            with self._lock:
                # While a failed cold start backs off, the load answers 503 at once.
                if not self._versions_probed and time.monotonic() >= self._retry_at:
                    try:
                        found = probe(self.settings.index)
                    except CatalogUnreadable:
                        return None  # store unreachable: the load says so, and backs off
                    if found is not None:
                        source, catalog = found
                        self._versions = VersionRouter(
                            self.settings, source, catalog, _version_engine
                        )
                    self._versions_probed = True
        return self._versions

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
            raise QueryError(503, "index_unavailable", public_message(exc)) from exc
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
            **({"version": loaded.version, **self._versions.describe()} if self._versions else {}),
        }

    def search(
        self,
        query: str,
        k: int,
        version: str | None = None,
        lang: str = "",
        other_languages: bool = False,
    ) -> dict[str, Any]:
        """Sections for ``query``: of the reader's language ``lang`` when the index has
        pages in it, unless ``other_languages`` (languages.py)."""
        t0 = time.perf_counter()
        loaded = self.current(version)
        t1 = time.perf_counter()
        retriever = loaded.retriever
        depth = max(k * 4, 50)
        hits, language = languages.rank_for_reader(
            retriever,
            [query],
            Scope(),
            lang,
            other_languages,
            lambda ranked, _langs: bool(ranked),
            depth=depth,
        )
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
                    **({"lang": chunk["lang"]} if chunk.get("lang") else {}),
                }
            )
            if len(results) >= k:
                break
        found: dict[str, Any] = {
            "results": results,
            "build_id": loaded.index.build_id,
            "timings_ms": {
                "load": _ms(t1 - t0),
                "retrieve": _ms(time.perf_counter() - t1),
            },
        }
        if language.reader and languages.index_languages(retriever):
            found["lang"] = language.reader
            found["other_language"] = language.other
        if loaded.version is not None:
            found["version"] = loaded.version
        return found

    def ask(self, request: AskRequest) -> dict[str, Any]:
        """The buffered ``/v1/ask`` response: :meth:`prepare`, :meth:`answer`, :meth:`finish`
        (the streaming route, streaming.py, runs the same steps and sends what it has)."""
        prepared = self.prepare(request)
        return self.finish(prepared, self.answer(prepared))

    def prepare(self, request: AskRequest) -> Prepared:
        """Check the request against the loaded build and retrieve its passages."""
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        deadline = Deadline(self.settings.deadline_s)
        loaded = self.current(request.version)
        check_scope(request.scope, loaded.index)
        use_llm = self.llm is not None and request.mode != "extractive"
        if request.mode == "llm" and self.llm is None:
            raise QueryError(400, "no_llm", "no LLM is configured; use mode 'auto' or 'extractive'")

        # The question and a follow-up's previous question; the model's rewrites
        # only when ANCHORED_LLM_REWRITE is on (a second call).
        variants = search_forms(request.question, request.history)
        if use_llm and self.settings.llm_rewrite:
            t = time.perf_counter()
            variants += self._rewrites(request, deadline)
            timings["rewrite"] = _ms(time.perf_counter() - t)

        t = time.perf_counter()
        # The reader's pages first; another language's only when theirs do not answer.
        hits, language = languages.rank_for_reader(
            loaded.retriever,
            variants,
            request.scope,
            request.lang,
            request.other_languages,
            languages.extractive_decider(
                loaded.retriever,
                request.question,
                request.scope,
                lambda ranked: _extractive_passages(loaded.retriever, ranked),
                request.history,
            ),
        )
        if use_llm:
            passages = loaded.retriever.passages(
                hits,
                token_budget=self._passage_budget(request),
                max_passages=self.settings.max_passages,
                estimate_tokens=_passage_tokens,
            )
        else:
            passages = _extractive_passages(loaded.retriever, hits)
        timings["retrieve"] = _ms(time.perf_counter() - t)
        return Prepared(
            request, loaded, deadline, use_llm, hits, passages, timings, t0, language=language
        )

    def answer(self, prepared: Prepared) -> dict[str, Any]:
        """The answer, by the LLM when it is used and answers, else extractive."""
        result = self.answer_with_llm(prepared) if prepared.use_llm else None
        return result if result is not None else self.answer_quoting(prepared)

    def answer_with_llm(self, prepared: Prepared) -> dict[str, Any] | None:
        """The LLM's verified answer; None when it failed and the extractive answer is
        to replace it (``prepared`` then holds the reason and the extractive passages)."""
        request = prepared.request
        t = time.perf_counter()
        result: dict[str, Any] | None = None
        try:
            result = self._answer_llm(
                request, prepared.passages, prepared.loaded, prepared.deadline
            )
        except LLMError as exc:
            fallback = "overflow" if is_context_overflow(exc) else exc.category
            log.warning("LLM failed (%s: %s); answering extractively", fallback, exc.detail)
            if request.mode == "llm":
                message = "the language model did not answer; try again"
                raise QueryError(exc.http_status, "llm_failed", message) from None
            prepared.fallback = fallback
            prepared.reason = FALLBACK_REASONS.get(fallback, FALLBACK_REASON)
            prepared.passages = _extractive_passages(prepared.loaded.retriever, prepared.hits)
        prepared.timings["llm"] = _ms(time.perf_counter() - t)
        return result

    def answer_quoting(self, prepared: Prepared) -> dict[str, Any]:
        """The extractive answer (with the reason when it replaces the LLM's)."""
        request, hits, loaded = prepared.request, prepared.hits, prepared.loaded
        t = time.perf_counter()
        result = self._answer_extractive(
            # A Chinese question on English docs is quoted from by its English
            # gloss (crosslingual.py): the terms and evidence the answerer weighs.
            replace(request, question=hits.gloss) if hits.gloss else request,
            prepared.passages,
            hits.best_similarity,
            loaded.index.manifest["model"]["name"],
            loaded.retriever.embedder,
            hits.query_vector,
            loaded.index,
            mask=loaded.retriever.mask(request.scope, prepared.language.searched),
            asked=request.question if hits.gloss else "",
        )
        prepared.timings["extractive"] = _ms(time.perf_counter() - t)
        if prepared.reason:
            result["reason"] = prepared.reason
            result["fallback"] = prepared.fallback
        return result

    def finish(self, prepared: Prepared, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` with its id, the passages considered, the build and the timings."""
        timings = prepared.timings
        # Each chip's own cited span and text-fragment link (spans.py).
        loaded = prepared.loaded
        model = loaded.index.manifest["model"]["name"]
        similarity = make_similarity(loaded.retriever.embedder, model) if prepared.use_llm else None
        attach_spans(result, prepared.passages, loaded.index, similarity)
        languages.annotate(result, prepared.language, loaded.retriever)
        timings["total"] = _ms(time.perf_counter() - prepared.started)
        result.update(
            id=new_answer_id(self.settings.answer_id_secret),
            passages_considered=len(prepared.passages),
            build_id=prepared.loaded.index.build_id,
            timings_ms=timings,
        )
        if prepared.loaded.version is not None:
            result["version"] = prepared.loaded.version
        return result

    def with_llm(self, llm: LLMClient) -> Engine:
        """This engine (same settings, build, state) answering with ``llm`` instead: the
        streaming route's per-request view, whose client also hands on what it reads."""
        view = copy.copy(self)
        view.llm = llm
        return view

    # -- answering ------------------------------------------------------

    def _rewrites(self, request: AskRequest, deadline: Deadline) -> list[str]:
        """Search rewrites by the model: at most ANCHORED_LLM_REWRITE_TIMEOUT_S and a
        third of the time left, so the answer call keeps the rest; no retry."""
        assert self.llm is not None
        share = (deadline.left() - EXTRACTIVE_RESERVE_S) / 3
        try:
            reply = complete_within(
                self.llm,
                [
                    ChatMessage(m.role, m.content)
                    for m in build_rewrite_messages(request.question, request.history)
                ],
                deadline=deadline,
                reserve_s=EXTRACTIVE_RESERVE_S,
                max_tokens=200,
                attempt_timeout_s=max(0.1, min(self.settings.llm_rewrite_timeout_s, share)),
                retries=0,
                what="rewrite",
            )
        except LLMError as exc:
            log.info("query rewrite skipped: %s", exc.category)
            return []
        return parse_rewrites(reply.text)[:4]

    def _passage_budget(self, request: AskRequest) -> int:
        """Tokens the passages may take so that the whole prompt — instructions,
        history, question, passages — and the reply reserve fit the model's window
        (ANCHORED_LLM_CONTEXT_TOKENS, less CONTEXT_SAFETY), capped by
        ANCHORED_CONTEXT_TOKENS."""
        s = self.settings
        overhead = _prompt_tokens(self._messages(request, []))  # history cut to fit, see there
        window = int(s.llm_context_tokens * (1 - CONTEXT_SAFETY))
        available = window - overhead - s.llm_max_output_tokens
        if available < 200:
            log.warning(
                "the prompt leaves %d tokens for passages: ANCHORED_LLM_CONTEXT_TOKENS=%d "
                "less ~%d of instructions, history and question, less "
                "ANCHORED_LLM_MAX_OUTPUT_TOKENS=%d",
                max(0, available),
                s.llm_context_tokens,
                overhead,
                s.llm_max_output_tokens,
            )
        return max(0, min(s.context_tokens, available))

    def _messages(self, request: AskRequest, passages: list[Passage]) -> list[ChatMessage]:
        """The answer prompt; earlier turns take at most HISTORY_SHARE of the window."""
        history_chars = int(self.settings.llm_context_tokens * HISTORY_SHARE * 4)
        messages = build_messages(
            request.question,
            passages,
            history=request.history,
            site_name=self.settings.site_name,
            scope_note=_scope_note(request.scope),
            max_history_chars=min(MAX_HISTORY_CHARS, history_chars),
        )
        return [ChatMessage(m.role, m.content) for m in messages]

    def _complete_answer(
        self, request: AskRequest, passages: list[Passage], deadline: Deadline
    ) -> tuple[Completion, list[Passage]]:
        """The model's reply within the deadline, and the passages it was shown.

        A prompt the provider refuses as longer than the model's window is logged
        naming ANCHORED_LLM_CONTEXT_TOKENS and tried once more with the better half
        of the passages, if time is left. A reply cut at the token limit is no answer.
        """
        assert self.llm is not None
        s = self.settings
        # With mode "llm" there is no extractive answer to keep time for.
        reserve = 0.0 if request.mode == "llm" else EXTRACTIVE_RESERVE_S
        llm = self.llm

        def call(messages: list[ChatMessage], retries: int) -> Completion:
            return complete_within(
                llm,
                messages,
                deadline=deadline,
                reserve_s=reserve,
                max_tokens=s.llm_max_output_tokens,
                attempt_timeout_s=s.llm_timeout_s,
                retries=retries,
            )

        messages = self._messages(request, passages)
        try:
            completion = call(messages, s.llm_retries)
        except LLMError as exc:
            if not is_context_overflow(exc) or len(passages) < 2:
                raise
            log.warning(
                "%s refused a prompt of about %d tokens (%s) as longer than its context "
                "window: ANCHORED_LLM_CONTEXT_TOKENS=%d is more than the window the model "
                "is served with; set it to that window. Retrying with half the passages.",
                self.llm.name,
                _prompt_tokens(messages),
                exc.detail,
                s.llm_context_tokens,
            )
            best = sorted(passages, key=lambda p: -p.score)[: len(passages) // 2]
            passages = sorted(best, key=lambda p: p.n)
            messages = self._messages(request, passages)
            completion = call(messages, 0)
        log.info(
            "LLM answer: %s input tokens, %s output tokens, finish %s",
            completion.input_tokens,
            completion.output_tokens,
            completion.finish_reason,
        )
        if completion.truncated:
            raise LLMError(
                "truncated",
                f"reply cut at ANCHORED_LLM_MAX_OUTPUT_TOKENS={s.llm_max_output_tokens}",
                provider=self.llm.name,
            )
        return completion, passages

    def _answer_llm(
        self, request: AskRequest, passages: list[Passage], loaded: Loaded, deadline: Deadline
    ) -> dict[str, Any]:
        completion, passages = self._complete_answer(request, passages, deadline)
        reply = completion.text
        # A proxy that echoes the request into its answer must not hand the key to readers.
        reply = logsafe.without_secrets(reply)
        by_n = {p.n: p for p in passages}
        sentences = parse_answer(reply, known=[n for n, p in by_n.items() if not p.excluded])
        # A reply that repeats its instructions shows none of them (rule 2's example
        # markers [3, 7] would otherwise pass the citation check).
        shown = [s for s in sentences if not echoes_instructions(s.text)]
        # Semantic support by the index's own embedder (None for an uncalibrated model).
        model = loaded.index.manifest["model"]["name"]
        support = make_support(loaded.retriever.embedder, model, loaded.index)
        # Words the site never uses, specific in the language at large ("NTLM" on a site
        # that never names it), cannot be supported by any passage.
        from anchored_query.evidence import WITH_PRIOR
        from anchored_query.support import foreign_terms
        from anchored_query.word_prior import word_prior

        index = loaded.index
        prior = word_prior(index.model_dir) if model in WITH_PRIOR else None

        def foreign(text: str) -> list[str]:
            return foreign_terms(text, index.bm25.vocab, prior)

        verified = verify(shown, by_n, support=support, foreign=foreign)
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
        mask: np.ndarray | None = None,
        asked: str = "",
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
            mask=mask,
            asked=asked,
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
    mask: np.ndarray | None = None,
    asked: str = "",
) -> dict[str, Any]:
    """The extractive answer to ``question`` as ``/v1/ask`` returns it (without ids, timings).

    A quote of the passage that holds the answer (:func:`answer_extractively`:
    ``index`` gives it whole sections, chunk types, IDF and spelling;
    ``history`` resolves a follow-up): one answer item per quoted paragraph,
    list line, table row or code block (a fenced block), each citing its
    passage, whose ``highlight`` is exactly the quoted text. It refuses when
    the retrieval evidence says the docs are silent, and then cites the
    sections that come closest. ``mask``: the chunks in scope (the evidence is
    gathered over them; retrieval's row mask). ``asked``: the question as the
    reader wrote it when ``question`` is its English gloss.
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
        mask=mask,
        asked=asked,
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


def _version_engine(settings: Settings) -> Engine:
    """The engine of one version of a versioned index: it only loads (no versions of its own)."""
    engine = Engine(settings)
    engine._versions_probed = True
    return engine


def make_client_from(settings: Settings) -> LLMClient | None:
    """The configured LLM client, or None for the extractive answerer."""
    if settings.llm_provider == "none":
        return None
    api_key = settings.llm_api_key
    if settings.llm_api_key_secret:  # read once, at cold start (api_key.py)
        from anchored_query.api_key import resolve_api_key

        api_key = resolve_api_key(settings.llm_api_key_secret)
    client = make_client(
        settings.llm_provider,
        model=settings.llm_model,
        base_url=settings.llm_base_url,
        api_key=api_key,
        # Only Bedrock has a region; from_env always fills one in (AWS_REGION or
        # us-east-1), which the openai client would reject as an unknown setting.
        region=settings.llm_region if settings.llm_provider == "bedrock" else None,
        timeout_s=settings.llm_timeout_s,
        max_retries=0,  # the engine retries, within the request's deadline (llm/calls.py)
    )
    # The spend cap (budget.py), when one is set.
    return with_budget(client, settings) if client is not None else None


def _passage_tokens(text: str) -> int:
    return estimate_tokens(text) + PASSAGE_OVERHEAD_TOKENS


def _prompt_tokens(messages: list[ChatMessage]) -> int:
    return sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def _extractive_passages(retriever: Retriever, hits: Any) -> list[Passage]:
    return retriever.passages(
        hits, token_budget=4000, max_passages=EXTRACTIVE_PASSAGES, estimate_tokens=estimate_tokens
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
            link=citation_link(p.url, p.highlight),
        )
        for i, p in enumerate(passages, start=1)
    ]


def _scope_note(scope: Scope) -> str:
    if scope.is_whole_site():
        return "All sections of the site are in scope."
    parts = []
    if scope.include:
        parts.append("Only these sections are in scope: " + _quoted(scope.include))
    if scope.exclude:
        parts.append("The reader excluded these sections: " + _quoted(scope.exclude))
    return ". ".join(parts) + "."


def _quoted(prefixes: tuple[str, ...]) -> str:
    """Scope prefixes as data: each one quoted (they are page URL prefixes, checked)."""
    return ", ".join(json.dumps(p, ensure_ascii=False) for p in prefixes)


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
