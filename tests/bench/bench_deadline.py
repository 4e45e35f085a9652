"""The request deadline with the shipped defaults: how long `/v1/ask` takes when the model
hangs, fails or is slow, in each combination of the rewrite and answer calls.

    python tests/bench/bench_deadline.py [--deadline 20] [--index DIR]

The app is the real Starlette app (in-process TestClient) with ANCHORED_DEADLINE_S as
given (default: the shipped 20 s) and ANCHORED_LLM_TIMEOUT_S longer than it, against the
fake OpenAI-compatible server over real HTTP (``tests/fakes``), which can accept a request
and never answer (``Hang``). Before the deadline existed, a hanging rewrite (2 x 8 s) plus a
hanging answer (2 x 12 s) made one ask take 40.6 s, past Lambda's 30 s Timeout: a 502.
Prints a Markdown table: seconds to the answer, mode, fallback code, calls the server saw
and how many it saw cancelled (the connection closed when the engine gave up).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "bench"))

from anchored_query.serve.app import create_app  # noqa: E402
from anchored_query.settings import Settings  # noqa: E402
from fakes import FakeOpenAIServer, Hang, Reply, Sleep, Status, quote_passages  # noqa: E402
from load import qa_index  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

QUESTION = "How do I change the port?"


def cases(deadline: float) -> list[tuple[str, list[Any] | None, list[Any]]]:
    """(name, rewrite replies or None for rewrite off, answer replies)."""
    forever = [Hang()] * 6
    failing = [Status(503)] * 12
    slow = [Sleep(deadline + 30, Reply("too late [1]."))] * 6
    fine = [Reply(quote_passages(k=1))] * 2
    return [
        ("answer hangs", None, forever),
        ("answer fails (503)", None, failing),
        ("answer slower than the deadline", None, slow),
        ("rewrite on, both hang", forever[:1], forever),
        ("rewrite hangs, answer fine", forever[:1], fine),
        ("rewrite fine, answer hangs", [Reply("port settings")], forever),
        ("slow rewrite, failing answer", slow[:1], failing),
        ("model fine (reference)", None, fine),
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--deadline", type=float, default=20.0, help="ANCHORED_DEADLINE_S")
    p.add_argument("--index", type=Path, default=None, help="an index (default: build one)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="anchored-deadline-") as tmp:
        work = Path(tmp)
        index = args.index or qa_index(work)
        print(f"ANCHORED_DEADLINE_S={args.deadline:g}, ANCHORED_LLM_TIMEOUT_S=600\n")
        print("| case | seconds to the answer | status | mode | fallback | calls | cancelled |")
        print("|---|---|---|---|---|---|---|")
        for name, rewrite, answer in cases(args.deadline):
            with FakeOpenAIServer() as srv:
                srv.script(*(rewrite or []), *answer)
                settings = Settings(
                    index=str(index),
                    cache_dir=str(work / "cache"),
                    feedback=str(work / "feedback"),
                    refresh_s=0,
                    llm_provider="openai",
                    llm_model="fake-model",
                    llm_base_url=srv.url,
                    llm_timeout_s=600.0,
                    deadline_s=args.deadline,
                    llm_rewrite=rewrite is not None,
                )
                with TestClient(create_app(settings)) as client:
                    assert client.get("/v1/health").status_code == 200  # index loaded
                    t0 = time.monotonic()
                    response = client.post("/v1/ask", json={"question": QUESTION})
                    took = time.monotonic() - t0
                body = response.json()
                calls, cancelled = len(srv.requests), len(srv.disconnected)
            print(
                f"| {name} | {took:.2f} | {response.status_code} | {body.get('mode', '-')} "
                f"| {body.get('fallback', '-')} | {calls} | {cancelled} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
