"""Replies recorded from a real model (tests/fixtures/llm-replies), replayed over real
HTTP by the fake OpenAI server, through the engine's answer step.

Each fixture holds the passages the model was shown and its raw response body
(``tests/bench/bench_llm_answers.py --record-fixtures`` / ``--export-fixtures``,
Qwen2.5-Coder-1.5B-Instruct on this project's and other real docs). Whatever the
verifier keeps must hold the guarantees: every shown sentence but a note of what the
docs do not cover cites a passage the model was shown, no reasoning or markup is
shown, a sentence shown as verified has its numbers and code in a passage it cites,
and one shown marked ``verified: false`` states no prose number that neither its
passages nor the reader gave (issue 27).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anchored_query.citations.facts import Haystack, claims
from anchored_query.engine import Engine
from anchored_query.llm.calls import Deadline
from anchored_query.question.validation import AskRequest
from anchored_query.settings import Settings
from anchored_query.types import Passage
from fakes import FakeOpenAIServer, Malformed

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "llm-replies").glob("*.json"))
_LEAK = re.compile(r"<\s*/?\s*think|<\|[a-z_]+\|>|^\s*(sources?|references?)\s*:", re.I | re.M)
_CHECKABLE = re.compile(r"`([^`]+)`|\b(\d[\d.,:]*\d|\d)\b")


def checkable(text: str) -> list[str]:
    """What must occur in a cited passage: a prose sentence's inline code and numbers;
    a fenced code block's called names and keyword arguments (its literals, such as
    an example URL, may be the model's own)."""
    if text.startswith("```"):
        body = text.split("\n", 1)[-1]
        names = re.findall(r"([A-Za-z_][\w.]*)\(|\b([A-Za-z_]\w*)=", body)
        return [(a or b).casefold() for a, b in names]
    found = []
    for match in _CHECKABLE.finditer(text):
        found.append(" ".join((match.group(1) or match.group(2)).split()).casefold())
    return found


@pytest.fixture(scope="module")
def srv() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def engine(qa_index: Path, tmp_path_factory: pytest.TempPathFactory, srv: FakeOpenAIServer) -> Any:
    # Any index gives the answer step its embedder; the passages come from the fixture.
    settings = Settings(
        index=str(qa_index),
        cache_dir=str(tmp_path_factory.mktemp("cache")),
        refresh_s=0,
        llm_provider="openai",
        llm_model="qwen2.5-coder-1.5b-instruct-q4_k_m",
        llm_base_url=srv.url,
        llm_retries=0,
    )
    engine = Engine(settings)
    yield engine
    engine.close()


def replay(engine: Engine, srv: FakeOpenAIServer, fixture: dict[str, Any]) -> dict[str, Any]:
    srv.script(Malformed(json.dumps(fixture["response"])))  # the raw body, as recorded
    passages = [Passage(**p) for p in fixture["passages"]]
    request = AskRequest(fixture["question"]["question"])
    result: dict[str, Any] = engine._answer_llm(request, passages, engine.current(), Deadline(30))
    result["_passages"] = {p.chunk_ids[0]: p for p in passages}
    return result


def test_there_are_recorded_replies() -> None:
    assert FIXTURES, "record some: python tests/bench/bench_llm_answers.py --record-fixtures"
    for path in FIXTURES:
        fixture = json.loads(path.read_text("utf-8"))
        assert fixture["usage"]["prompt_tokens"] > 0 and fixture["reply"].strip()
        # no credential in a recording (passages may well talk about authorization)
        dumped = json.dumps(fixture)
        assert not re.search(r"authorization\W+bearer|\bsk-[A-Za-z0-9]{16,}", dumped, re.I)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_a_recorded_reply_keeps_the_guarantees(
    engine: Engine, srv: FakeOpenAIServer, path: Path
) -> None:
    fixture = json.loads(path.read_text("utf-8"))
    result = replay(engine, srv, fixture)
    assert result["mode"] == "llm"
    citations = result["citations"]
    asked = {c.value for c in claims(fixture["question"]["question"]) if c.kind == "number"}
    for item in result["answer"]:
        assert set(item) <= {"text", "citations", "verified", "note"}, item
        assert item.get("verified", False) is False and item.get("note", True) is True
        assert not ("verified" in item and "note" in item), item
        assert item["citations"] or item.get("note"), item  # only a note may stand uncited
        assert all(1 <= n <= len(citations) for n in item["citations"])
        assert not _LEAK.search(item["text"]), item["text"]
        if item.get("note"):
            continue
        passages = [result["_passages"][citations[n - 1]["chunk_id"]] for n in item["citations"]]
        haystack = " ".join(" ".join(p.text for p in passages).split()).casefold()
        if "verified" not in item:  # shown as verified: its facts are in what it cites
            for token in checkable(item["text"]):
                assert token in haystack, (token, item["text"])
        elif not item["text"].startswith("```"):
            # shown, not verified: a prose number that nobody gave would have removed it
            for c in claims(item["text"]):
                if c.kind == "number":
                    held = any(Haystack(p).has(c) for p in passages)
                    assert held or c.value in asked, (c.value, item["text"])
    unverified = sum(1 for item in result["answer"] if item.get("verified") is False)
    assert result["unverified_sentences"] == unverified
    assert result["coverage"] in ("full", "partial", "none")
    assert (result["coverage"] == "none") == result["abstained"]
    if result["abstained"]:
        # nothing answered: no sentence shown, or the answer opens with a note
        assert result["answer"] == [] or result["answer"][0].get("note")
    elif any(item.get("note") for item in result["answer"]):
        assert result["coverage"] == "partial"
