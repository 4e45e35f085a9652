"""The 1.5B model's replies to development questions the capable model answered too
(issue 27: the weak end of ``bench_verifier.py``).

    python tests/bench/llm_server.py &          # the local 1.5B model on :8766
    python tests/bench/weak_capture.py [--en-unanswerable 3]

Every Chinese development question of the four real sites and, per site, the first
``--en-unanswerable`` unanswerable English ones (``data/realdocs/*.jsonl``, split
``dev``) go through the real ``/v1/ask`` route with the 1.5B model's settings
(``bench_llm_answers.BENCH_ENV``: a 2,048-token context, 300 output tokens), as an owner
running that model would ask them. Each reply is written as a fixture in the format of
``tests/fixtures/llm-replies`` (question, passages, messages, the raw response) to
``data/capable/weak-dev/<qid>.json``. A fixture already there is kept: nobody edits or
redraws a reply. A question the engine answers without calling the model gets none.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

import bench_llm_answers as bench
import llm_server
import realdocs

OUT = Path(__file__).resolve().parent / "data" / "capable" / "weak-dev"


def chosen(site: str, en_unanswerable: int) -> list[dict[str, Any]]:
    """A site's Chinese development questions, then its first unanswerable English ones."""
    rows = [r for r in realdocs.load_set(realdocs.DATA / f"{site}.jsonl") if r["split"] == "dev"]
    zh = [r for r in rows if r.get("lang") == "zh"]
    en = [r for r in rows if r.get("lang", "en") == "en" and not r["answerable"]]
    return zh + en[:en_unanswerable]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=llm_server.DEFAULT_PORT)
    p.add_argument("--en-unanswerable", type=int, default=3)
    args = p.parse_args()
    base_url = f"http://127.0.0.1:{args.port}/v1"
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    for site in realdocs.SITES:
        todo = [
            q for q in chosen(site, args.en_unanswerable) if not (OUT / f"{q['qid']}.json").exists()
        ]
        if not todo:
            continue
        index = realdocs.build(site, realdocs.DEFAULT_OUT, stale_ok=True) / "index"
        qset = bench.QuestionSet(site, index, todo)
        for asked in bench.ask_all(qset, base_url, offline=False):
            bench.write_fixture(asked, rev, OUT)


if __name__ == "__main__":
    main()
