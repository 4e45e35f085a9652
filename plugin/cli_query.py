"""The ``anchored`` commands that read an index: ask, search, eval, report, mcp.

Each runs the query side's ``Engine`` in this process (no HTTP), on a local index
folder or ``s3://bucket/prefix``; ``cli.py`` holds the parser and the build-side commands.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

CLI_DEADLINE_S = 300.0

__all__ = ["CLI_DEADLINE_S", "cmd_ask", "cmd_eval", "cmd_mcp", "cmd_report", "cmd_search"]


def _engine(index: str, one_shot: bool = True) -> Any:
    """The engine of a command. ``one_shot`` (all but ``mcp``, a server answering many
    questions): the deadline is :data:`CLI_DEADLINE_S` unless ``ANCHORED_DEADLINE_S``
    is set, so the first download of an s3:// index is not cut at the function's 20 s."""
    from anchored_query.engine import Engine
    from anchored_query.settings import Settings

    env = dict(os.environ)
    env["ANCHORED_INDEX"] = index
    env.setdefault("ANCHORED_CACHE_DIR", str(Path(tempfile.gettempdir()) / "anchored"))
    if one_shot:  # the function's 20 s fits Lambda's 30 s timeout; a command may wait
        env.setdefault("ANCHORED_DEADLINE_S", str(CLI_DEADLINE_S))
    return Engine(Settings.from_env(env))


def cmd_ask(args: argparse.Namespace) -> int:
    from anchored_query.question.validation import AskRequest
    from anchored_query.types import Scope

    engine = _engine(args.index)
    why = _VerificationLog()
    query_log = logging.getLogger("anchored.query")
    level = query_log.level
    if not query_log.isEnabledFor(logging.INFO):
        query_log.setLevel(logging.INFO)
    query_log.addHandler(why)
    try:
        result = engine.ask(
            AskRequest(
                question=args.question,
                scope=Scope(include=tuple(args.include), exclude=tuple(args.exclude)),
                mode=args.mode,
                version=args.version,
            )
        )
    finally:
        query_log.removeHandler(why)
        query_log.setLevel(level)
        engine.close()
    if why.lines and isinstance(result.get("verification"), dict):
        # Each sentence removed or left unverified, with the check that decided (the log
        # line's text: the API gives only their numbers).
        result["verification"]["why"] = why.lines
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    label = "extractive (quoted from the docs)" if result["mode"] == "extractive" else "LLM"
    if result.get("reason"):  # the LLM answer was replaced by the extractive one: say why
        print(f"Note: {result['reason']} ({result.get('fallback', '')}).\n")
    if result.get("tentative"):  # the evidence falls short of a sure answer
        from anchored_query.answer.extractive_answer import TENTATIVE

        print(f"Note: {TENTATIVE}\n")
    if result["abstained"]:
        print("The docs don't seem to cover this. Sections that come closest:")
    else:
        for sentence in result["answer"]:
            marks = "".join(f"[{n}]" for n in sentence["citations"])
            flag = " (not verified)" if sentence.get("verified") is False else ""
            print(f"{sentence['text']} {marks}{flag}")
        print(f"\n({label}; {result['passages_considered']} passages considered)")
    for line in (result.get("verification") or {}).get("why", []):
        print(f"Verification: {line}")
    print()
    site = _site_url(args.index)
    for c in result["citations"]:
        link = c.get("link") or c["url"]
        print(f"[{c['n']}] {' › '.join(c['heading_path']) or c['title']}")
        print(f"    {urljoin(site, link) if site else link}")
    return 0


