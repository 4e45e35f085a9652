"""Does a reader model pay? Ranking and refusal without and with it, in one run (issue 26).

    python tests/bench/bench_reader.py --reader DIR [--split dev|test|all] [--depth 8]
        [--fold material,anchored=/tmp/reader-b] [--sites material anchored]

A reader model is made by ``tools/train_reader.py`` from the capable model's labelled
pairs (``tests/bench/data/reader/``). Per realdocs site (``tests/bench/data/realdocs/``:
questions written the way users ask in the projects' issues, near misses among them;
the index of ``tests/bench/realdocs.py``), for the questions of ``--split``:

- **ranking**: nDCG@10 and recall@10 of the sections as today's retrieval ranks them,
  and with the reader reordering the top ``--depth`` sections (each read as its best
  chunk) by its relevance, alone and fused with today's order (reciprocal ranks);
- **refusal**: the no-LLM answer today (answerable questions answered, near misses
  refused), and the reader's curve: answered against refused as a threshold on its best
  P(answers) over the answerer's passages moves;
- **cost**: the reader's time per question (ms, p50), beside today's whole answer.

With ``--features`` the reader is ``reader_features.py``'s logistic regression over four
cheap features (no new model), fitted on the labelled pairs of every site but the one
measured: every site is held out.

A site listed in a ``--fold`` is read by that fold's model, trained without it
(``tools/train_reader.py --sites <the others> --out DIR``): a held-out site. Other sites
are read by ``--reader``, which may have seen them (``seen`` in the table). The quote is
not measured with a reader: no model so far ranks or refuses better than today's on a
held-out site, so none was wired into the answerer.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from anchored_query.owner.evaluation import ndcg_at, recall_at
from anchored_query.retrieval.ranking import rrf
from bench_extractive import (
    REALDOCS,
    Tally,
    after,
    gold_ids,
    history_of,
    index_of,
    load_retriever,
    load_set,
    pct,
    quantile,
    ranked_sections,
    retrieve,
    score,
)
from reader_model import Reader, passage_of, reader_question

THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def run_site(
    site: str, reader: Any, split: str, depth: int, dump: TextIO | None = None
) -> dict[str, Any]:
    retriever, model = load_retriever(index_of(f"realdocs:{site}", Path("/tmp")))
    retriever.rank(["warm up"])
    rows = load_set(f"realdocs:{site}", split)
    today = Tally()
    ndcg: dict[str, list[float]] = {"today": [], "reader": [], "fused": []}
    recall: dict[str, list[float]] = {"today": [], "reader": []}
    curve: list[tuple[bool, float]] = []
    read_ms: list[float] = []
    for row in rows:
        question = reader_question(row["question"], history_of(row))
        passages, hits = retrieve(retriever, row["question"], history_of(row))
        t0 = time.perf_counter()
        today_payload = after(row, passages, hits, retriever, model)
        score(row, today_payload, today)
        today.times.append((time.perf_counter() - t0) * 1000)

        sections = ranked_sections(retriever, hits, 30)
        top = sections[:depth]
        t0 = time.perf_counter()
        reading = reader.read(
            question, [passage_of(c.get("heading_path") or [], c["text"]) for _, c in top]
        )
        read_ms.append((time.perf_counter() - t0) * 1000)
        ids = [sid for sid, _ in sections]
        order = sorted(range(len(top)), key=lambda i: -float(reading.relevance[i]))
        reranked = [ids[i] for i in order] + ids[depth:]
        # Fused: reciprocal-rank fusion of today's order and the reader's (ties: today's).
        fusion = rrf([np.arange(len(top)), np.array(order, dtype=np.int64)], len(top))
        fused = [ids[i] for i in np.argsort(-fusion, kind="stable")] + ids[depth:]
        if row["answerable"]:
            gold = gold_ids(row)
            ndcg["today"].append(ndcg_at(ids, gold, 10))
            ndcg["reader"].append(ndcg_at(reranked, gold, 10))
            ndcg["fused"].append(ndcg_at(fused, gold, 10))
            recall["today"].append(recall_at(ids, gold, 10))
            recall["reader"].append(recall_at(reranked, gold, 10))

        # Refusal: the reader reads the answerer's own passages.
        shown = [p for p in passages if not p.excluded][:depth]
        t0 = time.perf_counter()
        read = reader.read(question, [passage_of(p.heading_path, p.text) for p in shown])
        read_ms[-1] += (time.perf_counter() - t0) * 1000
        curve.append((bool(row["answerable"]), float(read.answers.max(initial=0.0))))
        if dump is not None:
            record = {"site": site, "qid": row["qid"], "answerable": bool(row["answerable"])}
            record.update(reader=curve[-1][1], today=today_payload.get("_confidence"))
            dump.write(json.dumps(record) + "\n")
    return {
        "rows": len(rows),
        "today": today,
        "ndcg": ndcg,
        "recall": recall,
        "curve": curve,
        "read_ms": read_ms,
    }


def pair_aucs(site: str, reader: Any) -> tuple[float, float, float] | None:
    """On ``site``'s labelled pairs: ROC AUC of *answers* against the rest by the embedder's
    cosine, by the four-feature regression fitted without the site, and by ``reader``."""
    from reader_features import DATA, auc, fit, load
    from reader_features import score as feature_score

    x, y = load()
    if site not in x:
        return None
    path = DATA / f"pairs-{site}.jsonl"
    rows = [json.loads(ln) for ln in path.read_text("utf-8").splitlines() if ln.strip()]
    others = [s for s in x if s != site]
    weights = fit(np.concatenate([x[s] for s in others]), np.concatenate([y[s] for s in others]))
    read = np.array([float(reader.read(r["question"], [r["passage"]]).answers[0]) for r in rows])
    return (
        auc(x[site][:, 0], y[site]),
        auc(feature_score(weights, x[site]), y[site]),
        auc(read, y[site]),
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--reader", type=Path, help="a model for the other sites")
    p.add_argument(
        "--features",
        action="store_true",
        help="read with reader_features.py's logistic regression, fitted without each site",
    )
    p.add_argument("--split", default="all", choices=("dev", "test", "all"))
    p.add_argument("--depth", type=int, default=8, help="sections / passages the reader reads")
    p.add_argument("--fold", action="append", default=[], help="SITE,SITE=MODEL_DIR")
    p.add_argument("--sites", nargs="+", default=list(REALDOCS))
    p.add_argument(
        "--dump",
        type=Path,
        help="write each question's best P(answers) and today's probability (JSON Lines)",
    )
    p.add_argument(
        "--pairs", action="store_true", help="also score the held-out sites' labelled pairs"
    )
    args = p.parse_args()

    folds: dict[str, Path] = {}
    for spec in args.fold:
        sites, _, folder = spec.partition("=")
        for site in sites.split(","):
            folds[site] = Path(folder)
    if args.features == bool(args.reader):
        p.error("give --reader DIR or --features")
    readers: dict[Path, Reader] = {}
    dump = open(args.dump, "w", encoding="utf-8") if args.dump else None  # noqa: SIM115
    results = {}
    for site in args.sites:
        if args.features:
            # Fitted on the labelled pairs of every other site: each site is held out.
            from reader_features import FeatureReader

            retriever, _ = load_retriever(index_of(f"realdocs:{site}", Path("/tmp")))
            folds[site] = Path("features")
            reader: Any = FeatureReader(retriever.embedder, site)
        else:
            folder = folds.get(site, args.reader)
            reader = readers.setdefault(folder, Reader(folder))
        results[site] = run_site(site, reader, args.split, args.depth, dump)
    if dump is not None:
        dump.close()

    print(f"\nsplit: {args.split}; the reader reads the top {args.depth}")
    print(
        "\n| site | model | questions | nDCG@10 today → reader | fused with today's "
        "| recall@10 today → reader "
        "| today: answered / near misses refused | reader ms p50 | answer ms p50 today |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for site, r in results.items():
        t = r["today"]
        n_t, n_r, n_f = (mean(r["ndcg"][k]) for k in ("today", "reader", "fused"))
        print(
            f"| {site} | {'held out' if site in folds else 'seen'} | {r['rows']} "
            f"| {n_t:.3f} → **{n_r:.3f}** ({n_r - n_t:+.3f}) | {n_f:.3f} ({n_f - n_t:+.3f}) "
            f"| {mean(r['recall']['today']):.2f} → {mean(r['recall']['reader']):.2f} "
            f"| {pct(t.answered, t.answerable)} / {pct(t.refused, t.unanswerable)} "
            f"| {quantile(r['read_ms'], 0.5):.0f} | {quantile(t.times, 0.5):.0f} |"
        )
    if args.pairs:
        print("\nThe labelled pairs of each held-out site: ROC AUC of *answers* against the rest")
        print("\n| site | embedder cosine | four features, fitted elsewhere | reader |")
        print("|---|---|---|---|")
        for site in results:
            folder = folds.get(site, args.reader)
            aucs = pair_aucs(site, readers[folder]) if site in folds and folder in readers else None
            if aucs is not None:
                print(f"| {site} | " + " | ".join(f"{a:.3f}" for a in aucs) + " |")
    print("\nThe reader's curve: answerable answered / near misses refused, by threshold")
    print("\n| site | " + " | ".join(f"{x:.1f}" for x in THRESHOLDS) + " |")
    print("|---|" + "---|" * len(THRESHOLDS))
    for site, r in results.items():
        cells = []
        for x in THRESHOLDS:
            ans = [s >= x for a, s in r["curve"] if a]
            ref = [s < x for a, s in r["curve"] if not a]
            cells.append(f"{pct(sum(ans), len(ans))} / {pct(sum(ref), len(ref))}")
        print(f"| {site} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
