"""Quality and latency of the extractive answerer, before and after a change.

    python tests/bench/bench_extractive.py [--sets skylark,fixture,pkgdocs,anchored-docs]
        [--work DIR] [--baseline REV] [--rebuild] [--dump FILE]

Question sets (``tests/bench/data/<set>-questions.jsonl``: ``qid``, ``question``,
``gold_refs``, ``answerable``, ``facts`` — short substrings a right answer
contains) over the corpora they were written for:

- ``skylark``: ``tests/fixtures/qa-site`` (a small static-site-server manual);
- ``fixture``: ``tests/fixtures/site-fixture`` (the chunker's fixture site,
  English and Chinese);
- ``pkgdocs``: the READMEs of python-dotenv, xmltodict and cfn-lint, read
  from the installed packages' metadata (real third-party documentation with
  tables, lists, code and a long changelog; skipped when one is missing);
- ``anchored-docs``: this project's own ``site/`` — the held-out set: nothing
  was tuned on it.

The first three are the development sets. Each corpus is built with
``mkdocs build`` (and the plugin, or ``anchored index``) into ``--work``,
reused on later runs unless ``--rebuild``. Every question is retrieved as the
query function does and answered twice: by the current answerer (as
``Engine._answer_extractive`` does it, sentence embeddings included) and by
the answerer of git revision ``--baseline`` with the relevance floor it had
(loaded from git into its own module). Printed per set and answerer:

- answered: share of answerable questions that got an answer;
- refused: share of unanswerable questions that abstained;
- fact hit: share of answerable questions whose answer contains a fact;
- fact|ans: the same among the answered ones;
- gold: share of answered questions whose first sentence cites a gold section;
- sents / chars: mean length of an answer;
- p50 / p95 ms: latency of the answer step alone (retrieval excluded; the
  question's vector comes from retrieval, as in the query function), and the
  CPU time it took (all threads; steadier than wall time on a busy machine).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchored_query.citations import renumber, verify
from anchored_query.engine import EXTRACTIVE_PASSAGES, answer_extractive
from anchored_query.prompt import estimate_tokens
from anchored_query.retrieval import Retriever
from anchored_query.types import Passage

from build_index.embedder import Embedder, ModelSpec
from build_index.index_format import read_index

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
SETS = ("skylark", "fixture", "pkgdocs", "anchored-docs")
DEV_SETS = ("skylark", "fixture", "pkgdocs")
# The answerer before sentence embeddings, answer types and table rows, and the
# similarity floor it was used with.
BASELINE_REV = "1a75801"
BASELINE_FLOOR = {"all-MiniLM-L6-v2": 0.29}
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


def load_set(name: str) -> list[dict[str, Any]]:
    path = DATA / f"{name}-questions.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def load_retriever(index: Path) -> tuple[Retriever, str]:
    idx = read_index(index)
    return Retriever(idx, Embedder(ModelSpec.from_dir(idx.model_dir))), idx.manifest["model"][
        "name"
    ]


def retrieve(retriever: Retriever, question: str) -> tuple[list[Passage], float, Any]:
    """The passages, best similarity and question vector the query function answers from."""
    hits = retriever.rank([question])
    passages = retriever.passages(
        hits,
        token_budget=4000,
        max_passages=EXTRACTIVE_PASSAGES,
        estimate_tokens=estimate_tokens,
    )
    return passages, hits.best_similarity, hits.query_vector


def baseline_module(rev: str) -> types.ModuleType:
    """``anchored_query/extractive.py`` as it was at ``rev``, as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{rev}:lambda/anchored_query/extractive.py"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="anchored-baseline-")) / "extractive_baseline.py"
    path.write_text(source, "utf-8")
    spec = importlib.util.spec_from_file_location("extractive_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


Answerer = Callable[[str, list[Passage], float, str, Embedder, Any], dict[str, Any]]


def baseline_answerer(rev: str) -> Answerer:
    module = baseline_module(rev)

    def answer(
        question: str,
        passages: list[Passage],
        similarity: float,
        model: str,
        embedder: Embedder,
        vector: Any,
    ) -> dict[str, Any]:
        result = module.answer_extractively(question, passages)
        by_n = {p.n: p for p in passages}
        if result.abstained or similarity < BASELINE_FLOOR.get(model, 0.0):
            return {"answer": [], "citations": [], "abstained": True}
        verified = verify(result.sentences, by_n)
        answer_items, citations = renumber(verified, by_n)
        return {"answer": answer_items, "citations": citations, "abstained": verified.abstained}

    return answer


def current_answerer(
    question: str,
    passages: list[Passage],
    similarity: float,
    model: str,
    embedder: Embedder,
    vector: Any,
) -> dict[str, Any]:
    return answer_extractive(
        question,
        passages,
        similarity=similarity,
        model=model,
        embedder=embedder,
        question_vector=vector,
    )


@dataclass
class Tally:
    answerable: int = 0
    answered: int = 0
    unanswerable: int = 0
    refused: int = 0
    fact_hits: int = 0
    gold_first: int = 0
    sentences: list[int] = field(default_factory=list)
    chars: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def norm(text: str) -> str:
    return " ".join(text.casefold().split())


def score(row: dict[str, Any], payload: dict[str, Any], tally: Tally) -> dict[str, Any]:
    text = " ".join(s["text"] for s in payload["answer"])
    abstained = bool(payload["abstained"])
    detail: dict[str, Any] = {
        "abstained": abstained,
        "answer": [s["text"] for s in payload["answer"]],
    }
    if not row["answerable"]:
        tally.unanswerable += 1
        tally.refused += abstained
        return detail
    tally.answerable += 1
    if abstained:
        return detail
    tally.answered += 1
    hit = any(norm(f) in norm(text) for f in row.get("facts", []))
    tally.fact_hits += hit
    by_n = {c["n"]: c["url"] for c in payload["citations"]}
    first = [by_n[n] for n in payload["answer"][0]["citations"] if n in by_n]
    gold = any(u in row["gold_refs"] for u in first)
    tally.gold_first += gold
    tally.sentences.append(len(payload["answer"]))
    tally.chars.append(len(text))
    detail.update(fact_hit=hit, gold=gold, cited=first)
    return detail


def pct(a: int, b: int) -> str:
    return f"{a / b:.0%}" if b else "-"


def quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def row_of(name: str, label: str, t: Tally) -> str:
    return (
        f"| {name} | {label} | {pct(t.answered, t.answerable)} | {pct(t.refused, t.unanswerable)} "
        f"| {pct(t.fact_hits, t.answerable)} | {pct(t.fact_hits, t.answered)} "
        f"| {pct(t.gold_first, t.answered)} "
        f"| {statistics.fmean(t.sentences) if t.sentences else 0:.1f} "
        f"| {statistics.fmean(t.chars) if t.chars else 0:.0f} "
        f"| {quantile(t.times, 0.5):.1f} | {quantile(t.times, 0.95):.1f} "
        f"| {quantile(t.cpu, 0.5):.1f} |"
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--work", default="/tmp/anchored-bench/extractive")
    p.add_argument("--baseline", default=BASELINE_REV, help="git revision to compare with")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--rebuild", action="store_true")
    p.add_argument("--dump", default=None, help="write every answer to this JSON Lines file")
    args = p.parse_args()

    answerers: dict[str, Answerer] = {}
    if not args.no_baseline:
        answerers[f"before ({args.baseline})"] = baseline_answerer(args.baseline)
    answerers["after"] = current_answerer
    work = Path(args.work)
    dump = open(args.dump, "w", encoding="utf-8") if args.dump else None  # noqa: SIM115
    lines = []
    for name in args.sets.split(","):
        index = build_corpus(name, work, args.rebuild)
        retriever, model = load_retriever(index)
        rows = load_set(name)
        tallies = {label: Tally() for label in answerers}
        retriever.rank(["warm up"])  # first-call costs are not the answerer's
        for row in rows:
            passages, similarity, vector = retrieve(retriever, row["question"])
            for label, answer in answerers.items():
                t0, c0 = time.perf_counter(), time.process_time()
                payload = answer(
                    row["question"], passages, similarity, model, retriever.embedder, vector
                )
                elapsed = (time.perf_counter() - t0) * 1000
                tallies[label].times.append(elapsed)
                tallies[label].cpu.append((time.process_time() - c0) * 1000)
                detail = score(row, payload, tallies[label])
                if dump:
                    record = {"set": name, "answerer": label, "qid": row["qid"]}
                    record.update(question=row["question"], similarity=round(similarity, 3))
                    record.update(detail, ms=round(elapsed, 1))
                    dump.write(json.dumps(record, ensure_ascii=False) + "\n")
        for label, tally in tallies.items():
            lines.append(row_of(name, label, tally))
    if dump:
        dump.close()
    print(
        "\n| set | answerer | answered | refused | fact hit | fact/ans | gold | sents "
        "| chars | p50 ms | p95 ms | CPU p50 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
