"""The labelling input for the recorded replies (issue 27, step 4).

    python tests/bench/capable_judge_input.py [--batches 3]

For every case of ``tests/bench/data/capable/cases.jsonl`` with a reply, one item for
``judge-support.md``: ``key``, ``question``, the ``reply``, its ``sentences`` as the
verifier splits them (:func:`parse_answer`: each ``text`` with the passage numbers it
``cites``) and the text of every passage cited, by number. Blind to what the verifier
decides. Written as ``labels/input-K.json``, one per batch of the judges, and
``labels/input-weak.json`` / ``input-weakdev.json`` for the 1.5B model's replies
(``tests/fixtures/llm-replies``, ``weak-dev/``). An input file already there is kept:
its labels were made from it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from anchored_query.citations.verify import parse_answer

DATA = Path(__file__).resolve().parent / "data" / "capable"
QUESTIONS = Path(__file__).resolve().parent / "data" / "realdocs"


def questions() -> dict[str, str]:
    """qid -> the question as the judge reads it (a follow-up with its earlier turns)."""
    out: dict[str, str] = {}
    for path in sorted(QUESTIONS.glob("*.jsonl")):
        for line in path.open(encoding="utf-8"):
            row = json.loads(line)
            earlier = " / ".join(f"{t['role']}: {t['content']}" for t in row.get("history") or [])
            out[row["qid"]] = (f"(earlier: {earlier}) " if earlier else "") + row["question"]
    return out


def item_of(case: dict[str, Any], root: Path, asked: dict[str, str]) -> dict[str, Any] | None:
    reply_path = root / "replies" / f"{case['key']}.txt"
    if not reply_path.exists():
        return None
    reply = reply_path.read_text(encoding="utf-8")
    question = asked[case["qid"]]
    passages = {p["n"]: p for p in case["passages"]}
    sentences = parse_answer(reply, known=[n for n, p in passages.items() if not p["excluded"]])
    cited = sorted({n for s in sentences for n in s.citations if n in passages})
    return {
        "key": case["key"],
        "question": question,
        "reply": reply,
        "sentences": [{"text": s.text, "cites": list(s.citations)} for s in sentences],
        "passages": {str(n): passages[n]["text"] for n in cited},
    }


WEAK = Path(__file__).resolve().parents[1] / "fixtures" / "llm-replies"


def weak_items(folder: Path = WEAK, prefix: str = "weak-") -> list[dict[str, Any]]:
    """The 1.5B model's recorded replies (tests/fixtures/llm-replies; ``weak-dev/``), as
    judge items keyed ``prefix`` + the fixture's name."""
    items = []
    for path in sorted(folder.glob("*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        if rec.get("finish_reason") == "length":
            continue  # (never verified: the quoted answer replaces a reply cut short)
        row = (
            rec["question"] if isinstance(rec["question"], dict) else {"question": rec["question"]}
        )
        earlier = " / ".join(f"{t['role']}: {t['content']}" for t in row.get("history") or [])
        passages = {p["n"]: p for p in rec["passages"]}
        sentences = parse_answer(
            rec["reply"], known=[n for n, p in passages.items() if not p["excluded"]]
        )
        cited = sorted({n for s in sentences for n in s.citations if n in passages})
        items.append(
            {
                "key": f"{prefix}{path.stem}",
                "question": (f"(earlier: {earlier}) " if earlier else "") + row["question"],
                "reply": rec["reply"],
                "sentences": [{"text": s.text, "cites": list(s.citations)} for s in sentences],
                "passages": {str(n): passages[n]["text"] for n in cited},
            }
        )
    return items


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--batches", type=int, default=3)
    args = p.parse_args()
    root = Path(args.data)
    cases = [json.loads(line) for line in (root / "cases.jsonl").open(encoding="utf-8")]
    asked = questions()
    items = [i for i in (item_of(c, root, asked) for c in cases) if i is not None]
    for k in range(args.batches):
        batch = items[k :: args.batches]
        out = root / "labels" / f"input-{k + 1}.json"
        if out.exists():
            continue  # (labelled already: its labels were made from this input)
        out.write_text(json.dumps(batch, ensure_ascii=False, indent=1), encoding="utf-8")
        print(out, len(batch), sum(len(i["sentences"]) for i in batch), "sentences")
    for name, weak in (
        ("weak", weak_items()),
        ("weakdev", weak_items(root / "weak-dev", "weakdev-")),
    ):
        out = root / "labels" / f"input-{name}.json"
        if out.exists():
            continue  # (labelled already: its labels were made from this input)
        out.write_text(json.dumps(weak, ensure_ascii=False, indent=1), encoding="utf-8")
        print(out, len(weak), sum(len(i["sentences"]) for i in weak), "sentences")


if __name__ == "__main__":
    main()
