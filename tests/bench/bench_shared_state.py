"""What the shared counters add to a request: DynamoDB round trips (moto over HTTP) vs memory.

    python tests/bench/bench_shared_state.py [--index INDEX_DIR] [--n 200]

Per operation, one at a time, in process, against moto's DynamoDB server on
127.0.0.1 (``tests/dynamoserver.py``), SQLite and memory:

- one conditional ``add`` (what a rate-limit check or a budget reserve costs);
- a rate-limit check through :class:`SharedRateLimiter` (allowed path);
- a budget reserve + settle pair (what one LLM call adds), without a client (``anchored
  ask``) and for one (an HTTP request: its share is counted too, two more store calls);
- with ``--index``: ``POST /v1/search`` and ``/v1/ask`` (extractive) through the
  ASGI app, rate limit in memory vs in DynamoDB.

Moto is a Python server on the same busy machine, so its round trip is far
slower than DynamoDB's from Lambda in the same region (single-digit ms); the
count of round trips per request is what carries over.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "lambda"))

from dynamoserver import aws_client, create_table  # noqa: E402
from s3server import CREDENTIALS, REGION, MotoS3  # noqa: E402


def timed(fn: Callable[[int], Any], n: int) -> dict[str, float]:
    """Median and p95 in ms of ``fn(i)`` over ``n`` calls (after 5 warm-up calls)."""
    for i in range(5):
        fn(-1 - i)
    samples = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return {
        "median_ms": round(statistics.median(samples), 2),
        "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, help="an index directory for the HTTP figures")
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    import os

    from anchored_query.guard.budget import Budget, BudgetLimits
    from anchored_query.guard.ratelimit import RateLimiter, SharedRateLimiter
    from anchored_query.guard.shared_state import DynamoDBCounters, MemoryCounters, SQLiteCounters

    server = MotoS3().start()
    os.environ.update(
        AWS_ACCESS_KEY_ID=CREDENTIALS["aws_access_key_id"],
        AWS_SECRET_ACCESS_KEY=CREDENTIALS["aws_secret_access_key"],
        AWS_DEFAULT_REGION=REGION,
        AWS_ENDPOINT_URL=server.endpoint_url,
    )
    table = f"bench-{uuid.uuid4().hex[:8]}"
    create_table(aws_client(server, "dynamodb"), table)
    tmp = Path(tempfile.mkdtemp())
    stores = {
        "memory": MemoryCounters(),
        "sqlite": SQLiteCounters(tmp / "state.sqlite"),
        "dynamodb (moto)": DynamoDBCounters(table, client=aws_client(server, "dynamodb")),
    }
    far = time.time() + 3600
    results: dict[str, Any] = {}
    for name, store in stores.items():
        row = {
            "add": timed(
                lambda i, s=store: s.add(
                    f"k{i % 50}", {"n": 1}, limits={"n": 10**9}, expires_at=far
                ),
                args.n,
            ),
        }
        limiter = SharedRateLimiter(10**6, store, local=RateLimiter(0))
        row["rate_limit_check"] = timed(lambda i, lim=limiter: lim.check(f"c{i}"), args.n)
        budget = Budget(store, BudgetLimits(tokens_per_day=10**12, tokens_per_hour=10**12))

        def llm_call(i: int, b: Budget = budget) -> None:
            b.settle(b.reserve(50_000, 1024), 13_000, 300)

        row["budget_reserve_settle"] = timed(llm_call, args.n)

        def client_call(i: int, b: Budget = budget) -> None:  # an HTTP request's: its share too
            b.settle(b.reserve(50_000, 1024, f"203.0.113.{i % 50}"), 13_000, 300)

        row["budget_reserve_settle_client"] = timed(client_call, args.n)
        results[name] = row

    if args.index:
        results["http"] = http_figures(args.index, table, tmp, args.n)
    server.stop()
    print(json.dumps(results, indent=2))


def http_figures(index: Path, table: str, tmp: Path, n: int) -> dict[str, Any]:
    """POST /v1/search and extractive /v1/ask through the app: rate limit in memory vs DynamoDB."""
    import httpx
    from anchored_query.serve.app import create_app
    from anchored_query.settings import Settings

    out: dict[str, Any] = {}
    for name, state in (("memory", ""), ("dynamodb (moto)", f"dynamodb:{table}")):
        settings = Settings(
            index=str(index),
            cache_dir=str(tmp / f"cache-{name[:3]}"),
            feedback=str(tmp / "feedback"),
            refresh_s=0,
            rate_limit_per_min=10**5,
            shared_state=state,
        )
        app = create_app(settings)

        async def run(app: Any = app) -> dict[str, Any]:
            transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 1234))
            async with httpx.AsyncClient(transport=transport, base_url="http://a") as c:

                async def one(path: str, body: dict[str, Any]) -> list[float]:
                    samples = []
                    for _ in range(n // 4 + 5):
                        t = time.perf_counter()
                        r = await c.post(path, json=body)
                        assert r.status_code == 200, r.text
                        samples.append((time.perf_counter() - t) * 1000)
                    return sorted(samples[5:])

                search = await one("/v1/search", {"q": "how do I configure the plugin"})
                ask = await one(
                    "/v1/ask", {"question": "how do I configure the plugin", "mode": "extractive"}
                )
                return {
                    "search_median_ms": round(statistics.median(search), 1),
                    "ask_extractive_median_ms": round(statistics.median(ask), 1),
                }

        out[name] = asyncio.run(run())
    return out


if __name__ == "__main__":
    main()
