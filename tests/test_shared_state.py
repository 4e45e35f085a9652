"""``file:`` shared counters (``anchored serve``, processes on one machine): one SQLite file.

Real parts: two query functions as separate uvicorn processes (``liveserver``), one
SQLite file, the fake OpenAI server over HTTP (``fakes``), and readers as distinct
loopback addresses (127.0.0.x), each asking from many threads at once.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from fakes import FakeOpenAIServer, Reply, quote_passages
from liveserver import AppProcess

QUESTION = "Which port does the server use by default?"
USAGE = (1500, 60)  # what the fake provider reports for every call (above the prompt's words)
RATE = 5  # requests per minute per client
CAP = 20_000  # tokens per day: fits about three reservations, and nine calls as settled


def _counters(path: Path) -> dict[str, dict[str, int]]:
    """The SQLite file's live counters: item key -> counter name -> value."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT pk, name, value FROM counters WHERE expires_at > ?", (time.time(),)
        ).fetchall()
    items: dict[str, dict[str, int]] = {}
    for key, name, value in rows:
        items.setdefault(key, {})[name] = value
    return items


@contextmanager
def _two_processes(
    qa_index: Path, tmp_path: Path, srv: FakeOpenAIServer
) -> Iterator[list[AppProcess]]:
    state = tmp_path / "shared.db"
    with ExitStack() as stack:
        servers = []
        for i in range(2):
            env = {
                "ANCHORED_INDEX": str(qa_index),
                "ANCHORED_CACHE_DIR": str(tmp_path / f"cache-{i}"),
                "ANCHORED_FEEDBACK": str(tmp_path / f"feedback-{i}"),
                "ANCHORED_REFRESH_S": "0",
                "ANCHORED_SHARED_STATE": f"file:{state}",
                "ANCHORED_RATE_LIMIT_PER_MIN": str(RATE),
                "ANCHORED_LLM_PROVIDER": "openai",
                "ANCHORED_LLM_MODEL": "fake-model",
                "ANCHORED_LLM_BASE_URL": srv.url,
                "ANCHORED_LLM_API_KEY": "sk-test-file-state-0123456789",
                # The counters are under test, not the deadline (two servers, the fake and
                # eight threads of readers share two cores).
                "ANCHORED_LLM_TIMEOUT_S": "60",
                "ANCHORED_DEADLINE_S": "120",
                "ANCHORED_BUDGET_TOKENS_PER_DAY": str(CAP),
            }
            log = tmp_path / f"server-{i}.log"
            servers.append(stack.enter_context(AppProcess(env, log_file=log)))
        yield servers


def _call(server: AppProcess, address: str, method: str, path: str, **kw: Any) -> httpx.Response:
    """One request from the reader at ``address`` (a loopback address: its own client)."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=server.url, transport=transport, timeout=180) as client:
        return client.request(method, path, **kw)


def _not_at_a_minute_end() -> None:
    """Wait for the next clock minute when this one ends within 20 s: the rate limit's
    window is the clock minute, and a burst across two would be counted in two."""
    left = 60 - time.time() % 60
    if left < 20:
        time.sleep(left + 0.1)


def test_file_counters_hold_the_rate_limit_and_the_spend_cap_across_processes_and_threads(
    qa_index: Path, tmp_path: Path
) -> None:
    """Issue 23, finding 1. Two processes share ``file:shared.db``; each answers in many
    worker threads. Guards: the SQLite connection, made in one worker thread, works in the
    others. Before, every other thread's add failed ("SQLite objects created in a thread
    can only be used in that same thread"): the rate limit fell back to each process's own
    bucket (more than 5 a minute served) and the spend cap refused the LLM (``fallback:
    budget`` with nothing spent)."""
    state = tmp_path / "shared.db"
    with FakeOpenAIServer(default=Reply(quote_passages(k=1), usage=USAGE)) as srv:
        with _two_processes(qa_index, tmp_path, srv) as servers:
            # The rate limit: 12 searches at once from one reader, 6 to each process.
            _not_at_a_minute_end()
            with ThreadPoolExecutor(12) as pool:
                searches = list(
                    pool.map(
                        lambda i: _call(
                            servers[i % 2], "127.0.0.2", "GET", "/v1/search", params={"q": "port"}
                        ),
                        range(12),
                    )
                )
            # The spend cap: 16 asks, 4 from each of 4 readers (under their rate limit),
            # 8 at a time, half to each process.
            with ThreadPoolExecutor(8) as pool:
                asks = list(
                    pool.map(
                        lambda i: _call(
                            servers[i % 2],
                            f"127.0.0.{3 + i % 4}",
                            "POST",
                            "/v1/ask",
                            json={"question": QUESTION},
                        ),
                        range(16),
                    )
                )
        logs = "".join((tmp_path / f"server-{i}.log").read_text() for i in range(2))
        calls = len(srv.requests)
    statuses = [r.status_code for r in searches]
    assert sorted(statuses) == [200] * RATE + [429] * (12 - RATE), statuses
    items = _counters(state)
    (window,) = [v for k, v in items.items() if k.startswith("rate#127.0.0.2#")]
    assert window == {"n": RATE}

    assert [r.status_code for r in asks] == [200] * 16
    results = [r.json() for r in asks]
    billed = calls * sum(USAGE)
    assert len(results) * sum(USAGE) > CAP, "without the cap the asks would bill more"
    assert calls >= 1, "some asks were answered by the model"
    assert billed <= CAP
    fell_back = [r for r in results if r.get("reason")]
    assert fell_back and {r["fallback"] for r in fell_back} == {"budget"}
    assert sum(r["mode"] == "llm" for r in results) == calls
    (day,) = [v for k, v in items.items() if k.startswith("budget#")]
    assert day["tokens"] == billed, "every reservation was settled to the reported usage"
    assert "same thread" not in logs and "cannot be checked" not in logs, logs[-3000:]
    assert "shared store failed" not in logs, logs[-3000:]
