"""The streamed ``/v1/ask``: the buffered answer's steps, with what each one yields
sent as soon as it is known.

Events (Server-Sent Events, see site/reference/http-api.md): ``stage``
(retrieving, generating, verifying), ``sources`` (the passages the model reads,
numbered as it sees them), ``sentence`` (an answer item, complete and verified),
``final`` (exactly the buffered response) or ``error``.

Verification while the model writes: citations.verify may credit a sentence
with the markers of its paragraph, so text is held back until its paragraph is
complete (a blank line outside a code fence, or the end of the reply). Then the
reply so far goes through the very same answer step as the buffered path
(``Engine._answer_llm`` with a client that returns that text), and the items it
keeps that cite a passage are sent, provided the items already sent are the
start of them (else nothing more is sent until ``final``). Statements without
a citation (a note of what the docs do not cover) and removed sentences are
never sent; ``final`` carries the notes. At the end the remaining items of the
final answer are sent the same way, then ``final``. If the model fails after
sentences were sent, ``final`` is the extractive answer with ``reason`` and
``fallback``, and the client shows it instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse
from starlette.types import Send

from anchored_query.citations.checking import Checker
from anchored_query.citations.links import citation_link
from anchored_query.engine import Engine, Prepared
from anchored_query.errors import LLMError, QueryError
from anchored_query.llm.base import (
    ChatMessage,
    Completion,
    LLMClient,
    UnclosedReasoning,
    stream_reply,
    strip_reasoning,
)
from anchored_query.llm.calls import Deadline
from anchored_query.question.validation import AskRequest
from anchored_query.types import Passage

log = logging.getLogger("anchored.query")

Emit = Callable[[str, dict[str, Any]], None]

# A verification of the reply so far gets its own time: it makes no model call.
_REPLAY_DEADLINE_S = 60.0
# While no event is due, how often to look whether the reader is still there.
DISCONNECT_POLL_S = 0.25
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})")


class Abandoned(Exception):
    """The reader went away: stop reading the model and answer nobody."""


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One Server-Sent Event: ``event: NAME``, one ``data:`` line of JSON, a blank line.

    The JSON is written as the buffered response is (Starlette's JSONResponse),
    so a ``final`` event's data is byte for byte the buffered body.
    """
    body = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return f"event: {event}\ndata: {body}\n\n".encode()


def precheck(engine: Engine, request: AskRequest) -> Deadline:
    """What :meth:`Engine.prepare` checks first (:meth:`Engine.check`), done before the
    stream starts so that these failures are the normal JSON error responses (503, 400).
    Returned: the request's deadline, started here, which the stream's answer keeps (a
    cold load counts against the one deadline, as in a buffered answer)."""
    deadline = Deadline(engine.settings.deadline_s)
    engine.check(request, deadline)
    return deadline


def run(
    engine: Engine,
    request: AskRequest,
    emit: Emit,
    cancelled: threading.Event,
    deadline: Deadline | None = None,
) -> None:
    """Answer ``request``, calling ``emit(event, data)`` as the answer is made (blocks;
    run it in a worker thread). Ends with ``final`` or ``error``; emits nothing more
    once ``cancelled`` is set. The final result is also what :meth:`Engine.ask` returns.
    ``deadline``: the request's (from :func:`precheck`); by default it starts now."""
    try:
        emit("stage", {"stage": "retrieving"})
        prepared = engine.prepare(request, deadline)
        _check(cancelled)
        sources = _sources(prepared.passages)
        emit("sources", {"sources": sources, "passages_considered": len(prepared.passages)})
        shown = Shown({p.n for p in prepared.passages}, _keys(prepared.passages), emit)
        result = None
        if prepared.use_llm:
            emit("stage", {"stage": "generating"})
            # One set of checks for the reply: each sentence is checked once, whether at
            # its paragraph or in the final record.
            checks: dict[tuple[int, ...], Checker] = {}
            verifier = Verifier(engine, prepared, shown, emit, cancelled, checks)
            result = engine.with_llm(Tee(engine.llm, verifier), checks).answer_with_llm(prepared)
            _check(cancelled)
        if result is None:
            result = engine.answer_quoting(prepared)
        result = engine.finish(prepared, result)
        shown.rest(result)
        _check(cancelled)
        emit("final", result)
    except Abandoned:
        log.info("streamed answer abandoned by the reader")
    except QueryError as exc:
        emit("error", {"error": {"code": exc.code, "message": exc.message}})
    except Exception:
        log.exception("streamed answer failed")
        emit(
            "error", {"error": {"code": "internal", "message": "something went wrong on our side"}}
        )


