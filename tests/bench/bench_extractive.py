"""Quality and latency of the no-LLM answerer: today's (frozen) beside the new one.

    python tests/bench/bench_extractive.py [--sets realdocs,older,reader] [--split test]
        [--work DIR] [--rebuild] [--dump FILE] [--no-baseline]

One run answers every question of every set twice — by the frozen copy of
the answerer as it was before issue 10 (``baseline_extractive.py``, with the
relevance floor it had) and by the current one (``engine.answer_extractive``,
given the index and the conversation, as ``/v1/ask`` calls it) — over the same
retrieval, and prints one table.

Sets:

- ``realdocs:<site>`` — ``tests/bench/data/realdocs/<site>.jsonl`` (real users'
  phrasing: long, conversational, typos, follow-ups with ``history``, Chinese;
  unanswerable ones among them) over the index ``tests/bench/realdocs.py``
  builds at ``/tmp/anchored-bench/realdocs/<site>/index``; only the questions of
  ``--split`` (``test`` to report, ``dev`` to tune; ``all``);
- the older sets ``skylark``, ``fixture``, ``pkgdocs``, ``anchored-docs``
  (``tests/bench/data/<set>-questions.jsonl``), each corpus built into
  ``--work`` on the first run;
- ``reader:<site>`` (``--sets reader``: seven sites) — the reader model's
  questions (``tests/bench/data/reader/``, issue 26), written by a capable model
  from the docs alone: one per sampled section, its fact a sentence of that
  section, and 30 grep-checked near misses a site; over the realdocs indexes
  (``realdocs.py --sites starlette drf hatch`` builds the three more).

Columns, per set and answerer:

- answered: share of the answerable questions that got an answer;
- refused: share of the unanswerable questions that got none;
- fact: share of the answerable questions (with facts) whose answer text
  contains one of its facts (whitespace-normalised);
- gold: share of the answered answerable questions whose first citation is a
  gold section;
- zh@10: share of the Chinese questions with a gold section among the first
  10 retrieved sections;
- ask p50 / p95 ms: retrieval plus answer, as the ``/v1/ask`` route does it
  (HTTP excluded), on this machine; CPU p50 ms: the CPU time it took (all
  threads; steadier than wall time on a busy machine).

A last line times the new answerer over a realdocs index scaled up (``--scale
SITE:N``, default Material to 5,000 chunks; see :func:`scaled_latency`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import baseline_extractive
from anchored_query.answer.extractive import ExtractiveResult, answer_extractively
from anchored_query.answer.prompt import estimate_tokens
from anchored_query.engine import EXTRACTIVE_PASSAGES, answer_extractive
from anchored_query.question.query_forms import search_forms
from anchored_query.retrieval.ranking import Ranking, Retriever
from anchored_query.retrieval.vector_cache import CachingEmbedder
from anchored_query.types import Passage, Turn

from build_index.embedder import ModelSpec
from build_index.index_format import read_index

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
REALDOCS = ("mkdocs", "httpx", "material", "anchored", "uvicorn")  # uvicorn: never tuned on
REALDOCS_OUT = Path("/tmp/anchored-bench/realdocs")
OLDER = ("skylark", "fixture", "pkgdocs", "anchored-docs")
SETS = tuple(f"realdocs:{s}" for s in REALDOCS) + OLDER
DEV_SETS = ("skylark", "fixture", "pkgdocs")
# The reader model's questions (data/reader/, issue 26), one site each: the
# realdocs development sites and three more (uvicorn, never tuned on, is not one).
READER_SITES = ("mkdocs", "httpx", "material", "anchored", "starlette", "drf", "hatch")
PKG_DOCS = ("python-dotenv", "xmltodict", "cfn-lint")

PKG_MKDOCS = """site_name: Package docs
theme:
  name: mkdocs
markdown_extensions:
  - toc
  - attr_list
  - admonition
  - tables
  - fenced_code
plugins:
  - search
  - anchored
