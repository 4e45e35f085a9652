"""The spend cap: reserve before, settle after, one count across instances (DynamoDB).

Real parts: moto's DynamoDB over HTTP (``dynamoserver``), the fake OpenAI
server over HTTP (``fakes``), real engines on the test site's index.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anchored_query.guard.shared_state as shared_state
import httpx
import pytest
from anchored_query.engine import Engine
from anchored_query.errors import LLMError
from anchored_query.guard.budget import (
    Budget,
    BudgetedClient,
    BudgetExceeded,
    BudgetLimits,
    ClientShareExceeded,
    input_token_bound,
    input_token_floor,
)
from anchored_query.guard.shared_state import DynamoDBCounters, MemoryCounters, StateUnavailable
from anchored_query.llm import ChatMessage, Completion
from anchored_query.question.validation import parse_ask
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings, SettingsError
from dynamoserver import DynamoTable, aws_env, dynamo_table
from fakes import FakeOpenAIServer, Reply, StreamRate, quote_passages
from liveserver import ThreadedServer
from s3server import moto_s3
from starlette.testclient import TestClient

__all__ = ["aws_env", "dynamo_table", "moto_s3"]  # fixtures used by name

QUESTION = "Which port does the server use by default?"
USAGE = (1500, 60)  # what the fake provider reports for every call (above the prompt's words)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A client that answers or fails as told and reports ``usage`` (a fake, not a mock)."""

    name = "scripted"

    def __init__(self, *, usage: tuple[int | None, int | None] = (10, 5)) -> None:
        self.usage = usage
        self.fail: LLMError | None = None
        self.calls = 0
        self.timeouts: list[float | None] = []

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Completion:
        self.calls += 1
        self.timeouts.append(timeout_s)
        if self.fail:
            raise self.fail
        return Completion("ok [1].", self.usage[0], self.usage[1], "stop")


@pytest.fixture
def openai() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default=Reply(quote_passages(k=1), usage=USAGE)) as srv:
        yield srv


def llm_settings(qa_index: Path, tmp_path: Path, srv: FakeOpenAIServer, **extra: Any) -> Settings:
    return Settings(
        index=str(qa_index),
        cache_dir=str(tmp_path / "cache"),
        feedback=str(tmp_path / "feedback"),
        refresh_s=0,
        rate_limit_per_min=0,
        # The fake provider answers at once, but 8 threads of asks, it and moto share one
        # process: a call that timed out would fall back as "timeout" (not "budget") and
        # keep its reservation, which the bill checks below would count as a failure. Each
        # call may use what the request's deadline leaves.
        llm_timeout_s=60,
        llm_provider="openai",
        llm_model="fake-model",
        llm_base_url=srv.url,
        llm_api_key="sk-test-budget-0123456789",
        **extra,
    )


# ---------------------------------------------------------------- across instances


def test_concurrent_asks_on_four_instances_never_pass_the_cap(
    qa_index: Path, tmp_path: Path, openai: FakeOpenAIServer, dynamo_table: DynamoTable
) -> None:
    """16 asks at once on 4 engines sharing one table: the provider's bill stays under the cap."""
    cap = 16_000  # about 2 reservations of this prompt; 10 calls as settled
    settings = llm_settings(
        qa_index,
        tmp_path,
        openai,
        shared_state=f"dynamodb:{dynamo_table.name}",
        budget_tokens_per_day=cap,
        # The cap is under test, not the deadline: on a busy machine the first 8 asks, on 4
        # cold engines at once, found no time left for the LLM call within the default 20 s
        # and fell back as "timeout". The engines are warmed below, and the deadline is long.
        deadline_s=120.0,
    )
    engines: list[Engine] = []
    try:
        for _ in range(4):  # each with its own DynamoDB client, as separate instances have
            shared_state._shared.clear()
            engines.append(Engine(settings))
        for engine in engines:  # index and model loaded; a search calls no LLM, spends nothing
            engine.search(QUESTION, 1)
        assert openai.requests == []
        request = parse_ask({"question": QUESTION}, settings)
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda i: engines[i % 4].ask(request), range(16)))
    finally:  # a failure here must not leave 4 engines' sockets to the next test
        for engine in engines:
            engine.close()
    calls = len(openai.requests)
    billed = calls * sum(USAGE)
    assert len(results) * sum(USAGE) > cap, "without the cap the asks would bill more"
    assert billed <= cap
    assert calls >= 1, "some asks were answered by the model"
    fell_back = [r for r in results if r.get("reason")]
    assert fell_back and all(r["mode"] == "extractive" for r in fell_back)
    assert {r["fallback"] for r in fell_back} == {"budget"}, [r["reason"] for r in fell_back]
    (day,) = [v for k, v in dynamo_table.items().items() if k.startswith("budget#")]
    assert day["tokens"] == billed, "every reservation was settled to the reported usage"


