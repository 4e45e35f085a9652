"""The streamed answer's verification against the buffered one, for long replies.

    python tests/bench/bench_stream_verify.py [--index DIR] [--paragraphs 45,90]

The real app (in process) answers one question on a real index (default: the Material
for MkDocs site built by ``realdocs.py``) with the fake OpenAI-compatible server
replying ``N`` one-sentence paragraphs, each quoting a passage of the prompt (cycled),
sent at once. For each ``N``: the CPU time (process time: the app, the fake model and
the client all run in this process) and the wall time of the buffered and the streamed
``/v1/ask``, and their ratio. Target (issue 27): streamed at most 1.5x the buffered
CPU, and inside the 20 s deadline at 90 paragraphs.

Then ``/v1/search`` beside long streams (issue 23, finding 2): the same app under
uvicorn on 127.0.0.1, searches one after another, alone and while ``--streams``
streamed asks of the first ``N`` paragraphs run at once; their p50 and max.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "bench"))

from anchored_query.engine import Engine  # noqa: E402
from anchored_query.serve.app import create_app  # noqa: E402
from anchored_query.settings import Settings  # noqa: E402
from bench_latency import forget_vectors  # noqa: E402
from fakes import FakeOpenAIServer, RecordedRequest, Reply, quote_passages  # noqa: E402
from liveserver import ThreadedServer  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

DEFAULT_INDEX = ""  # the Material site, built by realdocs.py when missing
QUESTION = "How do I change the color palette of my site?"


def paragraphs(n: int) -> Any:
    def reply(request: RecordedRequest) -> str:
        quoted = [s.strip() for s in re.split(r"(?<=\]\.) ", quote_passages(k=60)(request))]
        return "\n\n".join(quoted[i % len(quoted)] for i in range(n))

    return reply


def timed(call: Any) -> tuple[float, float, Any]:
    c0, t0 = time.process_time(), time.perf_counter()
    out = call()
    return time.process_time() - c0, time.perf_counter() - t0, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--index", default=DEFAULT_INDEX)
    p.add_argument("--paragraphs", default="45,90")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--streams", type=int, default=4, help="streamed asks beside the searches")
    args = p.parse_args()
    if not args.index:
        import realdocs

        args.index = str(realdocs.build("material", realdocs.DEFAULT_OUT, stale_ok=True) / "index")
    rows = []
    with FakeOpenAIServer() as llm:
        settings = Settings(
            index=args.index,
            refresh_s=3600,
            rate_limit_per_min=0,
            llm_provider="openai",
            llm_model="fake",
            llm_base_url=llm.url,
            llm_retries=0,
        )
        engine = Engine(settings)
        client = TestClient(create_app(settings, engine=engine))
        client.post("/v1/ask", json={"question": "warm up", "mode": "extractive"})
        for n in (int(x) for x in args.paragraphs.split(",")):
            llm.default = Reply(paragraphs(n))
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.repeat):
                # Each request embeds as a first asking would (not from the vector cache).
                forget_vectors(engine)
                cpu, wall, r = timed(lambda: client.post("/v1/ask", json={"question": QUESTION}))
                shown = len(r.json()["answer"])
                best["buffered"] = min(best.get("buffered", (1e9, 0)), (cpu, wall))
                forget_vectors(engine)
                cpu, wall, r = timed(
                    lambda: client.post(
                        "/v1/ask",
                        json={"question": QUESTION},
                        headers={"Accept": "text/event-stream"},
                    )
                )
                assert r.status_code == 200
                best["streamed"] = min(best.get("streamed", (1e9, 0)), (cpu, wall))
            rows.append((n, shown, best["buffered"], best["streamed"]))
        llm.default = Reply(paragraphs(int(args.paragraphs.split(",")[0])))
        alone, beside = search_beside_streams(settings, args.streams)
    print(
        "\n| paragraphs | sentences shown | buffered CPU / wall | streamed CPU / wall "
        "| streamed ÷ buffered CPU |"
    )
    print("|---|---|---|---|---|")
    for n, shown, (bc, bw), (sc, sw) in rows:
        print(f"| {n} | {shown} | {bc:.2f} / {bw:.2f} s | {sc:.2f} / {sw:.2f} s | {sc / bc:.2f}× |")
    print("\n| /v1/search | searches | p50 | max |\n|---|---|---|---|")
    for name, ms in (("alone", alone), (f"beside {args.streams} streams", beside)):
        print(f"| {name} | {len(ms)} | {statistics.median(ms):.0f} ms | {max(ms):.0f} ms |")


def search_beside_streams(settings: Settings, streams: int) -> tuple[list[float], list[float]]:
    """Search latencies (ms) alone, then while ``streams`` streamed asks run at once."""
    import httpx

    engine = Engine(settings)

    def searches(http: httpx.Client, until: Any, least: int = 20) -> list[float]:
        out: list[float] = []
        while len(out) < least or not until():
            forget_vectors(engine)  # the same query each time: embedded each time
            t0 = time.perf_counter()
            r = http.get("/v1/search", params={"q": "color palette", "k": 10})
            assert r.status_code == 200, r.text
            out.append((time.perf_counter() - t0) * 1000)
        return out

    with (
        ThreadedServer(create_app(settings, engine=engine)) as srv,
        httpx.Client(base_url=srv.url, timeout=60) as http,
    ):
        alone = searches(http, lambda: True)

        def ask() -> None:
            with httpx.Client(base_url=srv.url, timeout=60) as own:
                headers = {"Accept": "text/event-stream"}
                own.post("/v1/ask", json={"question": QUESTION}, headers=headers).read()

        threads = [threading.Thread(target=ask) for _ in range(streams)]
        for t in threads:
            t.start()
        beside = searches(http, lambda: not any(t.is_alive() for t in threads), least=1)
        for t in threads:
            t.join()
    return alone, beside


if __name__ == "__main__":
    main()
