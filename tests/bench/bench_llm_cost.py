"""Tokens per ask and the price of 1,000 answers, at the default settings.

    python tests/bench/bench_llm_cost.py [--sets mkdocs,httpx,material,anchored] [--history N]

Every development question of the sets goes through the real ``/v1/ask`` route
with the default settings (``ANCHORED_LLM_CONTEXT_TOKENS`` 8192,
``ANCHORED_CONTEXT_TOKENS`` 6000, ``ANCHORED_LLM_MAX_OUTPUT_TOKENS`` 600, no
rewrite) and a stand-in model that records the prompt and answers at once, so
no model is needed. Input tokens are the prompt's estimate (4 characters a
token, as the engine sizes it) times the ratio of real to estimated tokens
measured on the cached real replies of ``bench_llm_answers.py`` (Qwen2.5's
tokenizer); output tokens are the mean of those real replies. ``--history N``
adds N earlier turns (a long conversation) to every question.

The prices are list prices per million tokens, in ``PRICES`` with their source
and the date they were read; the page ``site/llm-cost.md`` shows the table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "lambda"), str(HERE.parents[1])]

import bench_llm_answers as bench  # noqa: E402
from anchored_query.answer.prompt import estimate_tokens  # noqa: E402
from anchored_query.engine import Engine  # noqa: E402
from anchored_query.llm import Completion  # noqa: E402
from anchored_query.serve.app import create_app  # noqa: E402
from anchored_query.settings import Settings  # noqa: E402

# USD per million input / output tokens (on-demand list prices), with where they were read.
READ_ON = "2026-12-01"
PRICES: list[tuple[str, float, float, str]] = [
    ("Bedrock: Amazon Nova Micro", 0.035, 0.14, "pristren.com (Bedrock on-demand table)"),
    ("Bedrock: Amazon Nova Lite", 0.06, 0.24, "pristren.com, tokenmix.ai"),
    ("Bedrock: Amazon Nova Pro", 0.80, 3.20, "pristren.com, tokenmix.ai"),
    ("Bedrock: Claude 3 Haiku", 0.25, 1.25, "pristren.com, inventivehq.com"),
    ("Bedrock: Claude 3.5 Haiku", 0.80, 4.00, "deploybase.ai (AWS pricing page, 2026-03-21)"),
    ("Bedrock: Claude Haiku 4.5", 1.00, 5.00, "clauder-navi.com (global endpoint)"),
    ("OpenAI: gpt-4.1-nano", 0.10, 0.40, "deploybase.ai, aumiqx.com (OpenAI pricing page)"),
    ("OpenAI: gpt-4o-mini", 0.15, 0.60, "deploybase.ai, aumiqx.com, openrouter.ai"),
    ("OpenAI: gpt-4.1-mini", 0.40, 1.60, "deploybase.ai, aumiqx.com"),
    ("OpenAI: gpt-4o", 2.50, 10.00, "deploybase.ai, aumiqx.com"),
]


class Recorder:
    """A stand-in model: records each prompt, answers at once with one cited sentence."""

    name = "recorder"

    def __init__(self) -> None:
        self.prompts: list[list[Any]] = []

    def complete(self, messages: Any, **_: Any) -> Completion:
        self.prompts.append(list(messages))
        return Completion("See the first passage [1].", None, None, "stop")


def estimated(messages: list[Any]) -> int:
    return sum(
        estimate_tokens(m.content if hasattr(m, "content") else m["content"]) + 8 for m in messages
    )


def real_ratio() -> tuple[float, float, int]:
    """(real / estimated input tokens, mean output tokens, replies) over cached real replies."""
    ratios, outputs = [], []
    for path in bench.REPLIES.glob("*.json"):
        entry = json.loads(path.read_text("utf-8"))
        usage = json.loads(entry["raw"]).get("usage") or {}
        messages = entry["request"]["messages"]
        if usage.get("prompt_tokens") and "<passages>" in json.dumps(messages):
            ratios.append(usage["prompt_tokens"] / estimated(messages))
            outputs.append(usage.get("completion_tokens") or 0)
    if not ratios:
        return 1.0, 0.0, 0
    return statistics.mean(ratios), statistics.mean(outputs), len(ratios)


def main(argv: list[str] | None = None) -> int:
    from starlette.testclient import TestClient

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="mkdocs,httpx,material,anchored")
    parser.add_argument("--history", type=int, default=0)
    args = parser.parse_args(argv)
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": "x " * 400}
        for i in range(args.history * 2)
    ]
    sizes: list[int] = []
    for qset in bench.question_sets(args.sets.split(","), 10_000):
        settings = Settings.from_env(
            {
                "ANCHORED_INDEX": str(qset.index),
                "ANCHORED_LLM_PROVIDER": "openai",
                "ANCHORED_LLM_MODEL": "m",
                "ANCHORED_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                "ANCHORED_RATE_LIMIT_PER_MIN": "0",
                "ANCHORED_CACHE_DIR": str(bench.WORK / "cache"),
            }
        )
        recorder = Recorder()
        engine = Engine(settings, llm=recorder)  # type: ignore[arg-type]
        with TestClient(create_app(settings, engine=engine)) as http:
            for q in qset.questions:
                http.post("/v1/ask", json={"question": q["question"], "history": history})
        sizes += [estimated(p) for p in recorder.prompts]
    ratio, out_tokens, replies = real_ratio()
    tokens_in = statistics.mean(sizes) * ratio
    p95 = sorted(sizes)[int(0.95 * (len(sizes) - 1))] * ratio
    print(f"{len(sizes)} asks; one model call each (ANCHORED_LLM_REWRITE off)")
    print(
        f"input tokens per ask: mean {tokens_in:.0f}, p95 {p95:.0f} (estimate × {ratio:.2f}, "
        f"the real/estimated ratio of {replies} real replies)"
    )
    print(f"output tokens per ask: {out_tokens:.0f} (mean of the real replies)\n")
    cap = Settings.from_env({"ANCHORED_INDEX": "x"}).llm_max_output_tokens
    print(
        f"| model (USD per 1M in / out, read {READ_ON}) | per 1,000 answers "
        f"| with {cap} tokens out (the cap) | source |"
    )
    print("|---|---|---|---|")
    for name, p_in, p_out, source in PRICES:
        cost = (tokens_in * p_in + out_tokens * p_out) / 1000
        worst = (tokens_in * p_in + cap * p_out) / 1000
        print(f"| {name} (${p_in:g} / ${p_out:g}) | ${cost:.2f} | ${worst:.2f} | {source} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
