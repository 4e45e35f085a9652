"""The reader model's training data (issue 26) is whole and consistent: what the capable
model wrote (questions, labels) and what training reads (pairs) agree line for line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "bench" / "data" / "reader"
SITES = ("mkdocs", "httpx", "material", "anchored", "starlette", "drf", "hatch")
LABELS = {"answers", "on_topic", "unrelated"}


def rows(name: str) -> list[dict[str, Any]]:
    text = (DATA / name).read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("site", SITES)
def test_questions_labels_and_pairs_agree(site: str) -> None:
    questions = {q["qid"]: q for q in rows(f"questions-{site}.jsonl")}
    assert len(questions) == len(rows(f"questions-{site}.jsonl")), "qids repeat"
    kinds = {q["kind"] for q in questions.values()}
    assert kinds == {"answerable", "near_miss"}
    for q in questions.values():
        if q["kind"] == "answerable":
            assert q["section"] and q["fact"], q["qid"]
        else:
            assert q["near"] and q["proof"], q["qid"]  # each near miss keeps its search proof
    labels = rows(f"labels-{site}.jsonl")
    assert {r["label"] for r in labels} <= LABELS
    pairs = rows(f"pairs-{site}.jsonl")
    assert len(pairs) == len(labels)
    by_key = {(r["qid"], r["section"]): r["label"] for r in labels}
    for p in pairs:
        assert p["qid"] in questions and p["site"] == site
        assert by_key[(p["qid"], p["section"])] == p["label"]
        assert p["passage"].strip() and p["question"] == questions[p["qid"]]["question"]
    # Every answerable question was labelled with its source section among its candidates.
    labelled = {p["qid"] for p in pairs}
    assert {k for k, q in questions.items() if q["kind"] == "answerable"} <= labelled


def test_the_briefs_are_kept_word_for_word() -> None:
    for brief in ("write-questions.md", "label-pairs.md"):
        text = (DATA / "briefs" / brief).read_text("utf-8")
        assert text.startswith("# Brief:") and "OUT" in text