def test_worst_case_calls_on_four_clients_stop_exactly_at_the_cap(
    dynamo_table: DynamoTable,
) -> None:
    """Every call bills its whole reservation (the worst case): exactly cap // call succeed."""
    messages = [ChatMessage("system", "Answer from the docs."), ChatMessage("user", "x" * 500)]
    per_call = input_token_bound(messages) + 100
    cap = 10 * per_call + per_call // 2
    lock = threading.Lock()
    billed: list[int] = []

    class Worst(Scripted):
        def complete(self, msgs: Sequence[ChatMessage], **kw: Any) -> Completion:
            with lock:
                billed.append(per_call)
            return Completion("ok", input_token_bound(msgs), kw["max_tokens"], "stop")

    clients = [
        BudgetedClient(
            Worst(),
            Budget(
                DynamoDBCounters(dynamo_table.name, client=dynamo_table.new_client()),
                BudgetLimits(tokens_per_day=cap),
            ),
        )
        for _ in range(4)
    ]

    def call(i: int) -> bool:
        try:
            clients[i % 4].complete(messages, max_tokens=100)
        except LLMError as exc:
            assert exc.category == "budget"
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(call, range(24)))
    assert outcomes.count(True) == 10 == len(billed)
    assert sum(billed) <= cap
    (day,) = [v for k, v in dynamo_table.items().items() if k.startswith("budget#")]
    assert day["tokens"] == sum(billed)


def test_spent_budget_answers_extractively_with_a_reason(
    qa_index: Path, tmp_path: Path, openai: FakeOpenAIServer
) -> None:
    settings = llm_settings(qa_index, tmp_path, openai, budget_tokens_per_day=50)
    with TestClient(create_app(settings)) as client:
        response = client.post("/v1/ask", json={"question": QUESTION})
    assert response.status_code == 200
    body = response.json()
    assert body["mode"] == "extractive" and body["reason"]
    assert body["fallback"] == "budget"
    assert openai.requests == [], "no call was made"


