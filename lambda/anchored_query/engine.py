"""The answering core: index in, JSON-ready answers out. Knows nothing of HTTP.

One ``Engine`` per process. It loads the index once, swaps in a newer build
when the store publishes one (requests in flight keep the build they started
with), and answers with the LLM when configured or extractively otherwise.
The steps of ``/v1/ask`` live in their own modules: ``prepare.py`` (retrieval),
``llm_answer.py`` and ``extractive_answer.py`` (the answer), ``response.py``
(the finish step); ``Engine`` runs them.
"""

from __future__ import annotations

import copy
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from anchored_query.answer import languages, llm_answer, response
from anchored_query.answer.extractive_answer import (
    EXTRACTIVE_PASSAGES,
    answer_extractive,
    extractive_passages,
)
from anchored_query.answer.llm_answer import EXTRACTIVE_RESERVE_S
from anchored_query.answer.prepare import retrieve
from anchored_query.answer.prepared import Prepared
from anchored_query.answer.response import ms
from anchored_query.citations.checking import Checker
from anchored_query.errors import LLMError, QueryError
from anchored_query.guard import logsafe
from anchored_query.guard.budget import with_budget
from anchored_query.llm import ChatMessage, LLMClient, make_client
from anchored_query.llm.calls import Deadline
from anchored_query.question.validation import AskRequest, check_scope
from anchored_query.question.word_prior import word_prior
from anchored_query.retrieval.evidence import WITH_PRIOR
from anchored_query.retrieval.loaded import Loaded
from anchored_query.retrieval.ranking import Retriever
from anchored_query.retrieval.vector_cache import CachingEmbedder
from anchored_query.settings import Settings
from anchored_query.store.location import source_for
from anchored_query.store.refresher import Refresher
from anchored_query.store.source import public_message
from anchored_query.store.versions import CatalogUnreadable, VersionRouter, probe, unknown_version
from anchored_query.types import Passage, Scope
from build_index.embedder import ModelSpec
from build_index.errors import AnchoredError
from build_index.index_format import read_index

# Names other modules and tests import from here (the steps moved to their own modules).
__all__ = [
    "EXTRACTIVE_PASSAGES",
    "EXTRACTIVE_RESERVE_S",
    "Engine",
    "Loaded",
    "Prepared",
    "answer_extractive",
    "make_client_from",
]

log = logging.getLogger("anchored.query")

# After a failed first load, requests fail fast for this long (doubling to the max).
COLD_RETRY_BASE_S = 1.0
COLD_RETRY_MAX_S = 16.0
# A cold load may take the request's deadline less the extractive answer's reserve,
# but never less than this (ANCHORED_DEADLINE_S may be as short as 2 s).
MIN_LOAD_S = 1.0


def load_time_left(deadline: Deadline) -> float:
    """What a cold load (catalog probe, download) may still take of ``deadline``."""
    return max(MIN_LOAD_S, deadline.left() - EXTRACTIVE_RESERVE_S)


