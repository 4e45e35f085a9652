"""Calibrate the support tests of ``anchored_query.citations.support`` on hand-labelled pairs.

``tests/fixtures/support-labels.jsonl`` holds sentence/passage pairs from real
documentation (MkDocs, HTTPX, Material for MkDocs), labelled ``supported`` or
not; about half of the unsupported ones are plausible claims on the passage's
topic. For each pair this prints the fact check, the pairing check, the lexical
score and the semantic score per embedding model, then precision/recall of
"supported" for the shipped thresholds and a sweep.

    .venv/bin/python tests/bench/calibrate_support.py [--models all-MiniLM-L6-v2 ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "lambda")]

from anchored_query.citations.facts import Haystack, claims  # noqa: E402
from anchored_query.citations.verify import ParsedSentence  # noqa: E402
from anchored_query.citations.verify import support as sup  # noqa: E402
from anchored_query.types import Passage  # noqa: E402

from build_index.embedder import Embedder, get_model  # noqa: E402

LABELS = ROOT / "tests" / "fixtures" / "support-labels.jsonl"
# Pairs shown by real answers, labelled by reading the passage (the LLM judge's labels).
JUDGE_LABELS = ROOT / "tests" / "bench" / "data" / "llm-judge-labels.jsonl"


def load() -> list[dict[str, object]]:
    return [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line]


def passage_of(row: dict[str, object]) -> Passage:
    text = str(row["passage"])
    path = [str(h) for h in row["heading_path"]]  # type: ignore[attr-defined]
    return Passage(
        n=1,
        chunk_ids=[f"{row['section']}~0"],
        section_id=str(row["section"]),
        page="page/",
        anchor=str(row["section"]),
        title=str(row["title"]),
        heading_path=path,
        text=text,
        highlight=text,
    )


def pr(pred: list[bool], gold: list[bool]) -> tuple[float, float, int, int]:
    tp = sum(p and g for p, g in zip(pred, gold, strict=True))
    fp = sum(p and not g for p, g in zip(pred, gold, strict=True))
    fn = sum(g and not p for p, g in zip(pred, gold, strict=True))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, fp, fn


def verifier_report(models: list[str]) -> None:
    """Precision/recall of the whole check of a cited sentence (``Checker.check``: facts,
    code, pairing, polarity, lexical and semantic support) on both label files."""
    from anchored_query.citations.checking import Checker, Item

    sets = {
        "support-labels": load(),
        "llm-judge-labels": [
            json.loads(line)
            for line in JUDGE_LABELS.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ],
    }
    for name in models:
        support = sup.make_support(Embedder(get_model(name)), name)
        for label, rows in sets.items():
            gold, pred = [], []
            for i, row in enumerate(rows):
                text = str(row["passage"])
                p = Passage(
                    n=1,
                    chunk_ids=[f"{label}-{i}~0"],
                    section_id=f"{label}-{i}",  # the support callable caches by section
                    page="page/",
                    anchor=f"s{i}",
                    title=str(row.get("title", "")),
                    heading_path=[str(h) for h in row.get("heading_path", [])],  # type: ignore[attr-defined]
                    text=text,
                    highlight=text,
                )
                checker = Checker({1: p}, support)
                item = Item.of(
                    0,
                    ParsedSentence(str(row["sentence"]), [1]),
                    [1],
                    paragraph=0,
                    footer=(),
                    no_coverage=False,
                )
                gold.append(bool(row["supported"]))
                pred.append(checker.check(item, [1], strict=False) is None)
            precision, recall, fp, fn = pr(pred, gold)
            print(
                f"verifier ({name}) on {label} ({len(rows)} pairs): precision {precision:.2f} "
                f"recall {recall:.2f} (fp {fp}, fn {fn})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", nargs="*", default=list(sup.SEMANTIC_SCALE))
    parser.add_argument(
        "--verifier", action="store_true", help="only the whole check, on both label files"
    )
    args = parser.parse_args()
    if args.verifier:
        verifier_report(args.models)
        return
    rows = load()
    gold = [bool(r["supported"]) for r in rows]
    cosines: dict[str, list[float]] = {}
    for name in args.models:
        embedder = Embedder(get_model(name))
        qv = [embedder.embed_query(str(r["sentence"])) for r in rows]
        pv = embedder.embed_passages([str(r["passage"]) for r in rows])
        cosines[name] = [float(q @ p) for q, p in zip(qv, pv, strict=True)]

    lexical: list[float] = []
    facts_ok: list[bool] = []
    print(
        f"{'id':>3} {'gold':5} {'kind':17} {'facts':5} {'lex':>5} "
        + " ".join(f"{m[:8]:>8}" for m in cosines)
    )
    for i, row in enumerate(rows):
        p = passage_of(row)
        s = ParsedSentence(str(row["sentence"]), [1])
        body = sup.content_terms(p.text)
        heading = sup.content_terms(" ".join([p.title, *p.heading_path]))
        lex = sup.lexical_support(sup.content_terms(s.text), body, heading)
        lexical.append(-1.0 if lex is None else lex)
        # the fact and pairing checks alone (what verify requires besides the scores)
        hay = Haystack(p)
        ok = all(hay.has(c) for c in claims(s.text)) and not sup.pairing_conflicts(s.text, [p])
        facts_ok.append(ok)
        print(
            f"{row['id']:>3} {gold[i]!s:5} {row['kind']:17} {ok!s:5} {lexical[-1]:5.2f} "
            + " ".join(f"{cosines[m][i]:8.3f}" for m in cosines)
        )

    def report(label: str, pred: list[bool]) -> None:
        precision, recall, fp, fn = pr(pred, gold)
        print(f"{label:58} precision {precision:.2f} recall {recall:.2f} (fp {fp}, fn {fn})")

    print()
    report("facts + pairing only", facts_ok)
    for t in (0.5, 0.6, 0.7, 0.8):
        report(
            f"facts + lexical >= {t}",
            [f and x >= t for f, x in zip(facts_ok, lexical, strict=True)],
        )
    for name, cos in cosines.items():
        shipped = sup.SEMANTIC_SCALE.get(name)
        los = sorted({0.0, 0.5, 0.6, 0.7, 0.75, 0.8, *([shipped[0]] if shipped else [])})
        for lo in los:
            sem = [sup.rescale(c, lo, 1.0) for c in cos]
            for t in (0.6, 0.65, 0.7, 0.75):
                pred = [
                    f
                    and x >= sup.LEXICAL_FLOOR
                    and sup.LEXICAL_WEIGHT * x + (1 - sup.LEXICAL_WEIGHT) * m >= t
                    for f, x, m in zip(facts_ok, lexical, sem, strict=True)
                ]
                is_shipped = (
                    shipped and math.isclose(lo, shipped[0]) and math.isclose(t, sup.SUPPORT_MIN)
                )
                mark = " <- shipped" if is_shipped else ""
                report(
                    f"{name}: weighted(lex, rescale(cos, {lo}, 1)) >= {t}{mark}",
                    pred,
                )


if __name__ == "__main__":
    main()