def test_unreachable_store_fails_closed(
    qa_index: Path,
    tmp_path: Path,
    openai: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DynamoDB down: the cap cannot be checked, so no LLM call; extractive answers, logged."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens
    for key, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    shared_state._shared.clear()
    settings = llm_settings(
        qa_index,
        tmp_path,
        openai,
        shared_state="dynamodb:unreachable",
        budget_tokens_per_day=10**9,
    )
    engine = Engine(settings)
    with caplog.at_level(logging.ERROR, logger="anchored.query"):
        result = engine.ask(parse_ask({"question": QUESTION}, settings))
    shared_state._shared.clear()
    assert result["mode"] == "extractive" and result["reason"]
    assert result["fallback"] == "budget"
    assert openai.requests == []
    assert any("spend counter cannot be checked" in r.getMessage() for r in caplog.records)
    engine.close()


# ---------------------------------------------------------------- windows


def test_hour_and_day_windows_roll_over(dynamo_table: DynamoTable) -> None:
    clock = Clock(1_800_000_000.0 - 1_800_000_000.0 % 86400 + 10 * 3600)  # 10:00 UTC
    counters = DynamoDBCounters(dynamo_table.name, client=dynamo_table.new_client())
    budget = Budget(counters, BudgetLimits(tokens_per_day=1000, tokens_per_hour=400), clock=clock)
    budget.reserve(300, 100)
    with pytest.raises(BudgetExceeded):
        budget.reserve(1, 0)  # the hour is full
    clock.now += 3600  # 11:00: a new hour, the same day
    budget.reserve(300, 100)
    clock.now += 3600
    budget.reserve(100, 0)
    with pytest.raises(BudgetExceeded):
        budget.reserve(200, 0)  # 400 + 400 + 100 + 200 > 1000 for the day
    clock.now += 14 * 3600  # the next day
    budget.reserve(300, 100)
    items = dynamo_table.items()
    days = sorted(k for k in items if k.startswith("budget#"))
    assert len(days) == 2
    first = items[days[0]]
    assert (first["tokens"], first["tokens_h10"], first["tokens_h11"]) == (900, 400, 400)
    assert first["expires_at"] > clock.now, "kept for a while, then TTL deletes it"


def test_a_clients_share_is_its_own_count_and_given_back_when_the_cap_refuses() -> None:
    """Issue 23, finding 3, the counters: a client may start a call while under its share
    (so past it by one call at most); a call the whole cap refuses gives its share back."""
    counters = MemoryCounters()
    budget = Budget(counters, BudgetLimits(tokens_per_day=1000, client_share=0.5))
    budget.reserve(400, 0, "a")
    budget.reserve(400, 0, "a")  # "a" had used 400 of its 500: it may start one more
    with pytest.raises(ClientShareExceeded):
        budget.reserve(1, 0, "a")
    with pytest.raises(BudgetExceeded):
        budget.reserve(300, 0, "b")  # within b's share; 800 + 300 is past the cap
    budget.reserve(200, 0)  # no client (anchored ask): the cap alone
    tokens = {key.split("#")[:-1][-1]: v[1]["tokens"] for key, v in counters._items.items()}
    assert tokens == {"budget": 1000, "a": 800, "b": 0}


def test_the_client_share_setting() -> None:
    assert Settings.from_env({"ANCHORED_INDEX": "x"}).budget_client_share == 0.25
    env = {"ANCHORED_INDEX": "x", "ANCHORED_BUDGET_CLIENT_SHARE": "1"}
    assert BudgetLimits.from_settings(Settings.from_env(env)).client_share == 1.0
    with pytest.raises(SettingsError, match="ANCHORED_BUDGET_CLIENT_SHARE"):
        Settings.from_env({"ANCHORED_INDEX": "x", "ANCHORED_BUDGET_CLIENT_SHARE": "0"})


def test_dollar_cap_counts_each_side_at_its_price() -> None:
    limits = BudgetLimits(usd_per_hour=0.01, price_input_per_mtok=0.80, price_output_per_mtok=4.0)
    assert limits.micro_usd(1000, 100) == 800 + 400
    budget = Budget(MemoryCounters(), limits)
    for _ in range(8):
        budget.reserve(1000, 100)  # 8 × 1,200 micro-USD = $0.0096
    with pytest.raises(BudgetExceeded):
        budget.reserve(1000, 100)


# ---------------------------------------------------------------- settling


def test_settle_replaces_the_bound_with_the_reported_usage() -> None:
    counters = MemoryCounters()
    inner = Scripted(usage=(40, 7))
    client = BudgetedClient(inner, Budget(counters, BudgetLimits(tokens_per_day=10**6)))
    messages = [ChatMessage("system", "You answer."), ChatMessage("user", "Où est le port ?")]
    bound = input_token_bound(messages)
    assert bound >= len("You answer.Où est le port ?".encode())
    assert client.complete(messages, max_tokens=300).text == "ok [1]."
    (item,) = counters._items.values()
    assert item[1]["tokens"] == 47

    inner.usage = (None, None)  # no usage reported: the reserved bound stands
    client.complete(messages, max_tokens=300)
    assert counters._items[next(iter(counters._items))][1]["tokens"] == 47 + bound + 300


@pytest.mark.parametrize("usage", [(0, 0), (3, 5), (40, 0)])
def test_a_report_below_the_prompts_words_is_no_report(usage: tuple[int, int]) -> None:
    """Issue 23, finding 4. Guards: fewer input tokens than the prompt has words (or output
    tokens than the reply has) is a report no tokenizer makes; the call counts at its
    reserved bound. Before, such a report was settled as is: 0 tokens, the cap never met."""
    counters = MemoryCounters()
    inner = Scripted(usage=usage)  # replies "ok [1]." (2 words)
    client = BudgetedClient(inner, Budget(counters, BudgetLimits(tokens_per_day=10**6)))
    messages = [ChatMessage("system", "You answer."), ChatMessage("user", "Où est le port ?")]
    assert input_token_floor(messages) == 7
    client.complete(messages, max_tokens=300)
    (item,) = counters._items.values()
    assert item[1]["tokens"] == input_token_bound(messages) + 300


def test_a_provider_reporting_no_tokens_still_meets_the_cap(qa_index: Path, tmp_path: Path) -> None:
    """Issue 23, finding 4, through the fake provider over HTTP: usage reported as 0 for
    every call, a cap of 30,000 tokens a day. Guards: the calls count at their reservations,
    so the cap stops them. Before, 8 of 8 asks were answered by the model."""
    from anchored_query.llm import OpenAICompatClient

    cap = 30_000
    counters = MemoryCounters()
    with FakeOpenAIServer(default=Reply(quote_passages(k=1), usage=(0, 0))) as srv:
        settings = llm_settings(qa_index, tmp_path, srv, budget_tokens_per_day=cap)
        provider = OpenAICompatClient(srv.url, "sk-test-budget-0123456789", "fake-model")
        llm = BudgetedClient(provider, Budget(counters, BudgetLimits(tokens_per_day=cap)))
        engine = Engine(settings, llm=llm)
        try:
            request = parse_ask({"question": QUESTION}, settings)
            results = [engine.ask(request) for _ in range(8)]
        finally:
            engine.close()
        requests = srv.requests
    reserved = [
        input_token_bound([ChatMessage(m["role"], m["content"]) for m in r.messages])  # type: ignore[arg-type]
        + (r.max_tokens or 0)
        for r in requests
    ]
    assert 1 <= len(requests) < 8
    assert sum(reserved) <= cap
    (item,) = counters._items.values()
    assert item[1]["tokens"] == sum(reserved), "each call counted at its reservation"
    fell_back = [r["fallback"] for r in results if r.get("reason")]
    assert fell_back == ["budget"] * (8 - len(requests))


def _ask_from(server: ThreadedServer, address: str, *, stream: bool = False) -> dict[str, Any]:
    """One ask over HTTP from a reader at ``address`` (a loopback address: its own client);
    the JSON response, or a stream's ``final`` record."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=server.url, transport=transport, timeout=120) as client:
        if not stream:
            response = client.post("/v1/ask", json={"question": QUESTION})
            assert response.status_code == 200, response.text
            result: dict[str, Any] = response.json()
            return result
        headers = {"Accept": "text/event-stream"}
        with client.stream("POST", "/v1/ask", json={"question": QUESTION}, headers=headers) as r:
            lines = list(r.iter_lines())
    final = lines.index("event: final")
    result = json.loads(lines[final + 1].removeprefix("data: "))
    return result


def test_one_reader_cannot_spend_the_whole_cap(
    qa_index: Path, tmp_path: Path, openai: FakeOpenAIServer
) -> None:
    """Issue 23, finding 3. Two readers (two loopback addresses) over real HTTP; a cap of
    20,000 tokens a day, a client's share 0.25 of it; each call bills 1,560 and reserves
    about 7,000. Guards: the first reader's asks stop at its share, and the second still
    gets the model's answers, buffered and streamed, counted against its own share. Before,
    the first reader spent the cap (9 calls) and the second got ``fallback: budget``."""
    state = tmp_path / "state.db"
    settings = llm_settings(
        qa_index,
        tmp_path,
        openai,
        shared_state=f"file:{state}",
        budget_tokens_per_day=20_000,
        budget_client_share=0.25,
    )
    with ThreadedServer(create_app(settings)) as server:
        first = [_ask_from(server, "127.0.0.2") for _ in range(10)]
        second = [_ask_from(server, "127.0.0.3"), _ask_from(server, "127.0.0.3", stream=True)]
    modes = [r["mode"] for r in first]
    answered = modes.count("llm")
    assert 1 <= answered < 10 and modes == ["llm"] * answered + ["extractive"] * (10 - answered)
    assert {r["fallback"] for r in first[answered:]} == {"budget"}
    assert [r["mode"] for r in second] == ["llm", "llm"], [r.get("reason") for r in second]
    with sqlite3.connect(state) as db:
        rows = db.execute("SELECT pk, value FROM counters WHERE name = 'tokens'").fetchall()
    counted = {key.split("#")[1] if "client" in key else "all": value for key, value in rows}
    assert counted["127.0.0.2"] == answered * sum(USAGE)
    assert counted["127.0.0.2"] - sum(USAGE) < 5_000, "past its share by one call at most"
    assert counted["127.0.0.3"] == 2 * sum(USAGE), "the streamed ask counted for its reader"
    assert counted["all"] == (answered + 2) * sum(USAGE) == len(openai.requests) * sum(USAGE)


def test_an_abandoned_stream_counts_what_was_sent_and_streamed(
    qa_index: Path, tmp_path: Path
) -> None:
    """Issue 23, finding 3. A reader drops a streamed ask while the model writes (a long
    reply at 20 pieces a second, over real HTTP). Guards: the call is settled at the prompt
    sent and the text streamed (estimated), not at its whole reservation. Before, the
    reservation (UTF-8 bytes of the prompt + max_tokens, ~4x the tokens) stayed counted."""
    from anchored_query.guard.budget import abandoned_usage

    state = tmp_path / "state.db"
    reply = Reply("The server listens on port 8000 [1]. " * 80, usage=USAGE)
    with FakeOpenAIServer(default=reply, rate=StreamRate(0.0, 20)) as srv:
        settings = llm_settings(
            qa_index,
            tmp_path,
            srv,
            shared_state=f"file:{state}",
            budget_tokens_per_day=10**7,
        )
        with ThreadedServer(create_app(settings)) as server:
            httpx.get(server.url + "/v1/health", timeout=60)  # the index loaded
            body = {"question": QUESTION}
            headers = {"Accept": "text/event-stream"}
            with httpx.stream(
                "POST", server.url + "/v1/ask", json=body, headers=headers, timeout=60
            ) as r:
                for line in r.iter_lines():
                    if "generating" in line:
                        break
                time.sleep(1.0)  # some of the reply streamed
            (request,) = srv.requests
            messages = [ChatMessage(m["role"], m["content"]) for m in request.messages]  # type: ignore[arg-type]
            max_tokens = request.max_tokens or 0
            reserved = input_token_bound(messages) + max_tokens
            sent, _ = abandoned_usage(messages, [], max_tokens)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                with sqlite3.connect(state) as db:
                    (tokens,) = db.execute(
                        "SELECT value FROM counters WHERE pk LIKE 'budget#%' AND name = 'tokens'"
                    ).fetchone()
                if tokens != reserved:
                    break
                time.sleep(0.1)
            assert srv.disconnected, "the model's connection was closed"
    assert tokens < reserved, "settled below the reservation"
    assert sent < tokens < sent + max_tokens, (sent, tokens, reserved)
    assert sent <= reserved // 3 + 100, "the prompt counted at about its tokens, not its bytes"


@pytest.mark.parametrize(("category", "kept"), [("auth", False), ("timeout", True)])
def test_a_failed_call_is_refunded_only_when_nothing_was_billed(category: str, kept: bool) -> None:
    counters = MemoryCounters()
    inner = Scripted()
    inner.fail = LLMError(category)  # type: ignore[arg-type]
    client = BudgetedClient(inner, Budget(counters, BudgetLimits(tokens_per_hour=10**6)))
    messages = [ChatMessage("user", "hello")]
    with pytest.raises(LLMError):
        client.complete(messages, max_tokens=100)
    (item,) = counters._items.values()
    assert item[1]["tokens"] == (input_token_bound(messages) + 100 if kept else 0)


class SlowCounters(MemoryCounters):
    """Counters whose every update takes ``delay_s``, as a slow shared store's round trip."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s

    def _add(self, *args: Any, **kwargs: Any) -> dict[str, int] | None:
        time.sleep(self.delay_s)
        return super()._add(*args, **kwargs)


def test_the_reservations_round_trip_comes_out_of_the_calls_time() -> None:
    """A slow store's reservation is not added to the request's deadline: the call gets
    what its caller had left less the round trip, and none when that is too little."""
    counters = SlowCounters(0.5)
    inner = Scripted()
    client = BudgetedClient(inner, Budget(counters, BudgetLimits(tokens_per_day=10**6)))
    messages = [ChatMessage("user", "hello")]
    client.complete(messages, max_tokens=100, timeout_s=5.0)
    (given,) = inner.timeouts
    assert given is not None and 0 < given <= 5.0 - 0.5, given  # never the whole 5 s
    with pytest.raises(LLMError) as caught:
        client.complete(messages, max_tokens=100, timeout_s=1.2)
    assert caught.value.category == "timeout" and inner.calls == 1
    (item,) = counters._items.values()
    assert item[1]["tokens"] == 10 + 5  # the first call's usage; the second refunded


def test_refusal_is_an_llm_error_budget_and_no_call() -> None:
    inner = Scripted()
    client = BudgetedClient(inner, Budget(MemoryCounters(), BudgetLimits(tokens_per_day=100)))
    with pytest.raises(LLMError) as caught:
        client.complete([ChatMessage("user", "hi")], max_tokens=200)
    assert caught.value.category == "budget" and inner.calls == 0


def test_many_threads_one_memory_budget_never_pass_the_cap() -> None:
    inner = Scripted(usage=(10, 10))
    client = BudgetedClient(inner, Budget(MemoryCounters(), BudgetLimits(tokens_per_day=2000)))
    messages = [ChatMessage("user", "x" * 40)]

    def call() -> None:
        for _ in range(30):
            with contextlib.suppress(LLMError):
                client.complete(messages, max_tokens=50)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 0 < inner.calls * 20 <= 2000


def test_store_failure_on_settle_keeps_the_reservation(caplog: pytest.LogCaptureFixture) -> None:
    class Flaky(MemoryCounters):
        def __init__(self) -> None:
            super().__init__()
            self.failing = False

        def add(self, key: str, amounts: Any, **kw: Any) -> dict[str, int] | None:
            if self.failing:
                raise StateUnavailable("down")
            return super().add(key, amounts, **kw)

    counters = Flaky()

    class FailAfterReserve(Scripted):
        def complete(self, *a: Any, **kw: Any) -> Completion:
            counters.failing = True
            return super().complete(*a, **kw)

    client = BudgetedClient(
        FailAfterReserve(), Budget(counters, BudgetLimits(tokens_per_day=10**6))
    )
    with caplog.at_level(logging.ERROR, logger="anchored.query"):
        assert client.complete([ChatMessage("user", "hi")], max_tokens=100).text
    assert any("reservation stays counted" in r.getMessage() for r in caplog.records)


def test_dollar_cap_needs_prices() -> None:
    with pytest.raises(SettingsError, match="PRICE"):
        Settings.from_env({"ANCHORED_INDEX": "x", "ANCHORED_BUDGET_USD_PER_DAY": "5"})
    settings = Settings.from_env(
        {
            "ANCHORED_INDEX": "x",
            "ANCHORED_BUDGET_USD_PER_DAY": "5",
            "ANCHORED_LLM_PRICE_INPUT_PER_MTOK": "0.8",
            "ANCHORED_LLM_PRICE_OUTPUT_PER_MTOK": "4",
        }
    )
    assert BudgetLimits.from_settings(settings).active
