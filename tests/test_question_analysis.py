"""The question is analysed once (question/analysis.py): one streamed ``/v1/ask`` runs
the tokenizer on the question, and on each of its words, once — whichever stages
(retrieval, spelling, the word prior, the evidence, the quote) read its terms."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anchored_query.question.analysis import Question
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from anchored_query.types import Turn
from fakes import FakeOpenAIServer, Reply, quote_passages
from starlette.testclient import TestClient

import build_index.tokenizer as tokenizer

SSE = {"Accept": "text/event-stream"}


@pytest.fixture
def tokenized(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every text the query function hands the tokenizer, counted (a spy: the real
    tokenizer still runs)."""
    seen: Counter[str] = Counter()
    real = tokenizer.tokenize

    def spy(text: str, *args: Any, **kwargs: Any) -> list[str]:
        seen[text] += 1
        return real(text, *args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("anchored_query") and getattr(module, "tokenize", None) is real:
            monkeypatch.setattr(module, "tokenize", spy)
    yield seen


def settings(qa_index: Path, tmp_path: Path, **extra: Any) -> Settings:
    return Settings(
        index=str(qa_index),
        cache_dir=str(tmp_path / "cache"),
        feedback=str(tmp_path / "feedback"),
        refresh_s=0,
        rate_limit_per_min=0,
        **extra,
    )


def stream(client: TestClient, body: dict[str, Any]) -> str:
    response = client.post("/v1/ask", json=body, headers=SSE)
    assert response.status_code == 200, response.text
    return response.text


def assert_once(seen: Counter[str], question: str) -> None:
    assert seen[question] == 1, f"the question was tokenized {seen[question]} times"
    words = [w for w in question.split() if w.strip("?.,!")]
    again = {w: seen[w] for w in words if seen[w] > 1}
    assert again == {}, f"words tokenized again: {again}"


@pytest.mark.parametrize(
    ("question", "lang"),
    [
        ("Which port does Skylark use?", ""),
        ("whcih prot does Skylark use by defualt", "en"),  # typos: spelling corrected
    ],
)
def test_a_streamed_quoted_answer_tokenizes_the_question_once(
    qa_index: Path, tmp_path: Path, tokenized: Counter[str], question: str, lang: str
) -> None:
    client = TestClient(create_app(settings(qa_index, tmp_path)))
    client.post("/v1/ask", json={"question": "warm up"})  # loads the index first
    tokenized.clear()
    body = {"question": question, **({"lang": lang} if lang else {})}
    assert "answer" in stream(client, body)
    assert_once(tokenized, question)


def test_a_streamed_follow_up_tokenizes_each_text_once(
    qa_index: Path, tmp_path: Path, tokenized: Counter[str]
) -> None:
    client = TestClient(create_app(settings(qa_index, tmp_path)))
    client.post("/v1/ask", json={"question": "warm up"})
    tokenized.clear()
    history = [
        {"role": "user", "content": "Which port does Skylark use?"},
        {"role": "assistant", "content": "Port 8080."},
    ]
    stream(client, {"question": "and how do I change it?", "history": history})
    assert_once(tokenized, "and how do I change it?")
    assert tokenized["Which port does Skylark use?"] <= 1


def test_a_streamed_llm_answer_tokenizes_the_question_once(
    qa_index: Path, tmp_path: Path, tokenized: Counter[str]
) -> None:
    with FakeOpenAIServer() as llm:
        llm.default = Reply(quote_passages(k=1))
        s = settings(
            qa_index,
            tmp_path,
            llm_provider="openai",
            llm_model="fake-model",
            llm_base_url=llm.url,
            llm_retries=0,
        )
        client = TestClient(create_app(s))
        client.post("/v1/ask", json={"question": "warm up", "mode": "extractive"})
        tokenized.clear()
        text = stream(client, {"question": "Which port does Skylark use?"})
    assert '"mode": "llm"' in text or '"mode":"llm"' in text
    assert_once(tokenized, "Which port does Skylark use?")


def test_the_record_derives_each_thing_once() -> None:
    calls: list[str] = []

    def embed(text: str) -> Any:
        calls.append(text)
        return [float(len(text))]

    q = Question.of("How do I exclude a page?", [Turn("user", "What is the nav?")])
    assert q.earlier == "What is the nav?"
    assert q.terms() is q.terms("How do I exclude a page?")
    assert q.vector("x", embed) is q.vector("x", embed)
    assert calls == ["x"]
    assert q.forms[0] == "How do I exclude a page?"
