"""Real model replies, cached: the OpenAI-compatible client of the LLM benchmarks.

Each request's raw response body is stored in ``~/.cache/anchored-bench/replies``
under a hash of what decides the reply (model, messages, max_tokens, temperature),
and a cached body is parsed again by the real client code, so rescoring is free and
every figure still comes from a real reply.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import llm_server
from anchored_query.errors import LLMError
from anchored_query.llm import Completion, OpenAICompatClient
from anchored_query.types import Passage

__all__ = ["REPLIES", "Asked", "CachingClient", "Call", "request_key"]

REPLIES = llm_server.CACHE / "replies"


def request_key(body: dict[str, Any]) -> str:
    """The cache key of a chat request: what decides the model's reply."""
    wanted = {k: body.get(k) for k in ("model", "messages", "max_tokens", "temperature")}
    return hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()


@dataclass
class Call:
    """One model call made during an ask."""

    key: str
    messages: list[dict[str, str]]
    completion: Completion | None
    error: str
    latency_s: float
    cached: bool


class CachingClient(OpenAICompatClient):
    """The real OpenAI-compatible client; each raw response body is cached by request.

    A cached body is parsed by the same code as a fresh one. ``offline`` refuses to
    call the server (a reply that is not cached is an ``LLMError("connection")``).
    """

    def __init__(self, base_url: str, model: str, *, offline: bool = False) -> None:
        super().__init__(base_url, "", model, timeout_s=3500.0, max_retries=0)
        self.offline = offline
        self.calls: list[Call] = []
        REPLIES.mkdir(parents=True, exist_ok=True)

    def _attempt(self, body: dict[str, Any], timeout_s: float, limit: int) -> Completion:
        key = request_key(body)
        path = REPLIES / f"{key}.json"
        messages = list(body["messages"])
        if path.exists():
            entry = json.loads(path.read_text("utf-8"))
            try:
                completion = self._parse(entry["raw"].encode(), 200)
            except LLMError as exc:
                self.calls.append(Call(key, messages, None, exc.category, entry["latency_s"], True))
                raise
            self.calls.append(Call(key, messages, completion, "", entry["latency_s"], True))
            return completion
        if self.offline:
            raise LLMError("connection", "offline: reply not cached", provider=self.name)
        t0 = time.perf_counter()
        self._captured: bytes | None = None
        try:
            completion = super()._attempt(body, timeout_s, limit)
        except LLMError as exc:
            self.calls.append(
                Call(key, messages, None, exc.category, time.perf_counter() - t0, False)
            )
            raise
        latency = time.perf_counter() - t0
        raw = self._captured or b""
        entry = {"request": body, "raw": raw.decode("utf-8"), "latency_s": round(latency, 3)}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry, ensure_ascii=False), "utf-8")
        tmp.replace(path)
        self.calls.append(Call(key, messages, completion, "", latency, False))
        return completion

    def _parse(self, raw: bytes, status: int) -> Completion:
        self._captured = raw
        return super()._parse(raw, status)


@dataclass
class Asked:
    """One question asked through /v1/ask, with what the model did."""

    qid: str
    question: dict[str, Any]
    body: dict[str, Any]
    status: int
    wall_s: float
    calls: list[Call]
    passages: list[Passage] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # the verifier's, per removed sentence

    @property
    def reply(self) -> str:
        """The text of the answer call's reply ('' when it failed)."""
        answers = [c for c in self.calls if c.completion is not None]
        return answers[-1].completion.text if answers and answers[-1].completion else ""

    @property
    def latency_s(self) -> float:
        """The ask's time, with each model call's time as recorded when it was made."""
        fresh = sum(c.latency_s for c in self.calls if not c.cached)
        return self.wall_s - fresh + sum(c.latency_s for c in self.calls)