class _VerificationLog(logging.Handler):
    """Keeps the answer step's "verification: …" log lines: sentence by sentence, what
    was removed or left unverified and the check that decided."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("verification: "):
            self.lines += message[len("verification: ") :].split(" | ")


def _site_url(index: str) -> str:
    """The ``site_url`` a local index was built for ("" when unknown), to print full links."""
    try:
        manifest = json.loads((Path(index) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    site = manifest.get("site_url") if isinstance(manifest, dict) else None
    return site.rstrip("/") + "/" if isinstance(site, str) and site.startswith("http") else ""


def cmd_search(args: argparse.Namespace) -> int:
    engine = _engine(args.index)
    result = engine.search(args.query, args.k, args.version)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    for i, r in enumerate(result["results"], start=1):
        print(f"{i:2d}. {r['url']}  ({' › '.join(r['heading_path']) or r['title']})")
        print(f"    {r['snippet'][:160]}")
    return 0


def _write_jsonl(rows: Any, out: str | None) -> int:
    """Write dicts as JSON Lines to ``out`` (or stdout); return how many."""
    count = 0
    fh = open(out, "w", encoding="utf-8") if out else sys.stdout  # noqa: SIM115
    try:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    finally:
        if out:
            fh.close()
    return count


def _eval_from_log(args: argparse.Namespace) -> int:
    from anchored_query.owner.evaluation import golden_from_log, labelling_sheet
    from anchored_query.owner.querylog import ReadStats, read_records

    stats = ReadStats()
    asks = read_records(args.from_log, "asks", stats=stats)
    if args.labels:
        labels = []
        with open(args.labels, encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        labels.append(json.loads(line))
                    except ValueError:
                        where = f"{args.labels}:{number}"
                        raise SystemExit(f"anchored eval: {where}: not JSON") from None
        count = _write_jsonl(golden_from_log(asks, labels), args.out)
        what = "golden questions"
    else:  # no labels yet: a sheet to label
        count = _write_jsonl(labelling_sheet(asks), args.out)
        what = "questions to label (set answerable, check gold_refs)"
    skipped = ""
    if stats.skipped_objects:
        skipped = f"; {stats.skipped_objects} unreadable objects skipped"
    print(f"wrote {count} {what}{' to ' + args.out if args.out else ''}{skipped}", file=sys.stderr)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from anchored_query.owner.evaluation import GATES, evaluate, gate_failures, load_questions

    if args.from_log:
        return _eval_from_log(args)
    if not args.questions:
        raise SystemExit("anchored eval: name a question set (JSONL), or --from-log LOG")
    thresholds = {name: getattr(args, name) for name in GATES if getattr(args, name) is not None}
    answers = args.answers or any(GATES[name][2] for name in thresholds)
    engine = _engine(args.index)
    questions = load_questions(Path(args.questions))
    try:
        summary = evaluate(
            engine, questions, out=Path(args.out) if args.out else None, answers=answers
        )
    finally:
        engine.close()
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        shown = f"{value:.4f}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {shown}")
    failures = gate_failures(summary, thresholds)
    for failure in failures:
        print(f"anchored eval: FAILED: {failure}", file=sys.stderr)
    if thresholds and not failures:
        print(f"quality gate passed ({len(thresholds)} thresholds)")
    return 1 if failures else 0


def _day(value: str | None) -> Any:
    from datetime import date

    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise SystemExit(f"anchored report: {value!r} is not a date (YYYY-MM-DD)") from None


def cmd_report(args: argparse.Namespace) -> int:
    from anchored_query.owner.report import cluster_gaps, collect, index_outline, threshold_for
    from anchored_query.owner.report_html import render_html, render_markdown

    report = collect(args.log, since=_day(args.since), until=_day(args.until))
    embedder = None
    threshold = args.cluster_threshold
    if args.index and (args.index.startswith("s3://") or Path(args.index).is_dir()):
        engine = _engine(args.index)
        try:
            loaded = engine.current()
            report.pages, report.sections = index_outline(loaded.index.chunks)
            embedder = loaded.retriever.embedder
            if threshold is None:
                threshold = threshold_for(loaded.index.manifest["model"]["name"])
            cluster_gaps(report, embedder, threshold=threshold)
        finally:
            engine.close()
    else:
        cluster_gaps(report, None)
    data = report.to_json()
    if args.out:
        Path(args.out).write_text(render_html(data), encoding="utf-8")
    for flag, text in (
        (args.markdown, render_markdown(data) if args.markdown else ""),
        (args.json, json.dumps(data, ensure_ascii=False, indent=2) + "\n" if args.json else ""),
    ):
        if flag == "-":
            sys.stdout.write(text)
        elif flag:
            Path(flag).write_text(text, encoding="utf-8")
    log_ = data["log"]
    print(
        f"{data['questions']} questions, {len(data['coverage_gaps'])} coverage gaps; read "
        f"{log_['objects']} objects (skipped {log_['skipped_objects']} unreadable, "
        f"{log_['skipped_records']} foreign records)" + (f"; wrote {args.out}" if args.out else ""),
        file=sys.stderr,
    )
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from anchored_query.serve.mcp_tools import serve_stdio

    # stdout is the protocol: logs go to stderr (logging's default stream), nothing printed.
    # Each question keeps the function's deadline; a slow first download goes on between
    # calls (the server lives on), and a later call uses it.
    engine = _engine(args.index, one_shot=False)
    try:
        serve_stdio(engine, engine.settings)
    finally:
        engine.close()
    return 0