"""


def _mkdocs(project: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"mkdocs build failed in {project}:\n{done.stderr[-2000:]}")


def build_corpus(name: str, work: Path, rebuild: bool = False) -> Path:
    """Build the corpus of question set ``name`` under ``work``; its index folder."""
    project = work / name
    index = project / ("index" if name == "fixture" else ".anchored/index")
    if (index / "manifest.json").exists() and not rebuild:
        return index
    shutil.rmtree(project, ignore_errors=True)
    if name == "skylark":
        shutil.copytree(REPO / "tests/fixtures/qa-site", project)
        _mkdocs(project)
    elif name == "fixture":
        shutil.copytree(REPO / "tests/fixtures/site-fixture", project)
        _mkdocs(project)
        subprocess.run(
            [sys.executable, "-m", "mkdocs_anchored.cli", "index", "site", "-o", "index"],
            cwd=project,
            check=True,
            capture_output=True,
        )
    elif name == "pkgdocs":
        from importlib.metadata import PackageNotFoundError, distribution

        (project / "docs").mkdir(parents=True)
        for dist in PKG_DOCS:
            try:
                metadata = distribution(dist).read_text("METADATA") or ""
            except PackageNotFoundError:
                raise SystemExit(f"pkgdocs needs {dist} installed") from None
            body = metadata.split("\n\n", 1)[-1]  # the README after the headers
            (project / "docs" / f"{dist}.md").write_text(body, "utf-8")
        (project / "docs" / "index.md").write_text(
            "# Package docs\n\nThe READMEs of a few Python packages.\n", "utf-8"
        )
        (project / "mkdocs.yml").write_text(PKG_MKDOCS, "utf-8")
        _mkdocs(project)
    elif name == "anchored-docs":
        project.mkdir(parents=True)
        shutil.copy(REPO / "mkdocs.yml", project / "mkdocs.yml")
        shutil.copytree(REPO / "site", project / "site")
        _mkdocs(project)
    else:
        raise SystemExit(f"unknown question set {name!r}")
    return index


def load_set(name: str, split: str = "all") -> list[dict[str, Any]]:
    """The questions of set ``name`` (``realdocs:<site>``, ``reader:<site>`` or an
    older set's name). A reader set's questions are all ``dev``: one answerable
    question per sampled section (its ``fact`` the fact) and its near misses."""
    if name.startswith("reader:"):
        path = DATA / "reader" / f"questions-{name.split(':', 1)[1]}.jsonl"
        return [
            {
                "qid": r["qid"],
                "question": r["question"],
                "answerable": r["kind"] == "answerable",
                "gold_refs": [r["section"]] if r.get("section") else [],
                "facts": [r["fact"]] if r.get("fact") else [],
                "split": "dev",
                "style": r.get("style", ""),
            }
            for r in map(json.loads, filter(str.strip, path.read_text("utf-8").splitlines()))
            if split in ("all", "dev")
        ]
    if name.startswith("realdocs:"):
        path = DATA / "realdocs" / f"{name.split(':', 1)[1]}.jsonl"
    else:
        path = DATA / f"{name}-questions.jsonl"
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [r for r in rows if split == "all" or r.get("split", split) == split]


def index_of(name: str, work: Path, rebuild: bool = False, model: str = "") -> Path:
    """The index folder of set ``name`` (built on first use for the older sets).

    ``model``: a realdocs site built with another embedding model
    (``realdocs.py --model NAME``).
    """
    if name.startswith(("realdocs:", "reader:")):
        root = REALDOCS_OUT / model if model else REALDOCS_OUT
        index = root / name.split(":", 1)[1] / "index"
        if not (index / "manifest.json").exists():
            raise SystemExit(f"no index at {index}: run python tests/bench/realdocs.py first")
        return index
    return build_corpus(name, work, rebuild)


def load_retriever(index: Path) -> tuple[Retriever, str]:
    idx = read_index(index)
    model = idx.manifest["model"]["name"]
    # As the query function loads a build: its embedder keeps what it embedded, so the
    # set's later questions find the lines earlier ones embedded (a warm function).
    return Retriever(idx, CachingEmbedder(ModelSpec.from_dir(idx.model_dir))), model


def history_of(row: dict[str, Any]) -> list[Turn]:
    return [Turn(t["role"], t["content"]) for t in row.get("history") or []]


def retrieve(
    retriever: Retriever, question: str, history: Sequence[Turn] = ()
) -> tuple[list[Passage], Ranking]:
    """The passages and ranking ``/v1/ask`` answers from (variants as the engine makes them)."""
    hits = retriever.rank(search_forms(question, history))
    passages = retriever.passages(
        hits,
        token_budget=4000,
        max_passages=EXTRACTIVE_PASSAGES,
        estimate_tokens=estimate_tokens,
    )
    return passages, hits


def decide(
    retriever: Retriever, model: str, row: dict[str, Any], min_confidence: float | None = 0.0
) -> ExtractiveResult:
    """``row``'s question retrieved and decided as ``/v1/ask`` does (its history; a
    Chinese question on English docs through its gloss), never refused by default
    (``min_confidence=0``: the evidence is always reported): what the calibration and
    analysis scripts read."""
    history = history_of(row)
    passages, hits = retrieve(retriever, row["question"], history)
    return answer_extractively(
        hits.gloss or row["question"],
        passages,
        index=retriever.index,
        embedder=retriever.embedder,
        model=model,
        question_vector=hits.query_vector,
        similarity=hits.best_similarity,
        history=history,
        min_confidence=min_confidence,
        asked=row["question"] if hits.gloss else "",
    )


Answerer = Callable[[dict[str, Any], list[Passage], Ranking, Retriever, str], dict[str, Any]]


def before(
    row: dict[str, Any], passages: list[Passage], hits: Ranking, retriever: Retriever, model: str
) -> dict[str, Any]:
    """Today's answerer (frozen copy), as the engine called it."""
    return baseline_extractive.answer_extractive(
        row["question"],
        passages,
        similarity=hits.best_similarity,
        model=model,
        embedder=retriever.embedder,
        question_vector=hits.query_vector,
    )


