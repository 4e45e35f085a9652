"""Fuzz the chunker, tokenizer, citations and HTTP API with 10,000+ cases each.

    python tests/bench/fuzz.py [--cases 10000] [--targets chunker,tokenizer,citations,api]
                               [--seed N] [--index DIR]

Uses the strategies and invariant checks of ``tests/fuzz_strategies.py`` (the
normal test run, ``tests/test_fuzz.py``, runs a small sample of the same).
Every case ends in an *outcome*: ``ok``, a documented rejection (``PageError:
binary``, ``400 bad_json``, ...) or a crash (an unexpected exception or a
broken invariant). Prints a Markdown table of cases, crashes and rejections
per target, then the first crashes with their input, and exits 1 on any crash.

The ``api`` target needs an index: by default the qa fixture site
(``tests/fixtures/qa-site``) is built with the plugin into a temporary
directory first (about a minute); ``--index`` reuses an existing one. Half of
its cases go through Starlette's TestClient, half straight to the ASGI app
with raw header bytes and the body in pieces. A PageError case is also run
through the build pipeline, which must skip the page with a warning naming it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from anchored_query.serve.app import create_app  # noqa: E402
from anchored_query.settings import Settings  # noqa: E402
from fuzz_strategies import (  # noqa: E402
    CHUNK_CASES,
    CITATION_CASES,
    FUZZ_SETTINGS_FIELDS,
    HTTP_CASES,
    TOKENIZER_TEXT,
    VALIDATION_CASES,
    ChunkCase,
    HttpCase,
    asgi_request,
    check_chunks,
    check_citations,
    check_response,
    check_tokens,
    check_validation,
    chunk_urls_of,
    client_request,
)
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from build_index.pipeline import BuildConfig, BuildReport, collect_chunks  # noqa: E402

TARGETS = ("chunker", "tokenizer", "citations", "api")


@dataclass
class Tally:
    """What the cases of one target (or one route of the api target) came to."""

    cases: int = 0
    crashes: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    # (exception type, where) -> (count, first message, first input)
    failures: dict[tuple[str, str], tuple[int, str, str]] = field(default_factory=dict)
    seconds: float = 0.0  # wall time, case generation included
    checking: float = 0.0  # time inside the target and its checks
    slowest: float = 0.0
    slowest_case: str = ""


def run_target(
    name: str,
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], str],
    n: int,
    rng_seed: int,
    group: Callable[[Any], str] = lambda case: "",
) -> dict[str, Tally]:
    """Run ``check`` on ``n`` generated cases; record outcomes and crashes, never stop.

    Returns one tally per ``group(case)`` (the api target groups by route).
    """
    tallies: dict[str, Tally] = {}
    done = 0

    @seed(rng_seed)
    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def body(case: Any) -> None:
        nonlocal done
        label = group(case)
        tally = tallies.setdefault(f"{name} {label}".strip(), Tally())
        t0 = time.perf_counter()
        try:
            outcome = check(case)
        except Exception as exc:  # a crash: count it and keep fuzzing
            tally.crashes += 1
            outcome = f"CRASH {type(exc).__name__}"
            key, message = _describe(exc)
            count, first, example = tally.failures.get(key, (0, message, repr(case)[:600]))
            tally.failures[key] = (count + 1, first, example)
        elapsed = time.perf_counter() - t0
        tally.cases += 1
        tally.outcomes[outcome] += 1
        tally.checking += elapsed
        if elapsed > tally.slowest:
            tally.slowest, tally.slowest_case = elapsed, repr(case)[:300]
        done += 1
        if done % 1000 == 0:
            crashes = sum(t.crashes for t in tallies.values())
            print(f"  {name}: {done}/{n}, {crashes} crashes", file=sys.stderr)

    t0 = time.perf_counter()
    body()
    wall = time.perf_counter() - t0
    for tally in tallies.values():
        tally.seconds = wall * tally.cases / max(done, 1)
    return tallies


def _describe(exc: BaseException) -> tuple[tuple[str, str], str]:
    """((type, where), message): where = the innermost frame outside the tests,
    or the failed check for a broken invariant."""
    frames = traceback.extract_tb(exc.__traceback__)
    inner = [f for f in frames if "/tests/" not in f.filename] or frames
    where = f"{Path(inner[-1].filename).name}:{inner[-1].lineno}" if inner else "?"
    return (type(exc).__name__, where), str(exc)[:300]


def chunker_check() -> Callable[[ChunkCase], str]:
    def check(case: ChunkCase) -> str:
        outcome = check_chunks(case)
        if outcome.startswith("PageError"):
            report = BuildReport()
            collect_chunks([case.page], BuildConfig(chunking=case.settings), report)
            name = f"'{case.page.url or '/'}'"
            assert report.pages_skipped == 1 and name in report.warnings[0], report.warnings
            outcome += " (warning)"
        return outcome

    return check


def build_qa_index(workdir: Path) -> Path:
    project = workdir / "qa"
    shutil.copytree(REPO / "tests" / "fixtures" / "qa-site", project)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--quiet"], cwd=project, env=env, check=True
    )
    return project / ".anchored" / "index"


def api_check(index: Path, workdir: Path) -> tuple[Callable[[Any], str], Callable[[], None]]:
    app_settings = Settings(
        index=str(index),
        cache_dir=str(workdir / "cache"),
        feedback=str(workdir / "feedback"),
        refresh_s=0,
        **FUZZ_SETTINGS_FIELDS,
    )
    plain = Settings(index="unused", **FUZZ_SETTINGS_FIELDS)
    app = create_app(app_settings)
    client = TestClient(app, raise_server_exceptions=False)
    client.__enter__()
    loop = asyncio.new_event_loop()
    urls = chunk_urls_of(index)

    def check(case: tuple[str, Any]) -> str:
        via, value = case
        if via == "validation":
            kind, payload = value
            return check_validation(kind, payload, plain)
        http: HttpCase = value
        result = client_request(client, http) if via == "client" else asgi_request(app, http, loop)
        return check_response(http, result, urls)

    def close() -> None:
        client.__exit__(None, None, None)
        loop.close()

    return check, close


def api_group(case: tuple[str, Any]) -> str:
    """``POST /v1/ask`` (TestClient or raw ASGI), or ``validation`` for direct calls."""
    via, value = case
    return "validation" if via == "validation" else f"{value.method} {value.path}"


API_CASES = st.one_of(
    st.tuples(st.just("client"), HTTP_CASES),
    st.tuples(st.just("asgi"), HTTP_CASES),
    st.tuples(st.just("validation"), VALIDATION_CASES),
)


ACCEPTED = ("ok", "200", "accepted", "abstained")


def table(tallies: dict[str, Tally]) -> str:
    """Markdown: cases, crashes, accepted and rejected (by kind) per target."""
    lines = [
        "| target | cases | crashes | accepted | rejected (kind: count) | time | slowest case |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for name, t in tallies.items():
        accepted = sum(v for k, v in t.outcomes.items() if k.startswith(ACCEPTED))
        rejected = sorted(
            ((k, v) for k, v in t.outcomes.items() if not k.startswith((*ACCEPTED, "CRASH"))),
            key=lambda kv: (-kv[1], kv[0]),
        )
        kinds = ", ".join(f"{k}: {v:,}" for k, v in rejected) or "–"
        lines.append(
            f"| {name} | {t.cases:,} | {t.crashes} | {accepted:,} | {kinds} "
            f"| {t.seconds:.0f} s | {t.slowest * 1000:.0f} ms |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases per target")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    parser.add_argument("--index", type=Path, default=None, help="index for the api target")
    args = parser.parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets: {', '.join(sorted(unknown))}")
    rng_seed = args.seed if args.seed is not None else random.randrange(2**32)
    # The app logs every 500 with its traceback; crashes are counted and shown below.
    logging.getLogger("anchored").setLevel(logging.CRITICAL)
    print(f"seed {rng_seed}, {args.cases:,} cases per target", file=sys.stderr)

    tallies: dict[str, Tally] = {}
    with tempfile.TemporaryDirectory(prefix="anchored-fuzz-") as tmp:
        workdir = Path(tmp)
        for name in targets:
            print(f"{name} ...", file=sys.stderr)
            if name == "chunker":
                tallies |= run_target(name, CHUNK_CASES, chunker_check(), args.cases, rng_seed)
            elif name == "tokenizer":
                tallies |= run_target(name, TOKENIZER_TEXT, check_tokens, args.cases, rng_seed)
            elif name == "citations":
                tallies |= run_target(
                    name, CITATION_CASES, lambda c: check_citations(*c), args.cases, rng_seed
                )
            else:
                index = args.index or build_qa_index(workdir)
                check, close = api_check(index, workdir)
                try:
                    tallies |= run_target(
                        name, API_CASES, check, args.cases, rng_seed, group=api_group
                    )
                finally:
                    close()

    print(table(tallies))
    print("\nSlowest case per target:\n")
    for name, t in tallies.items():
        print(f"- {name} ({t.slowest * 1000:.0f} ms): {t.slowest_case}")
    crashed = {name: t for name, t in tallies.items() if t.crashes}
    for name, t in crashed.items():
        print(f"\n### {name}: {t.crashes} crashes, {len(t.failures)} distinct\n")
        for (kind, where), (count, message, case) in t.failures.items():
            print(f"- {count} x {kind} at {where}: {message}\n  first input: {case}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
