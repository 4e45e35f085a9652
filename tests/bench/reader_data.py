"""The reader model's training data (issue 26): what the capable model reads, and what it wrote.

Three steps, each a subcommand; the capable model's part (a helper session given a brief
from ``data/reader/briefs/`` word for word) sits between them:

    python tests/bench/reader_data.py sections      # 1. sample sections to write questions on
    #   helper sessions: write-questions.md  -> data/reader/questions-<site>.jsonl
    python tests/bench/reader_data.py candidates    # 2. today's retrieval's top passages
    #   helper sessions: label-pairs.md      -> data/reader/labels-<site>.jsonl
    python tests/bench/reader_data.py pairs         # 3. (question, passage, label) for training

The sites are the realdocs builds (``tests/bench/realdocs.py``, starlette included). Sections
are sampled with a fixed seed from those with 200-4000 characters of text, release notes
and changelogs left out. Candidates are the top :data:`TOP_K` sections of the engine's own
ranking of the question (its search forms, as ``/v1/ask``), each shown as its best-ranked
chunk, the text the query function hands on; an answerable question's source section is
added when the ranking missed it, so every answerable question has a positive to label.

Only data is written to the repository: questions, labels and the pairs, each passage's
text included, so that ``tools/train_reader.py`` needs no site build to reproduce the model.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from anchored_query.question.query_forms import search_forms
from bench_extractive import load_retriever, ranked_sections
from reader_model import passage_of
from realdocs import DEFAULT_OUT

DATA = Path(__file__).resolve().parent / "data" / "reader"
WORK = Path("/tmp/anchored-bench/reader")
#: Sections sampled per site; its keys are the training sites.
SAMPLE = {
    "mkdocs": 90,
    "httpx": 80,
    "material": 110,
    "anchored": 80,
    "starlette": 80,
    "drf": 80,
    "hatch": 80,
}
SITES = tuple(SAMPLE)
TOP_K = 6
SEED = 26
_SKIP_PAGE = re.compile(r"release-notes|changelog|about/|sponsor|contributing", re.I)
LABELS = ("answers", "on_topic", "unrelated")


def index_dir(site: str) -> Path:
    return DEFAULT_OUT / site / "index"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def sections(site: str) -> list[dict[str, Any]]:
    """The sampled sections of ``site``: id, url, heading path and text."""
    rows = read_jsonl(index_dir(site) / "sections.jsonl")
    chunked = {str(c["parent"]) for c in read_jsonl(index_dir(site) / "chunks.jsonl")}
    fit = [
        r
        for r in rows
        if r["id"] in chunked and 200 <= len(r["text"]) <= 4000 and not _SKIP_PAGE.search(r["id"])
    ]
    rng = random.Random(f"{SEED}:{site}")
    picked = sorted(rng.sample(fit, min(SAMPLE[site], len(fit))), key=lambda r: r["id"])
    return [
        {
            "section": r["id"],
            "heading": " > ".join(r.get("heading_path") or [r.get("title") or ""]),
            "text": r["text"],
        }
        for r in picked
    ]


def cmd_sections(sites: list[str]) -> None:
    for site in sites:
        rows = sections(site)
        write_jsonl(WORK / f"sections-{site}.jsonl", rows)
        print(f"{site}: {len(rows)} sections -> {WORK / f'sections-{site}.jsonl'}")


def passage_text(chunk: dict[str, Any]) -> str:
    return passage_of(chunk.get("heading_path") or [], str(chunk["text"]))


def candidates_for(retriever: Any, question: str, source: str) -> list[dict[str, Any]]:
    hits = retriever.rank(search_forms(question, []))
    ranked = ranked_sections(retriever, hits, TOP_K)
    out = [
        {"section": section, "text": passage_text(chunk), "rank": rank}
        for rank, (section, chunk) in enumerate(ranked, 1)
    ]
    if source and source not in dict(ranked):
        first = next((c for c in retriever.index.chunks if str(c["parent"]) == source), None)
        if first is not None:
            out.append({"section": source, "text": passage_text(first), "rank": 0})
    return out


def cmd_candidates(sites: list[str]) -> None:
    for site in sites:
        path = DATA / f"questions-{site}.jsonl"
        if not path.exists():
            print(f"{site}: no {path.name} yet", file=sys.stderr)
            continue
        retriever, _ = load_retriever(index_dir(site))
        out = []
        for q in read_jsonl(path):
            source = str(q.get("section") or "")
            for c in candidates_for(retriever, q["question"], source):
                out.append({"qid": q["qid"], "question": q["question"], **c})
        write_jsonl(WORK / f"candidates-{site}.jsonl", out)
        print(f"{site}: {len(out)} pairs -> {WORK / f'candidates-{site}.jsonl'}")


def cmd_pairs(sites: list[str]) -> None:
    for site in sites:
        cands = WORK / f"candidates-{site}.jsonl"
        labels_path = DATA / f"labels-{site}.jsonl"
        if not (cands.exists() and labels_path.exists()):
            print(f"{site}: candidates or labels missing", file=sys.stderr)
            continue
        labels = {(r["qid"], r["section"]): r["label"] for r in read_jsonl(labels_path)}
        questions = {q["qid"]: q for q in read_jsonl(DATA / f"questions-{site}.jsonl")}
        out, missing = [], 0
        for c in read_jsonl(cands):
            label = labels.get((c["qid"], c["section"]))
            if label not in LABELS:
                missing += 1
                continue
            q = questions[c["qid"]]
            out.append(
                {
                    "site": site,
                    "qid": c["qid"],
                    "question": c["question"],
                    "kind": q.get("kind", "answerable"),
                    "section": c["section"],
                    "rank": c["rank"],
                    "passage": c["text"],
                    "label": label,
                }
            )
        write_jsonl(DATA / f"pairs-{site}.jsonl", out)
        print(f"{site}: {len(out)} pairs ({missing} without a label)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=("sections", "candidates", "pairs"))
    p.add_argument("--sites", nargs="+", choices=SITES, default=list(SITES))
    args = p.parse_args(argv)
    {"sections": cmd_sections, "candidates": cmd_candidates, "pairs": cmd_pairs}[args.step](
        args.sites
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