def after(
    row: dict[str, Any], passages: list[Passage], hits: Ranking, retriever: Retriever, model: str
) -> dict[str, Any]:
    # As Engine.ask: a Chinese question on English docs is answered by its gloss.
    arguments: dict[str, Any] = dict(
        similarity=hits.best_similarity,
        model=model,
        embedder=retriever.embedder,
        question_vector=hits.query_vector,
        index=retriever.index,
        history=history_of(row),
        asked=row["question"] if hits.gloss else "",
    )
    question = hits.gloss or row["question"]
    decided = answer_extractively(question, passages, **arguments)
    payload = answer_extractive(question, passages, decided=decided, **arguments)
    # For --dump only (not part of the response): the probability that the docs answer.
    payload["_confidence"] = decided.confidence
    return payload


@dataclass
class Tally:
    answerable: int = 0
    answered: int = 0
    unanswerable: int = 0
    refused: int = 0
    with_facts: int = 0
    fact_hits: int = 0
    gold_first: int = 0
    zh: int = 0
    zh_top10: int = 0
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    labelled_near: int = 0  # unanswerable questions answered with the "closest passage" label
    labelled: int = 0  # answerable questions answered with that label
    lengths: list[int] = field(default_factory=list)  # characters shown, per answer
    run_on: int = 0  # answers showing table rows or list items as run-on prose


# Table rows flattened into prose ("option: x; default: y; meaning: z"), the old rendering.
_RUN_ON = re.compile(
    r"^(?:[\w.-]{1,20}(?: [\w.-]{1,20})?: [^;\n]{1,160}; ){2,}[\w.-]{1,20}(?: [\w.-]{1,20})?: "
)


