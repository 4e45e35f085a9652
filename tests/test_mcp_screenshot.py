"""The docs' picture of an MCP session (site/mcp.md): a real session of the ``mcp`` SDK's
client with ``anchored mcp`` over stdio on the built qa site, rendered by headless
Chromium (tests/mcp_transcript.py). ``ANCHORED_MCP_SHOTS=DIR`` keeps the picture as
DIR/mcp-session.png (``ANCHORED_MCP_SHOTS=site/images`` refreshes the docs' image)."""

from __future__ import annotations

import html
import os
from pathlib import Path

import pytest

from tests.mcp_transcript import CHROMIUM, png_size, record, render, screenshot, wrap


@pytest.mark.browser
def test_mcp_session_transcript_and_picture(qa_index: Path, tmp_path: Path) -> None:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"Chromium is missing at {CHROMIUM}")
        pytest.skip(f"Chromium is missing at {CHROMIUM}")
    t = record(qa_index, tmp_path)
    assert t.tools == ["search_docs", "ask_docs", "read_section", "read_page"]
    assert t.server.startswith("anchored-docs ") and t.protocol
    listed, search, ask, read, wrong = t.steps
    assert listed.request == "tools/list" and "ask_docs(question, include, exclude)" in listed.reply
    assert not search.is_error and "(ref: guide/configuration/#port)" in search.reply
    assert search.data is not None and len(search.data["results"]) == 2
    # the answer as the agent reads it: cited sentences, then the sources with their links
    assert not ask.is_error and ask.data is not None and not ask.data["abstained"]
    assert "[1]" in ask.reply and "Sources:" in ask.reply
    for c in ask.data["citations"]:
        assert "anchored-hl=" in c["link"] and ":~:text=" in c["link"]
        assert c["link"] in ask.reply
    assert not read.is_error and "--dev-addr" in read.reply
    assert wrong.is_error and "unknown_section" in wrong.reply

    page, height = render(t)
    assert "<script" not in page.lower()  # every text is escaped
    for step in t.steps:  # every line of every request and reply is in the picture's page
        for line in wrap("→ " + step.request) + wrap(step.reply):
            assert f">{html.escape(line) or '&nbsp;'}</div>" in page, line
    out = Path(os.environ.get("ANCHORED_MCP_SHOTS") or tmp_path) / "mcp-session.png"
    screenshot(page, height, out)
    assert png_size(out) == (1000, height)
    assert out.stat().st_size > 20_000  # text drawn, not a blank page
