"""Render a BEIR data set as an MkDocs project, and its test queries as a question set.

Every document becomes one ``##`` section (id ``doc-<docid>``) on a page of
``per_page`` documents, so a relevant document is the citation target
``p<page>/#doc-<docid>``. Used by the build and retrieval benchmarks; works
for any BEIR-format folder (corpus.jsonl[.gz], queries.jsonl, qrels/test.tsv or
qrels-test.tsv).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BEIR = REPO.parent / "shared" / "data" / "scifact"

MKDOCS_YML = """site_name: {name}
docs_dir: docs
site_dir: {site_dir}
theme:
  name: mkdocs
markdown_extensions:
  - toc
  - attr_list
plugins:
{plugins}
"""


def _open(path: Path) -> Iterator[str]:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            yield from fh
    else:
        with open(path, encoding="utf-8") as fh:
            yield from fh


def find(beir: Path, *names: str) -> Path:
    for name in names:
        if (beir / name).exists():
            return beir / name
    raise SystemExit(f"{beir} has none of {', '.join(names)}: is it a BEIR folder?")


def load_corpus(beir: Path, limit: int | None = None) -> list[dict[str, str]]:
    docs = []
    for line in _open(find(beir, "corpus.jsonl.gz", "corpus.jsonl")):
        row = json.loads(line)
        docs.append({"id": str(row["_id"]), "title": row.get("title", ""), "text": row["text"]})
        if limit and len(docs) >= limit:
            break
    return docs


def load_qrels(beir: Path) -> dict[str, set[str]]:
    qrels: dict[str, set[str]] = defaultdict(set)
    path = find(beir, "qrels-test.tsv", "qrels/test.tsv")
    for i, line in enumerate(_open(path)):
        parts = line.rstrip("\n").split("\t")
        if i == 0 and not parts[-1].strip().lstrip("-").isdigit():
            continue
        if len(parts) >= 3 and int(parts[2]) > 0:
            qrels[parts[0]].add(parts[1])
    return qrels


def load_queries(beir: Path) -> dict[str, str]:
    out = {}
    for line in _open(find(beir, "queries.jsonl", "queries.jsonl.gz")):
        row = json.loads(line)
        out[str(row["_id"])] = row["text"]
    return out


_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def doc_anchor(doc_id: str) -> str:
    return "doc-" + _SAFE.sub("-", doc_id)


def _md_escape(text: str) -> str:
    # Keep the text literal: no accidental Markdown structure from the data.
    text = text.replace("\\", "\\\\")
    for ch in "*_`[]<>#|{}":
        text = text.replace(ch, "\\" + ch)
    return text


def write_project(
    beir: Path,
    out: Path,
    *,
    per_page: int = 20,
    limit: int | None = None,
    plugin: bool = True,
    plugin_options: str = "",
) -> dict[str, str]:
    """Write ``out/mkdocs.yml`` + ``out/docs``; return doc id -> ``page#anchor``."""
    docs = load_corpus(beir, limit)
    (out / "docs").mkdir(parents=True, exist_ok=True)
    where: dict[str, str] = {}
    index_lines = ["# Corpus\n"]
    for start in range(0, len(docs), per_page):
        page_no = start // per_page
        name = f"p{page_no:05d}"
        lines = [f"# Documents {start + 1}–{min(start + per_page, len(docs))}\n"]
        for doc in docs[start : start + per_page]:
            anchor = doc_anchor(doc["id"])
            title = _md_escape(doc["title"].strip() or f"Document {doc['id']}")
            lines.append(f"## {title} {{#{anchor}}}\n\n{_md_escape(doc['text'].strip())}\n")
            where[doc["id"]] = f"{name}/#{anchor}"
        (out / "docs" / f"{name}.md").write_text("\n".join(lines), "utf-8")
    (out / "docs" / "index.md").write_text("\n".join(index_lines), "utf-8")
    plugins = "  - search"
    if plugin:
        plugins += "\n  - anchored" + (":\n" + plugin_options if plugin_options else "")
    (out / "mkdocs.yml").write_text(
        MKDOCS_YML.format(name=beir.name, site_dir="site", plugins=plugins), "utf-8"
    )
    return where


def write_questions(beir: Path, where: dict[str, str], path: Path) -> int:
    """The BEIR test queries as an ``anchored eval`` question set."""
    queries = load_queries(beir)
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for qid, docs in sorted(load_qrels(beir).items()):
            refs = [where[d] for d in sorted(docs) if d in where]
            if not refs or qid not in queries:
                continue
            row = {"qid": qid, "question": queries[qid], "gold_refs": refs, "answerable": True}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("beir", nargs="?", default=str(DEFAULT_BEIR))
    p.add_argument("out")
    p.add_argument("--per-page", type=int, default=20)
    p.add_argument("--limit", type=int, default=None)
    args = p.parse_args()
    out = Path(args.out)
    where = write_project(Path(args.beir), out, per_page=args.per_page, limit=args.limit)
    n = write_questions(Path(args.beir), where, out / "questions.jsonl")
    print(f"wrote {len(where)} documents and {n} questions to {out}")


if __name__ == "__main__":
    main()
