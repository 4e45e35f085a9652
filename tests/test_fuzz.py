"""Property-based fuzzing of the chunker, tokenizer, citations and the HTTP API.

A small deterministic sample of the strategies in ``fuzz_strategies``; the
benchmark ``tests/bench/fuzz.py`` runs 10,000+ cases of each. Each target may
only fail in its documented way: ``PageError`` naming the page (the pipeline
turns it into a warning) or a 4xx JSON error; never a crash or a 5xx.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anchored_query.citations.verify import parse_answer
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from anchored_query.types import Passage
from fuzz_strategies import (
    CHUNK_CASES,
    CITATION_CASES,
    FUZZ_SETTINGS_FIELDS,
    HIDDEN_MARK,
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
from hypothesis import HealthCheck, given, settings
from starlette.testclient import TestClient

from build_index.chunking import ChunkSettings, chunk_page
from build_index.pipeline import BuildConfig, BuildReport, collect_chunks
from build_index.types import PageInput

FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SETTINGS = Settings(index="unused", **FUZZ_SETTINGS_FIELDS)


@FUZZ
@given(CHUNK_CASES)
def test_chunker_fuzz(case: ChunkCase) -> None:
    check_chunks(case)


@settings(FUZZ, max_examples=200)
@given(TOKENIZER_TEXT)
def test_tokenizer_fuzz(text: str) -> None:
    check_tokens(text)


@settings(FUZZ, max_examples=200)
@given(CITATION_CASES)
def test_citations_fuzz(case: tuple[str, dict[int, Passage]]) -> None:
    check_citations(*case)


@settings(FUZZ, max_examples=200)
@given(VALIDATION_CASES)
def test_validation_fuzz(case: tuple[str, Any]) -> None:
    check_validation(*case, SETTINGS)


def test_unusable_pages_become_named_warnings() -> None:
    pages = [
        PageInput("binary/", "\x00\x01\x02" * 1000),
        PageInput("deep/", "<div>" * 10_001),
        PageInput("fine/", "<h2 id=a>A</h2><p>text</p>"),
    ]
    report = BuildReport()
    sections, _ = collect_chunks(pages, BuildConfig(), report)
    assert [s.page for s in sections] == ["fine/"]
    assert report.pages_skipped == 2
    assert "'binary/'" in report.warnings[0] and "binary data" in report.warnings[0]
    assert "'deep/'" in report.warnings[1] and "nests" in report.warnings[1]


# ----------------------------------------------------------------- the app


@pytest.fixture(scope="module")
def fuzz_app(qa_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("fuzz-app")
    app_settings = Settings(
        index=str(qa_index),
        cache_dir=str(tmp / "cache"),
        feedback=str(tmp / "feedback"),
        refresh_s=0,
        **FUZZ_SETTINGS_FIELDS,
    )
    yield create_app(app_settings)


@pytest.fixture(scope="module")
def fuzz_client(fuzz_app: Any) -> Iterator[TestClient]:
    with TestClient(fuzz_app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def chunk_urls(qa_index: Path) -> set[str]:
    return chunk_urls_of(qa_index)


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


def test_api_fuzz_over_testclient(fuzz_client: TestClient, chunk_urls: set[str]) -> None:
    @settings(FUZZ, max_examples=80)
    @given(HTTP_CASES)
    def run(case: HttpCase) -> None:
        check_response(case, client_request(fuzz_client, case), chunk_urls)

    run()


def test_api_fuzz_raw_asgi(
    fuzz_app: Any, chunk_urls: set[str], loop: asyncio.AbstractEventLoop
) -> None:
    @settings(FUZZ, max_examples=80)
    @given(HTTP_CASES)
    def run(case: HttpCase) -> None:
        check_response(case, asgi_request(fuzz_app, case, loop), chunk_urls)

    run()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"question": ' + b"1" * 5000 + b"}", "bad_json"),  # int over Python's digit limit
        (b'{"question": "x", "history": [{"role": "user", "content": "\\ud800"}]}', None),
        (b'{"question": "x", "scope": {"include": ["\\udfff"]}}', "bad_request"),
        (b'{"question": "x", "\\udee0": 1}', "bad_request"),  # named in the error message
    ],
    ids=[
        "int-over-4300-digits",
        "lone-surrogate-in-history",
        "lone-surrogate-in-scope",
        "lone-surrogate-in-a-field-name",
    ],
)
def test_api_regressions(
    fuzz_client: TestClient, chunk_urls: set[str], body: bytes, code: str | None
) -> None:
    case = HttpCase("POST", "/v1/ask", body, "", (("content-type", b"application/json"),), 1)
    outcome = check_response(case, client_request(fuzz_client, case), chunk_urls)
    assert outcome.startswith("200") if code is None else outcome == f"400 {code}"


def test_unicode_digit_content_length_is_not_a_crash(
    fuzz_app: Any, chunk_urls: set[str], loop: asyncio.AbstractEventLoop
) -> None:
    case = HttpCase(
        "POST",
        "/v1/ask",
        b'{"question": "port"}',
        "",
        (("content-length", b"\xb2"), ("content-type", b"application/json")),
        1,
    )
    assert check_response(case, asgi_request(fuzz_app, case, loop), chunk_urls).startswith("200")


# ----------------------------------------------------------------- regressions found by fuzzing


def test_one_token_table_limit_chunks_tables() -> None:
    # A 1-token limit gave a 0-token row budget: ZeroDivisionError on every table.
    html = "<table><tr><th>h</th></tr>" + "<tr><td>cell value 42</td></tr>" * 50 + "</table>"
    for chunk_settings in (
        ChunkSettings(child_min_tokens=1, child_max_tokens=1),
        ChunkSettings(table_max_tokens=1),
    ):
        assert check_chunks(ChunkCase(PageInput("t/", html), chunk_settings, True)) == "ok"


def test_leading_noscript_of_a_fragment_is_not_indexed() -> None:
    # Parsed bare, a fragment's leading <noscript> opened in <head> and its text
    # was moved into the body by the parser (scripting off).
    page = PageInput("n/", f"<noscript>{HIDDEN_MARK} text</noscript><p>visible</p>")
    sections, _ = chunk_page(page)
    assert [s.text for s in sections] == ["visible"]


def test_nested_marker_leaves_no_marker_in_the_text() -> None:
    # Taking [29] out of [6[29]] used to leave a "[6]" that looked like a citation.
    [sentence] = parse_answer("Port 8000 is the default [6[29]].")
    assert sentence.text == "Port 8000 is the default."
    assert sentence.citations == [29, 6]
