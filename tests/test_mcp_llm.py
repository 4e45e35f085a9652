"""ask_docs with an LLM over /mcp, and the spend cap /v1 has: the ``mcp`` SDK's client
over real HTTP against the app, whose OpenAI-compatible client talks to the fake
provider (tests/fakes, real HTTP in the provider's wire format)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from anchored_query.serve.app import create_app
from fakes import FakeOpenAIServer, Reply, quote_passages
from mcp import ClientSession

from tests.liveserver import ThreadedServer
from tests.test_budget import llm_settings
from tests.test_mcp import _over_http, _text

QUESTION = "Which port does the development server use by default?"


@pytest.fixture
def openai() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default=Reply(quote_passages(k=1), usage=(700, 60))) as srv:
        yield srv


def _ask_docs(url: str) -> tuple[dict[str, Any], str]:
    """``ask_docs`` called once by the SDK's client over HTTP: the result's data and text."""
    got: dict[str, Any] = {}

    async def check(session: ClientSession) -> None:
        result = await session.call_tool("ask_docs", {"question": QUESTION})
        assert not result.isError, _text(result)
        got["data"], got["text"] = result.structuredContent, _text(result)

    _over_http(url + "/mcp", check)
    return got["data"], got["text"]


def test_ask_docs_answers_with_the_llm_and_cites(
    qa_index: Path, tmp_path: Path, openai: FakeOpenAIServer
) -> None:
    app = create_app(llm_settings(qa_index, tmp_path, openai, budget_tokens_per_day=10**7))
    with ThreadedServer(app) as srv:
        data, text = _ask_docs(srv.url)
    assert data["mode"] == "llm" and not data["abstained"] and "note" not in data
    assert data["answer"] and all(s["citations"] for s in data["answer"])
    assert len(openai.requests) == 1, "one model call for the one ask"
    for c in data["citations"]:
        assert "anchored-hl=" in c["link"] and ":~:text=" in c["link"]
        assert c["link"] in text


def test_past_the_spend_cap_ask_docs_is_extractive_with_a_note(
    qa_index: Path, tmp_path: Path, openai: FakeOpenAIServer
) -> None:
    app = create_app(llm_settings(qa_index, tmp_path, openai, budget_tokens_per_day=50))
    with ThreadedServer(app) as srv:
        data, text = _ask_docs(srv.url)
        # /v1/ask on the same function meets the same cap
        body = httpx.post(srv.url + "/v1/ask", json={"question": QUESTION}, timeout=120).json()
    assert data["mode"] == "extractive" and data["note"]
    assert text.startswith(f"Note: {data['note']}.")
    assert body["mode"] == "extractive" and body["fallback"] == "budget"
    assert openai.requests == [], "no model call past the cap"
