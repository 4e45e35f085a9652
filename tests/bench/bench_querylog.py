"""The question log's cost: what it adds to /v1/ask, and the report's memory on a big log.

    python tests/bench/bench_querylog.py [--index DIR] [--asks N] [--records N ...]

1. ``/v1/ask`` (extractive, through the ASGI app in process) on the qa fixture
   site, the log off and on (a local folder), asks interleaved so both see the
   same machine load; p50 of each and the difference; plus the direct cost of
   what the request does for the log (``ask_record`` + ``submit``).
2. ``anchored report``'s collection pass (no clustering) over logs of the given
   sizes, each in a fresh process: peak resident memory and time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = [
    "Which port does the server use by default?",
    "How do I upgrade the package?",
    "What is the best sourdough recipe?",
    "How do I turn on live reload?",
]


def qa_index(work: Path) -> Path:
    project = work / "qa"
    if not (project / ".anchored" / "index" / "manifest.json").exists():
        shutil.copytree(ROOT / "tests" / "fixtures" / "qa-site", project, dirs_exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--quiet"],
            cwd=project,
            check=True,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        )
    return project / ".anchored" / "index"


def bench_ask(index: Path, n: int, work: Path) -> None:
    from anchored_query.owner.querylog import ask_record
    from anchored_query.serve.app import create_app
    from anchored_query.settings import Settings
    from starlette.testclient import TestClient

    def settings(log: str) -> Settings:
        return Settings(
            index=str(index),
            cache_dir=str(work / "cache"),
            feedback=str(work / "feedback"),
            refresh_s=0,
            rate_limit_per_min=0,
            question_log=log,
        )

    log_dir = work / "log"
    shutil.rmtree(log_dir, ignore_errors=True)
    off_app, on_app = create_app(settings("")), create_app(settings(str(log_dir)))
    times: dict[str, list[float]] = {"off": [], "on": []}
    with TestClient(off_app) as off, TestClient(on_app) as on:
        for client in (off, on):  # warm up: models loaded, first answers
            for q in QUESTIONS:
                client.post("/v1/ask", json={"question": q})
        for i in range(n):
            q = QUESTIONS[i % len(QUESTIONS)]
            for name, client in (("off", off), ("on", on))[:: 1 if i % 2 else -1]:
                t = time.perf_counter()
                r = client.post("/v1/ask", json={"question": q})
                times[name].append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200
        qlog = on_app.state.question_log
        result = r.json()
    p50 = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"/v1/ask p50, {n} asks each: log off {p50['off']:.2f} ms, on {p50['on']:.2f} ms, ", end=""
    )
    print(f"difference {p50['on'] - p50['off']:+.2f} ms")
    print(f"  records written {qlog.stats.written}, dropped {qlog.stats.dropped}")
    t = time.perf_counter()
    for _ in range(10_000):
        qlog.submit(ask_record(result, QUESTIONS[0], 12.5))
    per = (time.perf_counter() - t) / 10_000 * 1e6
    print(f"  on the request path (ask_record + submit): {per:.1f} µs per ask")


def make_log(folder: Path, records: int) -> None:
    from anchored_query.owner.querylog import ask_record

    per_object = 500
    n = 0
    while n < records:
        rows = []
        for i in range(n, min(records, n + per_object)):
            refused = i % 20 == 0
            result = {
                "id": f"{i:016x}",
                "build_id": "0123456789abcdef",
                "mode": "extractive",
                "abstained": refused,
                "citations": [{"url": f"page{i % 50}/#s{i % 7}"}, {"url": f"page{i % 13}/"}],
            }
            question = f"question {i % 20_000} about topic {i % 97}?"
            row = ask_record(result, question, 5 + i % 300)
            row["t"] = f"2026-03-{1 + (i * 28) // records:02d}T12:00:00.000000Z"
            rows.append(json.dumps(row))
        day = folder / "asks" / rows[0][rows[0].index('"t": "') + 6 :][:10]
        day.mkdir(parents=True, exist_ok=True)
        (day / f"{n:09d}.jsonl.gz").write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
        n += per_object


# Peak RSS from VmHWM (ru_maxrss would carry the parent's size across the exec).
COLLECT = """
import sys, time
from anchored_query.owner.report import collect
t = time.perf_counter()
r = collect(sys.argv[1])
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(r.total, len(r.gaps), round(time.perf_counter() - t, 1), int(hwm) // 1024)
"""


def bench_report(sizes: list[int], work: Path) -> None:
    for size in sizes:
        folder = work / f"log-{size}"
        shutil.rmtree(folder, ignore_errors=True)
        make_log(folder, size)
        out = subprocess.run(
            [sys.executable, "-c", COLLECT, str(folder)], capture_output=True, text=True, check=True
        ).stdout.split()
        total, gaps, seconds, rss = out
        mb = sum(p.stat().st_size for p in folder.rglob("*.gz")) / 1e6
        print(
            f"report collection, {int(total):,} records ({mb:.0f} MB gzipped): {seconds} s, "
            f"peak RSS {rss} MB, {gaps} distinct gap questions kept"
        )
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--index", default=None)
    p.add_argument("--asks", type=int, default=200)
    p.add_argument("--records", type=int, nargs="*", default=[10_000, 1_000_000])
    p.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "anchored-bench-qlog"))
    args = p.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    index = Path(args.index) if args.index else qa_index(work)
    if args.asks:
        bench_ask(index, args.asks, work)
    bench_report(args.records, work)


if __name__ == "__main__":
    main()
