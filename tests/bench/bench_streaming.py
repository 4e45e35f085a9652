"""Streamed vs buffered ``/v1/ask``: time to the sources, to the first verified sentence
and to the full answer, as a reader's browser would see them.

    python tests/bench/bench_streaming.py [--index DIR] [--questions N] [--site mkdocs]
        [--first-token-s 0.4] [--tokens-per-s 40]
        [--real-url http://127.0.0.1:8765/v1 --real-model NAME --real-questions 3 [--real-only]]

The real Starlette app under uvicorn (real HTTP, as ``anchored serve`` runs it) answers
the development questions of ``tests/bench/data/realdocs/<site>.jsonl`` on that site's
real index (``/tmp/anchored-bench/realdocs/<site>/index``; the qa fixture site when it is
missing), each question streamed (``Accept: text/event-stream``) and buffered, with:

- the fake OpenAI-compatible server (``tests/fakes``) writing a three-paragraph
  answer that quotes the first three passages (about 90 output tokens, the mean of the
  real replies in site/llm-cost.md) at ``--first-token-s`` to the first token and
  ``--tokens-per-s`` after it, streamed or sent whole when it is written;
- no LLM (the extractive answerer);
- with ``--real-url``: a real model, ``--real-questions`` questions streamed only.

CPU is the process time of the whole benchmark process (the app, the fake model and
the client all run in it) per request: what the answer cost whatever the machine's load.
Prints a Markdown table of medians (seconds from sending the request) over the
questions whose streamed answer had a sentence (an abstention streams none): for a
buffered answer all three are the time to the response.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "bench"))

from anchored_query.engine import Engine  # noqa: E402
from anchored_query.serve.app import create_app  # noqa: E402
from anchored_query.settings import Settings  # noqa: E402
from bench_latency import forget_vectors  # noqa: E402
from fakes import FakeOpenAIServer, RecordedRequest, Reply, StreamRate, quote_passages  # noqa: E402
from liveserver import ThreadedServer  # noqa: E402

REALDOCS = Path("/tmp/anchored-bench/realdocs")
DATA = TESTS / "bench" / "data" / "realdocs"
_quote = quote_passages(k=3)


def three_paragraphs(request: RecordedRequest) -> str:
    """The first sentence of each of the first three passages, cited, a paragraph each."""
    return re.sub(r"(\[\d+\]\.) (?=\S)", "\\1\n\n", _quote(request))


def questions(site: str, n: int) -> list[str]:
    path = DATA / f"{site}.jsonl"
    if not path.is_file():
        return ["How do I change the port?", "How do I turn on live reload?"][:n]
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [r["question"] for r in rows if r.get("split") == "dev" and r.get("answerable")][:n]


def timed(url: str, question: str, stream: bool, **extra: Any) -> dict[str, float]:
    """Seconds to the sources, the first sentence and the end of one /v1/ask."""
    body = {"question": question, **extra}
    t0, cpu0 = time.perf_counter(), time.process_time()
    if not stream:
        response = httpx.post(url, json=body, timeout=330)
        response.raise_for_status()
        t = time.perf_counter() - t0
        answer = response.json()
        cpu = time.process_time() - cpu0
        return {
            "sources": t,
            "sentence": t,
            "final": t,
            "mode": answer["mode"] == "llm",
            "cpu": cpu,
        }
    seen: dict[str, float] = {}
    mode = False
    with httpx.stream(
        "POST", url, json=body, headers={"Accept": "text/event-stream"}, timeout=330
    ) as response:
        response.raise_for_status()
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
                seen.setdefault(event, time.perf_counter() - t0)
            elif line.startswith("data: ") and event == "final":
                mode = json.loads(line[6:])["mode"] == "llm"
    final = seen.get("final", seen.get("error", float("nan")))
    return {
        "sources": seen.get("sources", float("nan")),
        "sentence": seen.get("sentence", float("nan")),  # NaN: no sentence (abstained)
        "final": final,
        "mode": mode,
        "cpu": time.process_time() - cpu0,
    }


def run(
    index: Path, work: Path, llm: dict[str, Any], qs: list[str], modes: tuple[bool, ...]
) -> dict[bool, list[dict[str, float]]]:
    settings = Settings(
        index=str(index),
        cache_dir=str(work / "cache"),
        feedback=str(work / "feedback"),
        refresh_s=0,
        rate_limit_per_min=0,
        **llm,
    )
    out: dict[bool, list[dict[str, float]]] = {m: [] for m in modes}
    engine = Engine(settings)
    with ThreadedServer(create_app(settings, engine=engine)) as server:
        base = f"http://127.0.0.1:{server.port}"
        httpx.get(base + "/v1/health", timeout=300)  # the index loaded: no cold start
        timed(base + "/v1/ask", qs[0], False, mode="extractive")  # warm, and no model call
        for q in qs:
            for stream in modes:
                forget_vectors(engine)  # the other mode asked the same question
                out[stream].append(timed(base + "/v1/ask", q, stream))
    return out


def median(rows: list[dict[str, float]], key: str) -> str:
    values = [r[key] for r in rows if r[key] == r[key]]  # NaN out
    if not values:
        return "—"
    return f"{statistics.median(values):.2f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--site", default="mkdocs")
    p.add_argument("--index", type=Path, default=None)
    p.add_argument("--questions", type=int, default=8)
    p.add_argument("--first-token-s", type=float, default=0.4)
    p.add_argument("--tokens-per-s", type=float, default=40.0)
    p.add_argument("--real-url", default="")
    p.add_argument("--real-model", default="")
    p.add_argument("--real-questions", type=int, default=3)
    p.add_argument("--real-only", action="store_true", help="only the real model's row")
    p.add_argument("--real-context-tokens", type=int, default=1500)
    args = p.parse_args()
    index = args.index or REALDOCS / args.site / "index"
    if not (index / "manifest.json").is_file():
        from load import qa_index

        index = qa_index(Path(tempfile.mkdtemp(prefix="bench-streaming-")))
    qs = questions(args.site, args.questions)
    # Buffered replies take as long: the model writes them before the server sends them.
    rate = StreamRate(args.first_token_s, args.tokens_per_s, buffered=True)
    rows: list[tuple[str, str, list[dict[str, float]]]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAIServer(default=Reply(three_paragraphs), rate=rate) as srv,
    ):
        fake = {
            "llm_provider": "openai",
            "llm_model": "fake-model",
            "llm_base_url": srv.url,
            "llm_timeout_s": 30,
        }
        if not args.real_only:
            llm_runs = run(index, Path(tmp) / "llm", fake, qs, (True, False))
            label = (
                f"fake LLM ({args.first_token_s:g} s to first token, {args.tokens_per_s:g} tok/s)"
            )
            rows += [("streamed", label, llm_runs[True]), ("buffered", label, llm_runs[False])]
            quoting = run(index, Path(tmp) / "ext", {}, qs, (True, False))
            rows += [
                ("streamed", "extractive", quoting[True]),
                ("buffered", "extractive", quoting[False]),
            ]
        if args.real_url:
            real = {
                "llm_provider": "openai",
                "llm_model": args.real_model,
                "llm_base_url": args.real_url,
                "llm_timeout_s": 280,
                "deadline_s": 300,
                # A small local model on a CPU reads a short prompt much sooner.
                "context_tokens": args.real_context_tokens,
            }
            asked = qs[len(qs) - args.real_questions :]  # the last (shortest) ones
            real_runs = run(index, Path(tmp) / "real", real, asked, (True,))
            rows.append(("streamed", f"real model {args.real_model}", real_runs[True]))
            for r in real_runs[True]:  # whether the model answered or the fallback did
                print(f"real model: {'LLM answer' if r['mode'] else 'not the LLM'}: {r}")
    print(f"\n{len(qs)} questions ({args.site}, index {index}); medians in seconds over the")
    print("questions whose streamed answer had a sentence (answered / asked)\n")
    print("| path | answerer | to sources | to first sentence | to full answer | CPU | answered |")
    print("|---|---|---:|---:|---:|---:|---:|")
    answered: dict[str, list[int]] = {}
    for path, who, got in rows:
        if path == "streamed":
            answered[who] = [i for i, r in enumerate(got) if r["sentence"] == r["sentence"]]
        keep = [got[i] for i in answered.get(who, []) if i < len(got)]
        print(
            f"| {path} | {who} | {median(keep, 'sources')} | {median(keep, 'sentence')} "
            f"| {median(keep, 'final')} | {median(keep, 'cpu')} | {len(keep)}/{len(got)} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