def norm(text: str) -> str:
    return " ".join(text.split())


def ranked_sections(retriever: Retriever, hits: Ranking, k: int = 10) -> list[tuple[str, Any]]:
    """The first ``k`` distinct sections of a ranking, in rank order, each with its
    best-ranked chunk."""
    out: dict[str, Any] = {}
    for hit in hits:
        chunk = retriever.index.chunks[hit.row]
        out.setdefault(str(chunk["parent"]), chunk)
        if len(out) >= k:
            break
    return list(out.items())


def top_sections(retriever: Retriever, hits: Ranking, k: int = 10) -> list[str]:
    return [section for section, _ in ranked_sections(retriever, hits, k)]


def gold_ids(row: dict[str, Any]) -> set[str]:
    """Gold refs as section ids (``page/#anchor``; a page's top ``page/`` -> ``page/#``)."""
    return {url_to_id(str(ref)) for ref in row["gold_refs"]}


def url_to_id(url: str) -> str:
    page, _, anchor = url.partition("#")
    return f"{page}#{anchor}"


def score(row: dict[str, Any], payload: dict[str, Any], tally: Tally) -> dict[str, Any]:
    text = norm(" ".join(s["text"] for s in payload["answer"]))
    abstained = bool(payload["abstained"])
    if not abstained:
        tally.lengths.append(len(text))
        tally.run_on += any(_RUN_ON.search(s["text"]) for s in payload["answer"])
    detail: dict[str, Any] = {
        "abstained": abstained,
        "answer": [s["text"] for s in payload["answer"]],
        "confidence": payload.get("_confidence"),
        "tentative": bool(payload.get("tentative")),
    }
    tentative = not abstained and bool(payload.get("tentative"))
    if not row["answerable"]:
        tally.unanswerable += 1
        tally.refused += abstained
        tally.labelled_near += tentative
        return detail
    tally.labelled += tentative
    tally.answerable += 1
    facts = row.get("facts") or []
    tally.with_facts += bool(facts)
    if abstained:
        return detail
    tally.answered += 1
    hit = any(norm(f) in text for f in facts)
    tally.fact_hits += hit
    by_n = {c["n"]: c["url"] for c in payload["citations"]}
    first = [by_n[n] for n in payload["answer"][0]["citations"] if n in by_n]
    gold = any(url_to_id(u) in gold_ids(row) for u in first)
    tally.gold_first += gold
    detail.update(fact_hit=hit, gold=gold, cited=first)
    return detail


def pct(a: int, b: int) -> str:
    return f"{a / b:.0%}" if b else "-"


def quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def row_of(name: str, label: str, t: Tally, n: int) -> str:
    return (
        f"| {name} | {n} | {label} | {pct(t.answered, t.answerable)} "
        f"| {pct(t.refused, t.unanswerable)} | {pct(t.fact_hits, t.with_facts)} "
        f"| {pct(t.gold_first, t.answered)} | {pct(t.zh_top10, t.zh)} "
        f"| {quantile(t.times, 0.5):.0f} | {quantile(t.times, 0.95):.0f} "
        f"| {quantile(t.cpu, 0.5):.0f} | {quantile([float(x) for x in t.lengths], 0.5):.0f} "
        f"/ {max(t.lengths, default=0)} | {t.run_on} "
        f"| {pct(t.refused + t.labelled_near, t.unanswerable)} | {pct(t.labelled, t.answered)} |"
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sets", default="realdocs,older", help="names, 'realdocs', 'older', 'reader'")
    p.add_argument("--split", default="test", choices=("dev", "test", "all"))
    p.add_argument("--work", default="/tmp/anchored-bench/extractive")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--rebuild", action="store_true")
    p.add_argument("--dump", default=None, help="write every answer to this JSON Lines file")
    p.add_argument("--model", default="", help="realdocs sites built with this model")
    p.add_argument(
        "--scale",
        default="material:5000",
        help="SITE:N: also time /v1/ask over SITE's index scaled to N chunks ('' for none)",
    )
    args = p.parse_args()

    names: list[str] = []
    for part in args.sets.split(","):
        if part == "realdocs":
            names += [f"realdocs:{s}" for s in REALDOCS]
        elif part == "older":
            names += list(OLDER)
        elif part == "reader":
            names += [f"reader:{s}" for s in READER_SITES]
        elif part:
            names.append(part)
    answerers: dict[str, Answerer] = {} if args.no_baseline else {"before": before}
    answerers["after"] = after
    work = Path(args.work)
    dump = open(args.dump, "w", encoding="utf-8") if args.dump else None  # noqa: SIM115
    lines = []
    for name in names:
        retriever, model = load_retriever(index_of(name, work, args.rebuild, args.model))
        split = args.split if name.startswith("realdocs:") else "all"
        rows = load_set(name, split)
        tallies = {label: Tally() for label in answerers}
        retriever.rank(["warm up"])  # first-call costs are not the answer's
        for row in rows:
            for label, answer in answerers.items():
                t0, c0 = time.perf_counter(), time.process_time()
                passages, hits = retrieve(retriever, row["question"], history_of(row))
                payload = answer(row, passages, hits, retriever, model)
                elapsed = (time.perf_counter() - t0) * 1000
                tally = tallies[label]
                tally.times.append(elapsed)
                tally.cpu.append((time.process_time() - c0) * 1000)
                if row.get("lang") == "zh" and row["answerable"]:
                    tally.zh += 1
                    tally.zh_top10 += bool(gold_ids(row) & set(top_sections(retriever, hits)))
                detail = score(row, payload, tally)
                if dump:
                    record = {"set": name, "answerer": label, "qid": row["qid"]}
                    record.update(question=row["question"], answerable=row["answerable"])
                    record.update(facts=row.get("facts"), gold_refs=row["gold_refs"])
                    record.update(detail, ms=round(elapsed, 1))
                    dump.write(json.dumps(record, ensure_ascii=False) + "\n")
        for label, tally in tallies.items():
            lines.append(row_of(name, label, tally, len(rows)))
    if dump:
        dump.close()
    print(f"\nsplit of the realdocs sets: {args.split}")
    print(
        "\n| set | questions | answerer | answered | refused | fact | gold | zh@10 "
        "| ask p50 ms | ask p95 ms | CPU p50 ms | chars p50 / max | run-on "
        "| refused or labelled | answers labelled |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    if args.scale:
        site, _, size = args.scale.partition(":")
        print(scaled_latency(site, int(size or 5000), work, args.split, args.model))


def scaled_latency(site: str, size: int, work: Path, split: str, model: str = "") -> str:
    """``/v1/ask`` (extractive) times over ``site``'s index scaled to ``size`` chunks.

    The index is scaled as bench_latency.py scales one (copies of every chunk
    under new pages, vectors slightly perturbed; BM25 rebuilt); the questions are
    the site's own (of ``split``). Quality is not scored there: the copies
    duplicate every gold section.
    """
    from bench_latency import scaled_index

    source = index_of(f"realdocs:{site}", work, model=model)
    index = scaled_index(source, work / f"{site}-{size}", size)
    retriever, name = load_retriever(index)
    retriever.rank(["warm up"])
    times, cpu = [], []
    for row in load_set(f"realdocs:{site}", split):
        t0, c0 = time.perf_counter(), time.process_time()
        passages, hits = retrieve(retriever, row["question"], history_of(row))
        after(row, passages, hits, retriever, name)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return (
        f"\n{site} scaled to {len(retriever.index.chunks)} chunks, {len(times)} questions: "
        f"ask p50 {quantile(times, 0.5):.0f} ms, p95 {quantile(times, 0.95):.0f} ms; "
        f"CPU p50 {quantile(cpu, 0.5):.0f} ms, p95 {quantile(cpu, 0.95):.0f} ms "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    main()
