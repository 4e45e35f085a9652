"""Record the LLM path's prompts for a capable model to answer (issue 27, step 1).

    python tests/bench/capable_capture.py [--split dev] [--sites mkdocs httpx material anchored]

The method is ``../shared/tools/README.md``'s: the real ``/v1/ask`` path (default
settings, an OpenAI-compatible provider) sends each development question of
``tests/bench/data/realdocs/<site>.jsonl`` to ``model_proxy.py``, which saves the
request as ``prompts/KEY.json`` (and answers 503 until a reply is written, so the
function answers with its quote meanwhile). Besides the proxy's files, this writes
``cases.jsonl``: per question its site, ``qid``, style, the request's ``KEY`` and the
numbered passages the model was shown (as the verifier reads them), so the verifier
can be replayed on the recorded replies without retrieving again.

Everything lands in ``tests/bench/data/capable/`` (``prompts/``, ``replies/``,
``labels/``, ``cases.jsonl``). Replies are written by a capable model with the brief
``act-as-model.md`` word for word; labels by a separate run with ``judge-support.md``.
Nobody edits either afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import realdocs  # noqa: E402

PROXY = HERE.parents[2] / "shared" / "tools" / "model_proxy.py"
OUT = HERE / "data" / "capable"
PORT = 18555


def wait_for(port: int, timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"model_proxy.py did not listen on {port}")


def last_key(out: Path) -> str:
    lines = (out / "calls.log").read_text().splitlines()
    return lines[-1].split()[1]


def capture(sites: list[str], split: str, out: Path) -> list[dict[str, Any]]:
    from anchored_query.engine import Engine
    from anchored_query.question.validation import AskRequest
    from anchored_query.settings import Settings
    from anchored_query.types import Turn

    cases: list[dict[str, Any]] = []
    for site in sites:
        root = realdocs.build(site, realdocs.DEFAULT_OUT, stale_ok=True)
        settings = Settings(
            index=str(root / "index"),
            refresh_s=3600,
            rate_limit_per_min=0,
            llm_provider="openai",
            llm_model="recorded",
            llm_base_url=f"http://127.0.0.1:{PORT}/v1",
            llm_api_key="sk-recorded",
            llm_retries=0,
        )
        engine = Engine(settings)
        rows = [
            r for r in realdocs.load_set(realdocs.DATA / f"{site}.jsonl") if r["split"] == split
        ]
        for row in rows:
            history = tuple(Turn(t["role"], t["content"]) for t in row.get("history") or [])
            request = AskRequest(question=row["question"], history=history)
            prepared = engine.prepare(request)
            # The passages the model is shown (a failed call replaces them with the
            # quote's, so they are taken first).
            shown = [dataclasses.asdict(p) for p in prepared.passages]
            engine.finish(prepared, engine.answer(prepared))
            cases.append(
                {
                    "site": site,
                    "qid": row["qid"],
                    "style": row["style"],
                    "answerable": row["answerable"],
                    "lang": row.get("lang", "en"),
                    "key": last_key(out),
                    "passages": shown,
                }
            )
            print(f"{site} {row['qid']} {cases[-1]['key']}", flush=True)
    return cases


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--split", default="dev")
    p.add_argument("--sites", nargs="+", default=list(realdocs.SITES))
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args()
    out = Path(args.out)
    for sub in ("prompts", "replies", "labels"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    proxy = subprocess.Popen(
        [sys.executable, str(PROXY), "--dir", str(out), "--port", str(PORT)],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for(PORT)
        cases = capture(args.sites, args.split, out)
    finally:
        proxy.terminate()
        proxy.wait(10)
    with open(out / "cases.jsonl", "w", encoding="utf-8") as f:
        for case in cases:
            f.write(json.dumps(case, ensure_ascii=False) + "\n")
    print(f"{len(cases)} prompts in {out / 'prompts'}")


if __name__ == "__main__":
    main()
