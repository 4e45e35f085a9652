"""Does the quoted answer start from the unit that holds the fact? Today's unit blend
against one refitted on the reader questions' facts, held out by site.

    python tests/bench/unit_choice.py [--dump FILE] [--load FILE]

Every answerable question with facts of the reader sets (``reader:<site>``, seven
sites; each fact a sentence of the section its question was written from) and of the
realdocs sets is answered as ``/v1/ask`` does (``min_confidence=0``: never refused),
and the units the answerer scored are read with their features (``_Scored``: term
coverage, headings, the section's retrieval score, the semantic match mapped to
[0, 1], times the unit's factors). A unit holding a fact is a positive.

``extractive.BLEND`` is a linear blend of the four; here it is refitted as a
conditional logit over each question's units (softmax; the positives' summed
probability) on six reader sites and scored on the seventh, then fitted on all seven
and scored on the realdocs sets. Printed: top-1 (the best-scored unit holds a fact)
per set for today's blend and the refitted one; questions whose facts no scored unit
holds are left out.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from anchored_query.answer import extractive
from bench_extractive import (
    READER_SITES,
    REALDOCS,
    decide,
    index_of,
    load_retriever,
    load_set,
)

Units = list[dict[str, Any]]


def collect() -> list[dict[str, Any]]:
    """Each question's scored units, as ``extractive.answer_extractively`` leaves them."""
    scale = extractive.SEMANTIC_SCALES["all-MiniLM-L6-v2"]
    captured: dict[str, Any] = {}
    choose = extractive._choose_quotes

    def spy(scored: list[Any], sections: list[Any]) -> Any:
        captured.update(scored=scored, sections=sections)
        return choose(scored, sections)

    extractive._choose_quotes = spy
    out = []
    sets = [f"reader:{s}" for s in READER_SITES] + [f"realdocs:{s}" for s in REALDOCS]
    for name in sets:
        retriever, model = load_retriever(index_of(name, Path()))  # the realdocs indexes
        for row in load_set(name):
            if not row["answerable"] or not row.get("facts"):
                continue
            captured.clear()
            decide(retriever, model, row)
            if not captured:
                continue
            facts = [" ".join(f.split()) for f in row["facts"]]
            sections = captured["sections"]
            units = []
            for c in captured["scored"]:
                text = " ".join(c.unit.text.split())
                semantic = 0.0
                if c.cosine is not None:
                    semantic = max(0.0, (c.cosine - scale[0]) / (scale[1] - scale[0]))
                units.append(
                    {
                        "positive": any(f in text or (len(text) > 30 and text in f) for f in facts),
                        "x": [c.lexical, c.heading, sections[c.section].prior, semantic],
                        "factor": c.factor,
                    }
                )
            out.append({"set": name, "qid": row["qid"], "units": units})
        print(f"{name}: done", file=sys.stderr)
    extractive._choose_quotes = choose
    return out


def arrays(questions: list[dict[str, Any]]) -> list[tuple[np.ndarray, np.ndarray]]:
    data = []
    for q in questions:
        x = np.array([[u["factor"] * v for v in u["x"]] for u in q["units"]])
        y = np.array([u["positive"] for u in q["units"]])
        if y.any():
            data.append((x, y))
    return data


def fit(data: list[tuple[np.ndarray, np.ndarray]], start: np.ndarray) -> np.ndarray:
    """The conditional logit's weights (Adam on the negative log-likelihood, small L2)."""
    w, m, v = start.astype(float).copy(), np.zeros(len(start)), np.zeros(len(start))
    for t in range(1, 601):
        grad = 0.02 * w
        for x, y in data:
            z = x @ w
            p = np.exp(z - z.max())
            p /= p.sum()
            grad += p @ x - (p[y] @ x[y]) / max(float(p[y].sum()), 1e-12)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= 0.05 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w


def top1(w: np.ndarray, data: list[tuple[np.ndarray, np.ndarray]]) -> float:
    return float(np.mean([y[int(np.argmax(x @ w))] for x, y in data])) if data else math.nan


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--dump", help="write the collected units to this JSON Lines file")
    p.add_argument("--load", help="read units written by --dump")
    args = p.parse_args()
    if args.load:
        questions = [json.loads(line) for line in Path(args.load).read_text().splitlines()]
    else:
        questions = collect()
    if args.dump:
        Path(args.dump).write_text("".join(json.dumps(q) + "\n" for q in questions))
    b = extractive.BLEND
    today = np.array([b.lexical, b.heading, b.prior, b.semantic])
    reader = [q for q in questions if q["set"].startswith("reader:")]
    print("| set | questions | today's blend | refitted |\n|---|---|---|---|")
    for site in READER_SITES:
        held = arrays([q for q in reader if q["set"] == f"reader:{site}"])
        w = fit(arrays([q for q in reader if q["set"] != f"reader:{site}"]), today)
        cells = f"{len(held)} | {top1(today, held):.3f} | {top1(w, held):.3f}"
        print(f"| reader:{site} (held out) | {cells} |")
    w = fit(arrays(reader), today)
    for site in REALDOCS:
        data = arrays([q for q in questions if q["set"] == f"realdocs:{site}"])
        print(f"| realdocs:{site} | {len(data)} | {top1(today, data):.3f} | {top1(w, data):.3f} |")
    weights = ", ".join(f"{x / w[0]:.2f}" for x in w)
    print(f"\nrefitted on all reader sites (lexical, heading, retrieval, semantic): {weights}")


if __name__ == "__main__":
    main()
