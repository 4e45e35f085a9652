"""The ``anchored`` command line: serve, index, ask, search, publish, rollback, eval, report.

Here: the parser, ``main`` and the build-side commands; the commands that read an
index (ask, search, eval, report, mcp) are in ``cli_query.py``.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkdocs_anchored.cli_query import cmd_ask, cmd_eval, cmd_mcp, cmd_report, cmd_search

if TYPE_CHECKING:
    from anchored_query.settings import Settings

log = logging.getLogger("anchored")

DEFAULT_INDEX = ".anchored/index"
# The names `anchored serve` answers for unless ANCHORED_ALLOWED_HOSTS says otherwise.
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def _progress() -> Any:
    """Embedding progress: a bar redrawn in place on a terminal, else a log line every 5 s."""
    from build_index.progress import LineProgress, TerminalBar

    if sys.stderr.isatty():
        return TerminalBar(sys.stderr)
    return LineProgress(lambda line: log.info("%s", line))


def cmd_index(args: argparse.Namespace) -> int:
    from build_index.chunking import ChunkSettings
    from build_index.pipeline import BuildConfig, build
    from build_index.static_site import pages_from_site_dir

    site_dir = Path(args.site_dir)
    if not site_dir.is_dir():
        raise SystemExit(f"anchored index: {site_dir} is not a folder of built HTML pages")
    config = BuildConfig(
        model=args.model,
        cache_dir=Path(args.cache_dir),
        chunking=ChunkSettings(),
        exclude=tuple(args.exclude),
        site_url=args.site_url,
        strict=args.strict,
        reuse_from=args.reuse_from,
    )
    report = build(pages_from_site_dir(site_dir), Path(args.output), config, progress=_progress())
    reused = f", {report.reused} reused" if report.reused else ""
    print(
        f"indexed {report.chunks} chunks from {report.pages - report.pages_skipped} pages "
        f"({report.embedded} embedded, {report.cached} cached{reused}) into {args.output} "
        f"— build {report.manifest['build_id']}"
    )
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.inject:  # the ask box into the built pages (plugin/inject.py)
        from mkdocs_anchored.inject import inject_from_args

        print(inject_from_args(site_dir, args.endpoint, args.title, args.starter))
        _write_llms(args, site_dir)
    return 0


def cmd_llms(args: argparse.Namespace) -> int:
    site_dir = Path(args.site_dir)
    if not site_dir.is_dir():
        raise SystemExit(f"anchored llms: {site_dir} is not a folder of built HTML pages")
    _write_llms(args, site_dir)
    return 0


def _write_llms(args: argparse.Namespace, site_dir: Path) -> None:
    """llms.txt, llms-full.txt and the Markdown twins into a built site (site/agents.md)."""
    from mkdocs_anchored.inject import llms_line, write_llms_for_site

    from build_index.llmstxt import LlmsOptions

    options = LlmsOptions(
        llms_txt=args.llms_txt,
        llms_full_txt=args.llms_full_txt,
        twins=args.twins,
        exclude=(*args.exclude, *args.llms_exclude),
    )
    if options.anything:
        print(llms_line(write_llms_for_site(site_dir, options, site_url=args.site_url)))


def _llms_flags(s: argparse.ArgumentParser, when: str) -> None:
    """The options of the files for AI assistants, shared by ``index`` and ``llms``."""
    s.add_argument(
        "--no-llms-txt", dest="llms_txt", action="store_false", help=f"{when}no llms.txt"
    )
    s.add_argument(
        "--no-llms-full-txt",
        dest="llms_full_txt",
        action="store_false",
        help=f"{when}no llms-full.txt",
    )
    s.add_argument(
        "--no-twins", dest="twins", action="store_false", help=f"{when}no Markdown twins"
    )
    s.add_argument(
        "--llms-exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help=f"{when}a page URL glob left out of them (--exclude's pages are too)",
    )


def local_hosts(host: str) -> str:
    """``ANCHORED_ALLOWED_HOSTS`` for ``anchored serve`` when unset: this machine's names,
    and the address it listens on when that is one address (a DNS-rebinding page's name is
    none of them: anchored_query/serve/hosts.py)."""
    names = list(LOCAL_HOSTS)
    if host not in ("", "0.0.0.0", "::") and host not in names:
        names.append(host)
    return ",".join(names)


def server_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's options beyond host and port. uvicorn believes ``X-Forwarded-For`` from
    127.0.0.1 by default, so any local page or process could name a new client each time
    past the rate limit: forwarded headers count only from the proxies that
    ``ANCHORED_FORWARDED_ALLOW_IPS`` names."""
    if settings.forwarded_allow_ips:
        return {"proxy_headers": True, "forwarded_allow_ips": settings.forwarded_allow_ips}
    return {"proxy_headers": False}


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn
    from anchored_query.serve.app import create_app
    from anchored_query.settings import Settings
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    site_dir = Path(tempfile.mkdtemp(prefix="anchored-site-"))
    config = load_config(args.config_file, site_dir=str(site_dir))
    plugin = config.plugins.get("anchored")
    if plugin is None:
        raise SystemExit(
            f"anchored serve: {args.config_file} does not enable the plugin; add "
            "'- anchored' under 'plugins:'"
        )
    config.plugins.on_startup(command="build", dirty=False)
    mkdocs_build(config)
    index_dir = getattr(plugin, "index_dir", None)
    if index_dir is None:
        raise SystemExit("anchored serve: the plugin is disabled (enabled: false)")
    env = dict(os.environ)
    env["ANCHORED_INDEX"] = str(index_dir)
    env.setdefault("ANCHORED_FEEDBACK", str(Path(index_dir).parent / "feedback"))
    env.setdefault("ANCHORED_REFRESH_S", "0")
    if not env.get("ANCHORED_ALLOWED_HOSTS", "").strip():
        env["ANCHORED_ALLOWED_HOSTS"] = local_hosts(args.host)
    # The question log (off unless asked for): --question-log, else mkdocs.yml's
    # question_log, relative to mkdocs.yml; site/owners.md.
    configured_log = plugin.config.question_log
    if args.question_log:
        env["ANCHORED_QUESTION_LOG"] = str(Path(args.question_log).resolve())
    elif configured_log:
        base = Path(config.config_file_path).parent
        env["ANCHORED_QUESTION_LOG"] = str((base / configured_log).resolve())
    settings = Settings.from_env(env)
    app = create_app(settings, site_dir=site_dir)
    print(f"Serving {config.site_name} with the ask box on http://{args.host}:{args.port}/")
    answers = "extractive (no LLM configured)"
    if settings.llm_provider != "none":
        answers = f"{settings.llm_provider} model {settings.llm_model}"
    print(f"  answers: {answers}")
    print(f"  host names answered: {', '.join(settings.allowed_hosts)} (ANCHORED_ALLOWED_HOSTS)")
    # uvicorn re-raises SIGTERM after shutting down; make it an exit so the finally runs.
    signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))
    try:
        uvicorn.run(
            app, host=args.host, port=args.port, log_level="warning", **server_options(settings)
        )
    finally:
        shutil.rmtree(site_dir, ignore_errors=True)  # a full copy of the site, in /tmp
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    from build_index.errors import AnchoredError
    from build_index.model_registry import get_model, known_models, user_model_dir

    if args.action == "list":
        for name in known_models():
            try:
                spec = get_model(name)
                print(f"{name:<24} ready      {spec.path.parent}")
            except AnchoredError as exc:
                print(f"{name:<24} not ready  {str(exc).split('. ')[0]}")
        return 0
    if args.name != "multilingual-e5-small":
        raise SystemExit("anchored model install: only multilingual-e5-small is installed this way")
    from build_index.convert_e5 import convert

    out = Path(args.out) if args.out else user_model_dir(args.name)
    spec = convert(out=out)
    print(f"installed {spec.name} in {out} (model.onnx sha256 {spec.sha256[:16]}…)")
    print("use it with  model: multilingual-e5-small  under the anchored plugin in mkdocs.yml")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from build_index.publish import publish

    if args.version:  # a version of versioned docs (build_index/versions.py)
        from build_index.versions import publish_version

        try:
            done = publish_version(
                Path(args.index_dir),
                args.target,
                args.version,
                aliases=args.alias,
                title=args.title,
                make_default=args.default,
                keep=args.keep,
            )
        except ValueError as exc:
            raise SystemExit(f"anchored publish: {exc}") from None
        aliases = f" (aliases: {', '.join(done.aliases)})" if done.aliases else ""
        print(
            f"published build {done.build_id} as version {done.version}{aliases} to "
            f"{args.target}; versions: {', '.join(done.versions)}; default: {done.default}"
        )
        return 0
    if args.alias or args.title or args.default:
        raise SystemExit("anchored publish: --alias, --title and --default need --version")
    if not args.target.startswith("s3://"):
        raise SystemExit("anchored publish: a folder target needs --version (else use s3://)")
    result = publish(Path(args.index_dir), args.target, keep=args.keep)
    print(f"published build {result.build_id} to {args.target}")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from build_index.publish import rollback

    build_id = rollback(args.target, args.build_id)
    print(f"{args.target} now serves build {build_id}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="anchored", description="Ask-the-docs for MkDocs sites.")
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="build the site and serve it with the ask box")
    s.add_argument("-f", "--config-file", default="mkdocs.yml")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--question-log", metavar="DIR", help="log questions to this folder")
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser("index", help="index an already-built static site")
    s.add_argument("site_dir")
    s.add_argument("-o", "--output", required=True, help="index folder to write")
    s.add_argument("--model", default="all-MiniLM-L6-v2")
    s.add_argument("--cache-dir", default=".anchored/cache")
    s.add_argument("--exclude", action="append", default=[], help="page URL glob to leave out")
    s.add_argument("--site-url", default=None)
    s.add_argument("--strict", action="store_true", help="fail on a page that cannot be indexed")
    s.add_argument(
        "--reuse-from",
        metavar="STORE",
        help="s3://bucket/prefix or an index folder: reuse its vectors for unchanged chunks",
    )
    s.add_argument("--inject", action="store_true", help="also put the ask box into the pages")
    s.add_argument("--endpoint", default="", help="with --inject: the query function's URL")
    s.add_argument("--title", default=None, help="with --inject: the ask box's title")
    s.add_argument("--starter", action="append", default=[], help="with --inject: a question")
    _llms_flags(s, "with --inject: ")
    s.set_defaults(func=cmd_index)

    s = sub.add_parser(
        "llms", help="write llms.txt, llms-full.txt and Markdown twins into a built site"
    )
    s.add_argument("site_dir")
    s.add_argument("--site-url", default=None, help="where the site is published")
    s.add_argument("--exclude", action="append", default=[], help="page URL glob to leave out")
    _llms_flags(s, "")
    s.set_defaults(func=cmd_llms)

    for name, func, helptext in (
        ("ask", cmd_ask, "answer a question from the index"),
        ("search", cmd_search, "hybrid search, no answer"),
    ):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("question" if name == "ask" else "query")
        s.add_argument("--index", default=DEFAULT_INDEX, help="index folder or s3://bucket/prefix")
        s.add_argument("--json", action="store_true")
        s.add_argument("--version", default=None, help="versioned index: a version or alias")
        if name == "ask":
            s.add_argument("--mode", choices=["auto", "llm", "extractive"], default="auto")
            s.add_argument("--include", action="append", default=[], help="page prefix in scope")
            s.add_argument("--exclude", action="append", default=[], help="page prefix left out")
        else:
            s.add_argument("-k", type=int, default=10)
        s.set_defaults(func=func)

    s = sub.add_parser("mcp", help="serve search/ask/read tools to an agent over MCP (stdio)")
    s.add_argument("--index", default=DEFAULT_INDEX, help="index folder or s3://bucket/prefix")
    s.set_defaults(func=cmd_mcp)

    s = sub.add_parser("eval", help="retrieval and citation metrics; a quality gate for CI")
    s.add_argument("questions", nargs="?", help="JSONL: qid, question, gold_refs, answerable")
    s.add_argument("--index", default=DEFAULT_INDEX)
    s.add_argument("--out", help="write a run file (JSONL); with --from-log the questions")
    s.add_argument("--answers", action="store_true", help="also answer (citation hit, abstention)")
    gate = s.add_argument_group("quality gate (exit 1 naming each threshold missed; shares 0-1)")
    for flag, helptext in (
        ("--min-recall-at-10", "recall@10 of the gold sections"),
        ("--min-recall-at-100", "recall@100"),
        ("--min-ndcg", "nDCG@10"),
        ("--min-mrr", "MRR@10"),
        ("--max-false-refusals", "share of answerable questions refused (answers them)"),
        ("--min-answered", "share of answerable questions answered citing a gold section"),
        ("--min-refusals-unanswerable", "share of unanswerable questions refused"),
    ):
        gate.add_argument(flag, type=float, default=None, metavar="X", help=helptext)
    s.add_argument("--from-log", metavar="LOG", help="question log (folder or s3://): export")
    s.add_argument("--labels", help="with --from-log: labelled JSONL -> golden questions")
    s.set_defaults(func=cmd_eval)

    s = sub.add_parser("report", help="the question log for a period: HTML, Markdown, JSON")
    s.add_argument("log", help="question log: a folder or s3://bucket/prefix")
    s.add_argument("--since", help="first day (YYYY-MM-DD, UTC)")
    s.add_argument("--until", help="last day (YYYY-MM-DD, UTC), included")
    s.add_argument("--out", default="report.html", help="HTML page to write ('' for none)")
    s.add_argument("--markdown", metavar="FILE", help="a Markdown summary ('-': stdout)")
    s.add_argument("--json", metavar="FILE", help="everything as JSON ('-': stdout)")
    s.add_argument(
        "--index", default=DEFAULT_INDEX, help="the index: its embedder groups gaps, its pages"
    )
    s.add_argument("--cluster-threshold", type=float, default=None, help="cosine (0-1)")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("model", help="list embedding models, or install the multilingual one")
    s.add_argument("action", choices=["list", "install"])
    s.add_argument("name", nargs="?", default="multilingual-e5-small")
    s.add_argument("--out", default=None, help="folder to write (default: the model cache)")
    s.set_defaults(func=cmd_model)

    s = sub.add_parser("publish", help="upload an index to S3 and switch current.json")
    s.add_argument("index_dir")
    s.add_argument("target", help="s3://bucket/prefix (with --version also a folder)")
    s.add_argument("--keep", type=int, default=5)
    s.add_argument("--version", help="publish as this version of versioned docs (mike)")
    s.add_argument(
        "--alias", action="append", default=[], help="with --version: an alias (moved to it)"
    )
    s.add_argument("--title", default=None, help="with --version: the version's title")
    s.add_argument(
        "--default", action="store_true", help="with --version: requests without one get it"
    )
    s.set_defaults(func=cmd_publish)

    s = sub.add_parser("rollback", help="point current.json back at an earlier build")
    s.add_argument("target", help="s3://bucket/prefix")
    s.add_argument("build_id", nargs="?", default=None)
    s.set_defaults(func=cmd_rollback)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``anchored`` console script."""
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(message)s",
    )
    from anchored_query.errors import QueryError

    from build_index.errors import AnchoredError

    try:
        return int(args.func(args))
    except (AnchoredError, QueryError) as exc:
        message = exc.message if isinstance(exc, QueryError) else str(exc)
        print(f"anchored {args.command}: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