async def events(
    engine: Engine,
    request: AskRequest,
    on_final: Callable[[dict[str, Any]], None] | None = None,
    is_disconnected: Callable[[], Awaitable[bool]] | None = None,
    deadline: Deadline | None = None,
) -> AsyncIterator[bytes]:
    """The response body of a streamed ``/v1/ask``: :func:`run` in a worker thread (one
    of the thread pool's, like a buffered answer), its events as they come. When the
    reader goes away the server stops iterating, and the worker is told to stop (it
    closes the model's connection at its next read)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
    cancelled = threading.Event()

    def emit(event: str, data: dict[str, Any]) -> None:
        if cancelled.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens
            loop.call_soon_threadsafe(queue.put_nowait, (event, data))

    def work() -> None:
        try:
            run(engine, request, emit, cancelled, deadline)
        finally:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(queue.put_nowait, None)

    worker = asyncio.ensure_future(run_in_threadpool(work))
    try:
        while True:
            try:
                message = await asyncio.wait_for(queue.get(), DISCONNECT_POLL_S)
            except TimeoutError:
                if is_disconnected is not None and await is_disconnected():
                    log.info("the reader went away before the answer was complete")
                    return
                continue
            if message is None:
                return
            event, data = message
            if event == "final" and on_final is not None:
                on_final(data)
            yield sse(event, data)
    finally:
        cancelled.set()
        if not worker.done():
            # Not awaited here (the reader is gone); the worker ends at its next check.
            worker.add_done_callback(lambda task: task.cancelled() or task.exception())


class EventStream(StreamingResponse):
    """A ``text/event-stream`` response whose event iterator is closed however the
    response ends (a failed send too), so that the worker is told to stop."""

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[bytes]) -> None:
        super().__init__(
            content,
            headers={
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",  # proxies (nginx) pass events on at once
            },
        )
        self._events = content

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        finally:
            aclose = getattr(self._events, "aclose", None)
            if aclose is not None:
                await aclose()


def wants_stream(accept: str) -> bool:
    """Whether an ``Accept`` header asks for Server-Sent Events."""
    return any(
        part.split(";", 1)[0].strip().lower() == "text/event-stream" for part in accept.split(",")
    )


def _check(cancelled: threading.Event) -> None:
    if cancelled.is_set():
        raise Abandoned()


def _sources(passages: Sequence[Passage]) -> list[dict[str, Any]]:
    return [
        {
            "n": p.n,
            "url": p.url,
            "title": p.title,
            "heading_path": list(p.heading_path),
            "link": citation_link(p.url, p.highlight),
        }
        for p in passages
        if not p.excluded
    ]


def _keys(passages: Sequence[Passage]) -> dict[tuple[str, str], int]:
    """A citation's (chunk_id, url) -> the number of the passage it was made from."""
    keys: dict[tuple[str, str], int] = {}
    for p in passages:
        chunk = p.chunk_ids[0] if p.chunk_ids else p.section_id
        keys.setdefault((chunk, p.url), p.n)
    return keys


