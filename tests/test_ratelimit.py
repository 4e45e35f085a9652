"""Rate limits: clients by network (IPv6 /64), one limit across instances (DynamoDB).

The shared store runs as moto's DynamoDB over real HTTP (``dynamoserver``); the
apps are real ``create_app`` instances, each with its own store client, as five
warm Lambda instances would be.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading
from pathlib import Path
from typing import Any

import anchored_query.guard.shared_state as shared_state
import httpx
import pytest
from anchored_query.guard.ratelimit import RateLimiter, SharedRateLimiter, client_key
from anchored_query.guard.shared_state import (
    Counters,
    DynamoDBCounters,
    MemoryCounters,
    SQLiteCounters,
    StateUnavailable,
)
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from dynamoserver import DynamoTable, aws_env, count_in_sqlite, dynamo_table
from s3server import moto_s3

__all__ = ["aws_env", "dynamo_table", "moto_s3"]  # fixtures used by name


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------- who a client is


def test_ipv6_clients_are_their_64() -> None:
    assert client_key("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:2::1") == client_key("2001:db8:1:2:ffff::9")
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("2001:db8:1:2ff::1", ipv6_prefix=56) == "2001:db8:1:200::/56"
    assert client_key("fe80::1%eth0") == "fe80::/64"


def test_ipv4_clients_are_their_address() -> None:
    assert client_key("203.0.113.5") == "203.0.113.5"
    assert client_key("203.0.113.6") != client_key("203.0.113.5")
    assert client_key("::ffff:203.0.113.5") == "203.0.113.5"
    assert client_key("testclient") == "testclient"


# ---------------------------------------------------------------- the stores


@pytest.fixture(params=["memory", "file", "dynamodb"])
def counters(request: pytest.FixtureRequest, tmp_path: Path) -> Counters:
    if request.param == "memory":
        return MemoryCounters()
    if request.param == "file":
        return SQLiteCounters(tmp_path / "state.sqlite")
    table: DynamoTable = request.getfixturevalue("dynamo_table")
    return DynamoDBCounters(table.name, client=table.new_client())


def test_counters_add_up_to_the_limit_and_no_further(counters: Counters) -> None:
    far = 4_000_000_000.0
    assert counters.add("k", {"a": 3, "b": 1}, limits={"a": 5}, expires_at=far) == {"a": 3, "b": 1}
    assert counters.add("k", {"a": 2, "b": 1}, limits={"a": 5}, expires_at=far) == {"a": 5, "b": 2}
    # Refused: nothing is added, not even to the counters without a limit.
    assert counters.add("k", {"a": 1, "b": 1}, limits={"a": 5}, expires_at=far) is None
    assert counters.add("k", {"a": -4, "b": 0}, expires_at=far) == {"a": 1, "b": 2}
    assert counters.add("k", {"a": 9}, limits={"a": 5}, expires_at=far) is None
    assert counters.add("other", {"a": 5}, limits={"a": 5}, expires_at=far) == {"a": 5}


def test_sqlite_counters_are_shared_by_two_handles_and_expire(tmp_path: Path) -> None:
    clock = Clock()
    one = SQLiteCounters(tmp_path / "s.sqlite", clock=clock)
    two = SQLiteCounters(tmp_path / "s.sqlite", clock=clock)
    assert one.add("k", {"n": 2}, limits={"n": 3}, expires_at=clock.now + 60) == {"n": 2}
    assert two.add("k", {"n": 2}, limits={"n": 3}, expires_at=clock.now + 60) is None
    clock.now += 61
    assert two.add("k", {"n": 2}, limits={"n": 3}, expires_at=clock.now + 60) == {"n": 2}


def _count_in_process(path: str, tries: int) -> int:
    store = SQLiteCounters(path)
    return sum(
        store.add("k", {"n": 1}, limits={"n": 50}, expires_at=4e9) is not None for _ in range(tries)
    )


def test_sqlite_counters_hold_across_processes(tmp_path: Path) -> None:
    """Three processes on one file (anchored serve with workers, or restarted): 50 in all."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(3) as pool:
        allowed = pool.starmap(count_in_sqlite, [(str(tmp_path / "s.sqlite"), 40)] * 3)
    assert sum(allowed) == 50


def test_unreachable_dynamodb_raises_state_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens
    store = DynamoDBCounters("t", region="us-east-1", endpoint_url=f"http://127.0.0.1:{port}")
    with pytest.raises(StateUnavailable):
        store.add("k", {"n": 1}, limits={"n": 1}, expires_at=4e9)