class Engine:
    """Loads the index, retrieves, answers."""

    def __init__(self, settings: Settings, llm: LLMClient | None = None) -> None:
        self.settings = settings
        self.source = source_for(
            settings.index,
            cache_dir=Path(settings.cache_dir),
            refresh_s=settings.refresh_s,
            time_limit_s=max(MIN_LOAD_S, settings.deadline_s - EXTRACTIVE_RESERVE_S),
        )
        self.llm = llm if llm is not None else make_client_from(settings)
        # The checks of the reply being verified (a streamed view shares them: with_llm).
        self.checkers: dict[tuple[int, ...], Checker] | None = None
        self._loaded: Loaded | None = None
        self._lock = threading.Lock()
        # Cold start: after a failed load, requests fail fast until _retry_at.
        self._failures = 0
        self._retry_at = 0.0
        self._unavailable = ""
        # Refresh: checked at most every refresh_s, in the background (see _refresh).
        self._refresher = Refresher(
            self._refresh, settings.refresh_s, "anchored-index-refresh", lock=self._lock
        )
        # Versions (versions.py): probed for at the first request.
        self._versions: VersionRouter[Loaded] | None = None
        self._versions_probed = False
        logsafe.protect(settings.llm_api_key)

    # -- index lifecycle -------------------------------------------------

    def current(self, version: str | None = None, deadline: Deadline | None = None) -> Loaded:
        """The loaded build (of ``version`` when the index is versioned; None: the default
        version), loading it on first use; 503 when there is none.

        A cold load ends within ``deadline`` (by default ``deadline_s`` from now) less
        the extractive answer's reserve: a slower store is a 503 with Retry-After."""
        deadline = deadline if deadline is not None else Deadline(self.settings.deadline_s)
        router = self.versions(deadline)
        if router is not None:
            served, build = router.current(version, deadline)
            return replace(build, version=served)
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = self._cold_load(deadline)
                loaded = self._loaded
        else:
            self._refresher.maybe_start()
        if version is not None:  # an index that loads here is not versioned
            raise unknown_version(version, None)
        assert loaded is not None
        return self._loaded or loaded

    def versions(self, deadline: Deadline | None = None) -> VersionRouter[Loaded] | None:
        """The version router when the index location has a versions catalog, else None
        (looked for once, at the first request, within ``deadline``)."""
        if not self._versions_probed:
            with self._lock:
                # While a failed cold start backs off, the load answers 503 at once.
                if not self._versions_probed and time.monotonic() >= self._retry_at:
                    deadline = deadline or Deadline(self.settings.deadline_s)
                    try:
                        found = probe(self.settings.index, timeout_s=load_time_left(deadline))
                    except CatalogUnreadable:
                        return None  # store unreachable: the load says so, and backs off
                    except QueryError as exc:  # a damaged catalog: read again after a while
                        self._back_off(exc)
                        raise
                    if found is not None:
                        source, catalog = found
                        self._versions = VersionRouter(
                            self.settings, source, catalog, _version_engine
                        )
                    self._versions_probed = True
        return self._versions

    def _cold_load(self, deadline: Deadline) -> Loaded:
        """The first load, backing off after failures (call with the lock held).

        While the store is down every request would otherwise wait through its
        own round of retries, one after the other on the lock; instead, for
        ``COLD_RETRY_BASE_S`` doubling up to ``COLD_RETRY_MAX_S`` after each
        failure, requests get the same 503 at once with ``Retry-After``. The
        download waits at most what ``deadline`` leaves (:func:`load_time_left`);
        one still running then goes on, and the next load takes it over.
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
            loaded = self._load(lambda: self.source.fetch_within(load_time_left(deadline)))
        except QueryError as exc:
            self._back_off(exc)
            raise
        self._failures, self._retry_at = 0, 0.0
        self._refresher.postpone()
        return loaded

    def _back_off(self, exc: QueryError) -> None:
        """After a failed cold load or catalog probe: the same 503 at once until the wait
        (doubling after each failure) is over, and ``Retry-After`` on ``exc``."""
        self._failures += 1
        delay = min(COLD_RETRY_MAX_S, COLD_RETRY_BASE_S * 2 ** (self._failures - 1))
        self._retry_at = time.monotonic() + delay
        self._unavailable = exc.message
        exc.headers["Retry-After"] = str(max(1, math.ceil(delay)))

    def _load(self, fetch: Callable[[], Path]) -> Loaded:
        try:
            path = fetch()
            # Files the source verified as it wrote them are not hashed again (S3 cache).
            rehash = not self.source.verified
            index = read_index(Path(path), verify=rehash)
            embedder = CachingEmbedder(ModelSpec.from_dir(index.model_dir), verify=rehash)
        except AnchoredError as exc:
            log.error("index unavailable: %s", exc)
            raise QueryError(503, "index_unavailable", public_message(exc)) from exc
        except OSError as exc:
            log.error("index unavailable: %s: %s", type(exc).__name__, exc)
            raise QueryError(
                503, "index_unavailable", f"the index could not be read ({type(exc).__name__})"
            ) from exc
        if index.manifest["model"]["name"] in WITH_PRIOR:
            word_prior(index.model_dir)  # here, not at the build's first question
        return Loaded(index, Retriever(index, embedder), Path(path), time.time())

    def _refresh(self) -> None:
        """Look for a newer build and load it (in the refresher's thread).

        Requests keep the build they started with and later ones get the new one
        once it is verified and loaded. On any failure the previous build keeps
        serving.
        """
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
        return self._refresher.wait(timeout_s)

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
            "index_age_s": round(time.time() - response.created_ts(manifest.get("created")), 1),
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
        found: dict[str, Any] = {
            "results": response.search_results(loaded.index.chunks, hits, k),
            "build_id": loaded.index.build_id,
            "timings_ms": {
                "load": ms(t1 - t0),
                "retrieve": ms(time.perf_counter() - t1),
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

    def check(self, request: AskRequest, deadline: Deadline | None = None) -> Loaded:
        """The build that answers ``request``, once the request is checked against it and
        this engine (503, 400); the streaming route runs it before its stream starts."""
        loaded = self.current(request.version, deadline)
        check_scope(request.scope, loaded.index)
        if request.mode == "llm" and self.llm is None:
            raise QueryError(400, "no_llm", "no LLM is configured; use mode 'auto' or 'extractive'")
        return loaded

    def prepare(self, request: AskRequest, deadline: Deadline | None = None) -> Prepared:
        """Check the request against the loaded build and retrieve its passages (prepare.py).

        ``deadline``: the request's, when its time started earlier (the streaming route
        checks the request before its stream starts); by default it starts now."""
        t0 = time.perf_counter()
        deadline = deadline if deadline is not None else Deadline(self.settings.deadline_s)
        loaded = self.check(request, deadline)
        return retrieve(request, loaded, self.settings, self.llm, deadline, t0)

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
            fallback, reason = llm_answer.fallback_of(exc)
            log.warning("LLM failed (%s: %s); answering extractively", fallback, exc.detail)
            if request.mode == "llm":
                message = "the language model did not answer; try again"
                raise QueryError(exc.http_status, "llm_failed", message) from None
            prepared.fallback = fallback
            prepared.reason = reason
            prepared.passages = extractive_passages(prepared.loaded.retriever, prepared.hits)
        prepared.timings["llm"] = ms(time.perf_counter() - t)
        if result is not None and result["verification"]["pasted"] and not result["abstained"]:
            result = self._judge_as_quote(prepared, result)
        return result

    def _judge_as_quote(self, prepared: Prepared, result: dict[str, Any]) -> dict[str, Any]:
        """A reply that only pastes its passages (citations/pasted.py) is the quote written
        out again: when the quoted answer would refuse (the docs do not seem to cover the
        question), it is shown as the closest the docs come, not as an answer."""
        quote = self.answer_quoting(prepared)
        if not quote["abstained"]:
            return result
        log.info("verification: a pasted reply to a question the docs do not seem to cover")
        return {**result, "abstained": True, "coverage": "none"}

    def answer_quoting(self, prepared: Prepared) -> dict[str, Any]:
        """The extractive answer (with the reason when it replaces the LLM's)."""
        request, hits, loaded = prepared.request, prepared.hits, prepared.loaded
        t = time.perf_counter()
        result = answer_extractive(
            # A Chinese question on English docs is quoted from by its English
            # gloss (crosslingual.py): the terms and evidence the answerer weighs.
            hits.gloss or request.question,
            prepared.passages,
            similarity=hits.best_similarity,
            model=loaded.index.manifest["model"]["name"],
            embedder=loaded.retriever.embedder,
            question_vector=hits.query_vector,
            index=loaded.index,
            history=request.history,
            mask=loaded.retriever.mask(request.scope, prepared.language.searched),
            asked=request.question if hits.gloss else "",
            analysed=prepared.question,
            # The language decision answered these hits over the same pages already.
            decided=(
                hits.decided[1]
                if hits.decided and hits.decided[0] == prepared.language.searched
                else None
            ),
        )
        prepared.timings["extractive"] = ms(time.perf_counter() - t)
        if prepared.reason:
            result["reason"] = prepared.reason
            result["fallback"] = prepared.fallback
        return result

    def finish(self, prepared: Prepared, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` with its id, the passages considered, the build and the timings
        (response.py)."""
        return response.finish(prepared, result, self.settings.answer_id_secret)

    def with_llm(
        self, llm: LLMClient, checkers: dict[tuple[int, ...], Checker] | None = None
    ) -> Engine:
        """This engine (same settings, build, state) answering with ``llm`` instead: the
        streaming route's per-request view, whose client also hands on what it reads.
        ``checkers``: the checks of the reply being verified, shared by the views that
        verify it (the stream's paragraphs and its final record)."""
        view = copy.copy(self)
        view.llm = llm
        view.checkers = checkers
        return view

    # -- the LLM answer step (llm_answer.py), with this engine's client ------

    def _messages(self, request: AskRequest, passages: list[Passage]) -> list[ChatMessage]:
        return llm_answer.messages(self.settings, request, passages)

    def _answer_llm(
        self, request: AskRequest, passages: list[Passage], loaded: Loaded, deadline: Deadline
    ) -> dict[str, Any]:
        assert self.llm is not None
        return llm_answer.answer_llm(
            self.llm, self.settings, request, passages, loaded, deadline, self.checkers
        )


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
        from anchored_query.guard.api_key import resolve_api_key

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