class Shown:
    """The sentence events sent so far, in the ``sources`` numbering."""

    def __init__(self, numbers: set[int], keys: dict[tuple[str, str], int], emit: Emit) -> None:
        self.numbers = numbers
        self.keys = keys
        self.emit = emit
        self.items: list[dict[str, Any]] = []
        self.diverged = False

    def items_of(self, result: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The cited items of a response, citing ``sources`` numbers, with their
        ``verified: false`` or ``note`` flags; None when one of its citations is not a
        source that was sent (an extractive fallback's passages)."""
        if result.get("abstained"):
            return []
        by_new: dict[int, int] = {}
        for citation in result.get("citations", []):
            n = self.keys.get((citation.get("chunk_id", ""), citation.get("url", "")))
            if n is None:
                return None
            by_new[citation["n"]] = n
        items = []
        for item in result.get("answer", []):
            if not item["citations"]:
                continue  # a note of what the docs do not cover: in the final record only
            if any(c not in by_new for c in item["citations"]):
                return None
            sent: dict[str, Any] = {
                "text": item["text"],
                "citations": sorted(by_new[c] for c in item["citations"]),
            }
            # A sentence no check confirmed is streamed marked as such, as in the record.
            sent.update({k: item[k] for k in ("verified", "note") if k in item})
            items.append(sent)
        return items

    def offer(self, items: list[dict[str, Any]] | None) -> None:
        """Send the items past those already sent, if those are where they start."""
        if self.diverged or items is None:
            return
        if items[: len(self.items)] != self.items:
            self.diverged = True
            log.info("streamed sentences differ from the answer so far; the final record rules")
            return
        for item in items[len(self.items) :]:
            self.emit("sentence", {"index": len(self.items), "item": item})
            self.items.append(item)

    def rest(self, result: dict[str, Any]) -> None:
        """The final answer's items not sent yet."""
        self.offer(self.items_of(result))


class Verifier:
    """Receives the model's text as it is written; at each complete paragraph verifies
    the reply so far through the buffered answer step and offers its items."""

    def __init__(
        self,
        engine: Engine,
        prepared: Prepared,
        shown: Shown,
        emit: Emit,
        cancelled: threading.Event,
        checks: dict[tuple[int, ...], Checker] | None = None,
    ) -> None:
        self.engine = engine
        self.checks = checks if checks is not None else {}
        self.prepared = prepared
        self.shown = shown
        self.emit = emit
        self.cancelled = cancelled
        self.text = ""
        self.checked = 0  # the length of the reply through its last complete paragraph
        self.confirmed_to = 0  # the length of the reply last verified
        self.candidate: list[dict[str, Any]] = []  # items through the last paragraph
        self.messages: list[ChatMessage] = []
        self.attempts = 0

    def begin(self, messages: Sequence[ChatMessage]) -> None:
        """A model call starts (a retry starts the reply over)."""
        self.attempts += 1
        self.messages = list(messages)
        self.text, self.checked, self.confirmed_to = "", 0, 0
        self.candidate = []

    def delta(self, text: str) -> None:
        """More of the reply."""
        _check(self.cancelled)
        self.text += text
        end = complete_prefix(self.text)
        if end > self.checked:
            # A paragraph is complete: what the reply through it keeps becomes the
            # candidate; it confirms what the previous candidate starts with.
            self.checked, self.confirmed_to = end, end
            items = self.verify(self.text[:end])
            self.release(items)
            self.candidate = items or []
            return
        # The next paragraph goes on: once it has a complete sentence or line, a
        # verification through it says whether the candidate still stands (markers
        # or "For example, [3]" opening it would belong to the paragraph before).
        later = sentence_end(self.text, self.checked)
        if later > self.confirmed_to and self.candidate:
            self.confirmed_to = later
            self.release(self.verify(self.text[:later]))

    def release(self, items: list[dict[str, Any]] | None) -> None:
        """Offer the candidate's items that ``items`` (a later verification) agrees on."""
        if items is None or not self.candidate:
            return
        agreed = 0
        while (
            agreed < min(len(items), len(self.candidate))
            and items[agreed] == self.candidate[agreed]
        ):
            agreed += 1
        self.shown.offer(self.candidate[:agreed])

    def end(self, completion: Completion) -> None:
        """The reply is complete: the buffered answer step verifies it next."""
        self.emit("stage", {"stage": "verifying"})

    def verify(self, reply: str) -> list[dict[str, Any]] | None:
        """The cited items the answer step keeps of ``reply`` (the reply so far), in the
        ``sources`` numbering; None when there is nothing to verify yet."""
        if self.shown.diverged:
            return None
        try:
            text = strip_reasoning(reply).strip()
        except UnclosedReasoning:
            return None  # still inside a reasoning block
        if not text:
            return None
        replay = Replay(text, self.messages)
        request, prepared = self.prepared.request, self.prepared
        try:
            result = self.engine.with_llm(replay, self.checks)._answer_llm(
                request, prepared.passages, prepared.loaded, Deadline(_REPLAY_DEADLINE_S)
            )
        except (LLMError, _OtherPrompt):
            return None  # e.g. a shortened prompt after an overflow: the final record rules
        return self.shown.items_of(result)


def complete_prefix(text: str) -> int:
    """The length of ``text`` up to its last paragraph break (a blank line outside a
    code fence), 0 when it has none."""
    end = 0
    position = 0
    inside = False
    blank_run = False
    for line in text.splitlines(keepends=True):
        position += len(line)
        if not line.endswith("\n"):
            break  # the line is not finished yet
        if _FENCE.match(line):
            inside = not inside
            blank_run = False
        elif not inside and not line.strip():
            if not blank_run:
                end = position
            blank_run = True
        else:
            blank_run = False
    return end


_SENTENCE_END = re.compile(r"[.!?。！？](?=\s)|\n")


def sentence_end(text: str, start: int) -> int:
    """The end of the last complete sentence or line of ``text`` after ``start`` that has
    some text in it (0 when none)."""
    tail = text[start:]
    ends = [m.end() for m in _SENTENCE_END.finditer(tail)]
    if not ends or not tail[: ends[-1]].strip():
        return 0
    fences = sum(1 for line in tail[: ends[-1]].splitlines() if _FENCE.match(line))
    if fences % 2:
        return 0  # inside a code block: wait for its end
    return start + ends[-1]


class _OtherPrompt(Exception):
    """The answer step built another prompt than the one the model is answering."""


class Replay:
    """A client whose reply is given: the text so far, for the answer step to verify.
    Only for the prompt the model was sent (the step may shorten it after an overflow)."""

    name = "replay"

    def __init__(self, text: str, messages: Sequence[ChatMessage]) -> None:
        self.text = text
        self.messages = list(messages)

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Completion:
        if list(messages) != self.messages:
            raise _OtherPrompt()
        return Completion(self.text, finish_reason="stop")


class Tee:
    """An LLM client that streams each call from ``inner`` and hands the text to the
    verifier as it arrives, returning the same Completion ``inner`` would."""

    def __init__(self, inner: LLMClient | None, verifier: Verifier) -> None:
        assert inner is not None
        self.inner = inner
        self.verifier = verifier
        self.name = inner.name

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Completion:
        self.verifier.begin(messages)
        events: Iterator[Any] = stream_reply(
            self.inner,
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout_s=timeout_s,
        )
        try:
            for event in events:
                if isinstance(event, Completion):
                    self.verifier.end(event)
                    return event
                self.verifier.delta(event)
        finally:
            close = getattr(events, "close", None)
            if callable(close):
                close()  # an abandoned stream closes the provider's connection
        raise LLMError("malformed", "the stream ended without a completion", provider=self.name)