def test_a_refund_is_never_retried_an_increment_may_be(monkeypatch: pytest.MonkeyPatch) -> None:
    """An endpoint that reads the request and never answers: a lost answer may mean applied."""
    monkeypatch.setattr("anchored_query.guard.shared_state.DYNAMODB_READ_TIMEOUT_S", 0.3)
    received: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            received.append(conn.recv(65536))
            held.append(conn)  # never answered, closed at the end

    threading.Thread(target=accept, daemon=True).start()
    port = server.getsockname()[1]
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    store = DynamoDBCounters("t", region="us-east-1", endpoint_url=f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(StateUnavailable):
            store.add("k", {"n": 1}, limits={"n": 5}, expires_at=4e9)
        increments = len(received)
        with pytest.raises(StateUnavailable):
            store.add("k", {"n": -1}, expires_at=4e9)
        refunds = len(received) - increments
    finally:
        server.close()
        for conn in held:
            conn.close()
    assert increments == 2 and refunds == 1


# ---------------------------------------------------------------- the limiter


def test_shared_window_rolls_over_and_refused_clients_cost_one_call() -> None:
    clock = Clock(1_800_000_000.0)  # a minute boundary
    limiter = SharedRateLimiter(3, MemoryCounters(clock), local=RateLimiter(0), clock=clock)
    assert [limiter.check("c") for _ in range(3)] == [0.0, 0.0, 0.0]
    calls = limiter.store_calls
    waits = [limiter.check("c") for _ in range(10)]
    assert all(w > 0 for w in waits) and waits[0] == pytest.approx(60.0)
    assert limiter.store_calls == calls + 1, "a refused client is remembered until the window ends"
    assert limiter.check("d") == 0.0
    clock.now += 60
    assert limiter.check("c") == 0.0


def _settings(index: Path, tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "index": str(index),
        "cache_dir": str(tmp_path / "cache"),
        "feedback": str(tmp_path / "feedback"),
        "refresh_s": 0,
    }
    values.update(overrides)
    return Settings(**values)


def _statuses(apps: list[Any], ips: list[str], path: str = "/v1/search?q=port") -> list[int]:
    """One GET per address, spread round-robin over the apps, all at once."""

    async def run() -> list[int]:
        clients = [
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=apps[i % len(apps)], client=(ip, 40000)),
                base_url="http://anchored",
            )
            for i, ip in enumerate(ips)
        ]
        try:
            responses = await asyncio.gather(*(c.get(path) for c in clients))
        finally:
            for c in clients:
                await c.aclose()
        return [r.status_code for r in responses]

    return asyncio.run(run())


def test_one_ip_across_five_instances_gets_the_limit(
    qa_index: Path, tmp_path: Path, dynamo_table: DynamoTable
) -> None:
    """Five instances, one table: 200 requests from one address, 30 a minute served."""
    settings = _settings(
        qa_index, tmp_path, rate_limit_per_min=30, shared_state=f"dynamodb:{dynamo_table.name}"
    )
    apps = []
    for _ in range(5):  # each instance with its own DynamoDB client, as on Lambda
        shared_state._shared.clear()
        apps.append(create_app(settings))
    statuses = _statuses(apps, ["203.0.113.5"] * 200)
    assert set(statuses) == {200, 429}
    # One item per clock minute the burst touched (usually one; two if it straddles).
    windows = [v["n"] for k, v in dynamo_table.items().items() if k.startswith("rate#203.0.113.5#")]
    assert 1 <= len(windows) <= 2
    assert all(n <= 30 for n in windows), windows
    # Never more served than counted (a retried update may count one request twice).
    assert 25 <= statuses.count(200) <= sum(windows)


def test_two_hundred_addresses_of_one_64_are_one_client(qa_index: Path, tmp_path: Path) -> None:
    network = ipaddress.IPv6Network("2001:db8:77:42::/64")
    ips = [str(network[i * 7919 + 1]) for i in range(200)]
    app = create_app(_settings(qa_index, tmp_path, rate_limit_per_min=30))
    statuses = _statuses([app], ips)
    assert statuses.count(200) == 30 and statuses.count(429) == 170
    # A neighbour network is another client.
    assert _statuses([app], ["2001:db8:77:43::1"]) == [200]


def test_rate_limit_holds_per_instance_when_the_store_is_down(
    qa_index: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DynamoDB unreachable: each instance still limits on its own (fail open, logged once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    shared_state._shared.clear()
    settings = _settings(qa_index, tmp_path, rate_limit_per_min=5, shared_state="dynamodb:gone")
    with caplog.at_level(logging.WARNING, logger="anchored.query"):
        app = create_app(settings)
        statuses = _statuses([app], ["198.51.100.9"] * 12)
    shared_state._shared.clear()
    assert statuses.count(200) == 5 and statuses.count(429) == 7
    failures = [r for r in caplog.records if "shared store failed" in r.getMessage()]
    assert len(failures) == 1


def test_limiter_is_thread_safe_under_concurrent_checks() -> None:
    limiter = SharedRateLimiter(50, MemoryCounters(), local=RateLimiter(0))
    allowed: list[float] = []

    def hammer() -> None:
        for _ in range(40):
            if limiter.check("x") == 0.0:
                allowed.append(1)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(allowed) == 50
