"""Load test: the query app under uvicorn, many concurrent clients, extractive and LLM answers.

    python tests/bench/load.py [--seconds 60] [--clients 50] [--index DIR]
                               [--memory-requests 10000] [--threads 40,0]

Scenarios (each stops by itself after ``--seconds``):

1. ``extractive``: no LLM; clients alternate ``GET /v1/search`` and ``POST /v1/ask``.
2. ``llm (threads=N)``: the same against a fake OpenAI-compatible server (``tests/fakes``)
   that answers every call after 1 s (``Sleep(1.0, Reply(quote_passages(k=2)))``). An ask
   makes two calls (query rewrite, answer), so it holds a worker thread for ~2 s; the app's
   thread limiter (``ANCHORED_WORKER_THREADS``; anyio's default is 40, the app raises it to
   100 when an LLM is configured) bounds how many asks are in progress at once. Run once
   per value of ``--threads`` (0 = the app's default).
3. ``memory``: extractive mix until ``--memory-requests`` requests (or ``--memory-seconds``),
   the server's RSS sampled every 1,000 requests.

The server runs in a subprocess on 127.0.0.1 (a free port) with the rate limit off
(``ANCHORED_RATE_LIMIT_PER_MIN=0``); the index is the qa fixture site built with the
plugin (as ``tests/conftest.py`` does) unless ``--index`` names one. Markdown tables on
stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from fakes import FakeOpenAIServer, Reply, Sleep, quote_passages  # noqa: E402
from liveserver import AppProcess  # noqa: E402

QUESTIONS = [
    "Which port does the server use by default?",
    "How do I change the port?",
    "How do I upgrade Skylark?",
    "What are the requirements?",
    "How do I publish to S3?",
    "Live reload does not work",
    "address already in use",
    "How do I deploy to GitHub Pages?",
]
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "theta",
    "kappa",
    "lambda",
    "sigma",
    "omega",
]


@dataclass
class Sample:
    kind: str  # "search" or "ask"
    status: int  # 0: the request failed without an HTTP status
    seconds: float
    detail: str = ""


@dataclass
class Run:
    name: str
    wall_s: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    rss_mb: list[tuple[int, float]] = field(default_factory=list)  # (requests done, MB)
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the index


def qa_index(workdir: Path) -> Path:
    """Build tests/fixtures/qa-site with the plugin (like tests/conftest.py); the index dir."""
    project = workdir / "project"
    shutil.copytree(TESTS / "fixtures" / "qa-site", project)
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--quiet"],
        cwd=project,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=True,
        timeout=600,
    )
    return project / ".anchored" / "index"


# ---------------------------------------------------------------- clients


async def client_loop(
    n: int,
    http: httpx.AsyncClient,
    deadline: float,
    samples: list[Sample],
    stop: Callable[[], bool],
) -> None:
    """One client: search and ask in turn, back to back, until the deadline."""
    for i in itertools.count():
        if time.monotonic() >= deadline or stop():
            return
        # Every question is new (real readers rarely repeat each other word for word):
        # nothing can be served from a cache that would hide a per-question leak.
        question = (
            f"{QUESTIONS[(n + i) % len(QUESTIONS)]} ({WORDS[(n * 7 + i) % len(WORDS)]} {n}.{i})"
        )
        kind = "ask" if (n + i) % 2 else "search"
        t0 = time.perf_counter()
        try:
            if kind == "ask":
                response = await http.post("/v1/ask", json={"question": question})
            else:
                response = await http.get("/v1/search", params={"q": question})
            status, detail = response.status_code, ""
            if status != 200:
                detail = response.text[:200]
        except httpx.HTTPError as exc:
            status, detail = 0, f"{type(exc).__name__}: {exc}"
        samples.append(Sample(kind, status, time.perf_counter() - t0, detail))


async def drive(
    url: str,
    *,
    clients: int,
    seconds: float,
    pid: int,
    max_requests: int | None = None,
    sample_every: int = 1000,
) -> Run:
    """``clients`` concurrent clients for ``seconds`` (or until ``max_requests``)."""
    run = Run("")
    # Idle connections are dropped well before the server's keep-alive timeout (30 s,
    # below): reusing one the server is closing at that moment is a client-side race.
    limits = httpx.Limits(
        max_connections=clients, max_keepalive_connections=clients, keepalive_expiry=5.0
    )
    process = psutil.Process(pid)
    deadline = time.monotonic() + seconds

    def enough() -> bool:
        return max_requests is not None and len(run.samples) >= max_requests

    async def monitor() -> None:
        next_mark = 0
        while time.monotonic() < deadline and not enough():
            if len(run.samples) >= next_mark:
                run.rss_mb.append((len(run.samples), process.memory_info().rss / 2**20))
                next_mark += sample_every
            await asyncio.sleep(0.05)
        run.rss_mb.append((len(run.samples), process.memory_info().rss / 2**20))

    async with httpx.AsyncClient(base_url=url, timeout=120.0, limits=limits) as http:
        # Warm-up (model loaded, first-call costs paid); not measured.
        await http.get("/v1/search", params={"q": "warm up"})
        await http.post("/v1/ask", json={"question": "warm up the answerer"})
        t0 = time.monotonic()
        deadline = t0 + seconds
        watcher = asyncio.create_task(monitor())
        await asyncio.gather(
            *(client_loop(n, http, deadline, run.samples, enough) for n in range(clients))
        )
        run.wall_s = time.monotonic() - t0
        await watcher
    return run


# ---------------------------------------------------------------- scenarios


def server_env(index: Path, workdir: Path, **extra: str) -> dict[str, str]:
    return {
        "ANCHORED_INDEX": str(index),
        "ANCHORED_CACHE_DIR": str(workdir / "cache"),
        "ANCHORED_FEEDBACK": str(workdir / "feedback"),
        "ANCHORED_RATE_LIMIT_PER_MIN": "0",
        "ANCHORED_REFRESH_S": "60",
        **extra,
    }


def run_scenario(name: str, env: dict[str, str], workdir: Path, **drive_args: Any) -> Run:
    log = workdir / f"server-{name.replace(' ', '_')}.log"
    keep_alive = ("--timeout-keep-alive", "30")
    with AppProcess(env, log_file=log, extra_args=keep_alive) as server:
        rss_before = psutil.Process(server.pid).memory_info().rss / 2**20
        run = asyncio.run(drive(server.url, pid=server.pid, **drive_args))
    run.name = name
    run.notes.append(f"server RSS after start-up {rss_before:.0f} MB")
    return run


# ---------------------------------------------------------------- report


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def table(runs: list[Run]) -> str:
    lines = [
        "| scenario | endpoint | requests | errors | throughput (req/s) | p50 (ms) | p99 (ms) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        for kind in ("search", "ask", "all"):
            chosen = [s for s in run.samples if kind in ("all", s.kind)]
            ok = [s.seconds * 1000 for s in chosen if s.status == 200]
            errors = len(chosen) - len(ok)
            lines.append(
                f"| {run.name} | {kind} | {len(chosen)} | {errors} | "
                f"{len(chosen) / run.wall_s:.1f} | {pct(ok, 0.5):.0f} | {pct(ok, 0.99):.0f} |"
            )
    return "\n".join(lines)


def memory_table(run: Run) -> str:
    points = run.rss_mb
    xs = [float(n) for n, _ in points]
    ys = [mb for _, mb in points]
    slope = statistics.linear_regression(xs, ys).slope * 1000 if len(points) > 2 else 0.0
    # The same without the first point (start-up growth: caches, arenas, first answers).
    settled = statistics.linear_regression(xs[1:], ys[1:]).slope * 1000 if len(points) > 3 else 0.0
    lines = [
        "| requests | RSS (MB) |",
        "|---:|---:|",
        *(f"| {n} | {mb:.1f} |" for n, mb in points),
        "",
        "| first (MB) | last (MB) | max (MB) | slope (MB / 1,000 requests) "
        "| slope after the first 1,000 |",
        "|---:|---:|---:|---:|---:|",
        f"| {ys[0]:.1f} | {ys[-1]:.1f} | {max(ys):.1f} | {slope:+.2f} | {settled:+.2f} |",
    ]
    return "\n".join(lines)


def errors_of(runs: list[Run]) -> str:
    out = []
    for run in runs:
        bad = [s for s in run.samples if s.status != 200]
        if bad:
            kinds = sorted({(s.status, s.detail[:120]) for s in bad})[:5]
            out.append(f"- {run.name}: {len(bad)} errors, e.g. {kinds}")
    return "\n".join(out) or "- none"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="per scenario")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--index", type=Path, default=None, help="an index folder (default: build one)")
    p.add_argument("--threads", default="40,0", help="ANCHORED_WORKER_THREADS values, LLM runs")
    p.add_argument("--llm-delay", type=float, default=1.0, help="seconds the fake LLM takes")
    p.add_argument("--memory-requests", type=int, default=10_000)
    p.add_argument("--memory-seconds", type=float, default=900.0, help="upper bound")
    p.add_argument("--skip", default="", help="comma-separated: extractive,llm,memory")
    args = p.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    with tempfile.TemporaryDirectory(prefix="anchored-load-") as tmp:
        workdir = Path(tmp)
        t0 = time.monotonic()
        index = args.index or qa_index(workdir)
        print(f"index {index} (ready in {time.monotonic() - t0:.0f}s)", file=sys.stderr)
        runs: list[Run] = []
        common = {"clients": args.clients, "seconds": args.seconds}

        if "extractive" not in skip:
            runs.append(run_scenario("extractive", server_env(index, workdir), workdir, **common))
            print(table(runs[-1:]), file=sys.stderr)

        if "llm" not in skip:
            behaviour = Sleep(args.llm_delay, Reply(quote_passages(k=2)))
            with FakeOpenAIServer(default=behaviour) as llm:
                for threads in [int(t) for t in args.threads.split(",") if t.strip()]:
                    env = server_env(
                        index,
                        workdir,
                        ANCHORED_LLM_PROVIDER="openai",
                        ANCHORED_LLM_MODEL="fake-model",
                        ANCHORED_LLM_BASE_URL=llm.url,
                        ANCHORED_LLM_API_KEY="sk-load-test-0000",
                        ANCHORED_LLM_TIMEOUT_S="30",
                        ANCHORED_WORKER_THREADS=str(threads),
                    )
                    label = f"llm {args.llm_delay:g}s, threads={threads or '100 (default)'}"
                    llm.reset()
                    runs.append(run_scenario(label, env, workdir, **common))
                    modes = [s for s in runs[-1].samples if s.kind == "ask"]
                    runs[-1].notes.append(f"LLM calls received: {len(llm.requests)}")
                    print(table(runs[-1:]), f"({len(modes)} asks)", file=sys.stderr)

        memory: Run | None = None
        if "memory" not in skip:
            memory = run_scenario(
                "memory",
                server_env(index, workdir),
                workdir,
                clients=args.clients,
                seconds=args.memory_seconds,
                max_requests=args.memory_requests,
            )

    print(f"## Load: {args.clients} concurrent clients, {args.seconds:g} s per scenario\n")
    print(table(runs))
    print("\nErrors:\n" + errors_of(runs + ([memory] if memory else [])))
    for run in runs:
        for note in run.notes:
            print(f"- {run.name}: {note}")
    if memory is not None:
        print(
            f"\n## Memory: {len(memory.samples)} requests (search/ask mix, "
            f"{args.clients} clients, {memory.wall_s:.0f} s)\n"
        )
        print(memory_table(memory))
        print()
        print(table([memory]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
