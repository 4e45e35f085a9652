"""`anchored report` on a log made by real asks through the app into a real moto S3
server (over HTTP): a planted coverage gap is the top cluster, markup in a question is
escaped (checked in the HTML text and in the DOM real Chromium builds from it), and a
log with corrupt, foreign and partial objects or an empty period still reports."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from anchored_query.owner.querylog import LocalSink, QuestionLog, ask_record
from anchored_query.owner.report import cluster_gaps, collect
from anchored_query.owner.report_html import render_html, render_markdown
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from mkdocs_anchored.cli import main
from s3server import S3Bucket, moto_s3, s3
from starlette.testclient import TestClient

__all__ = ["moto_s3", "s3"]  # fixtures used by name

# The planted gap: one topic the qa site does not cover, asked five ways.
GAP = [
    "How do I export the documentation to a PDF file?",
    "Can I download these docs as a PDF?",
    "Is there a PDF export of the manual?",
    "How to print the docs to PDF",
    "Export docs as PDF for offline reading",
]
OTHER_REFUSED = [
    "What is the best sourdough recipe?",
    "Who won the football world cup in 1998?",
]
ANSWERED = ["Which port does the server use by default?", "How do I upgrade the package?"]
MARKUP = '<script>alert(1)</script><img src=x onerror="alert(2)"> & <b>bold</b>?'
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def ask_all(settings: Settings) -> None:
    """Ask everything through the app; down-vote any gap question that was answered."""
    with TestClient(create_app(settings)) as client:
        for question in [*GAP, *OTHER_REFUSED, *ANSWERED, MARKUP, GAP[0], GAP[1]]:
            r = client.post("/v1/ask", json={"question": question})
            assert r.status_code == 200, r.text
            body = r.json()
            if question in GAP and not body["abstained"]:
                vote = {"answer_id": body["id"], "rating": "down"}
                assert client.post("/v1/feedback", json=vote).status_code == 200
            if question in ANSWERED:
                vote = {"answer_id": body["id"], "rating": "up"}
                assert client.post("/v1/feedback", json=vote).status_code == 200


@pytest.fixture
def s3_log(qa_index: Path, tmp_path: Path, s3: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    location = f"s3://{s3.name}/question-log"
    settings = Settings(
        index=str(qa_index),
        cache_dir=str(tmp_path / "cache"),
        feedback=str(tmp_path / "feedback"),
        refresh_s=0,
        rate_limit_per_min=0,
        question_log=location,
    )
    ask_all(settings)
    return location


def test_the_report_of_real_asks_in_s3_shows_the_planted_gap_first(
    s3_log: str, qa_index: Path, tmp_path: Path
) -> None:
    html, md, js = tmp_path / "report.html", tmp_path / "report.md", tmp_path / "report.json"
    args = ["report", s3_log, "--index", str(qa_index), "--out", str(html)]
    assert main([*args, "--markdown", str(md), "--json", str(js)]) == 0
    data = json.loads(js.read_text())
    assert data["questions"] == len(GAP) + len(OTHER_REFUSED) + len(ANSWERED) + 3
    assert data["feedback"]["up"] == len(ANSWERED)
    top = data["coverage_gaps"][0]
    top_questions = {q["question"] for q in top["questions"]}
    assert top_questions == set(GAP), data["coverage_gaps"]
    assert top["count"] == len(GAP) + 2  # two of them asked twice
    assert top["closest_sections"]  # where the owner should look
    assert "meaning" in data["clustered_by"]
    others = [q["question"] for c in data["coverage_gaps"][1:] for q in c["questions"]]
    assert not set(others) & set(GAP)
    assert set(OTHER_REFUSED) <= set(others)
    cited_pages = {ref.split("#")[0] for ref, _ in data["most_cited"]}
    assert not cited_pages & set(data["pages_never_cited"])
    assert data["pages_never_cited"]  # the qa site has pages no answer cited
    # The HTML: self-contained (nothing fetched, no script) and escaped.
    page = html.read_text()
    assert "<script" not in page and "<img" not in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    assert (
        "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot;&gt;"
        in page
    )
    assert page.index(GAP[0]) < page.index(OTHER_REFUSED[0])  # the top gap comes first
    markdown = md.read_text()
    assert "<script" not in markdown and "<img" not in markdown
    assert "Coverage gaps" in markdown


@pytest.mark.skipif(not shutil.which(CHROMIUM), reason="needs Chromium")
def test_markup_in_a_question_stays_text_in_chromium(tmp_path: Path) -> None:
    qlog = QuestionLog(LocalSink(tmp_path / "log"), flush_s=0.01)
    qlog.submit(ask_record({"id": "a", "abstained": True, "citations": []}, MARKUP, 3.0))
    qlog.close()
    report = collect(str(tmp_path / "log"))
    cluster_gaps(report, None)
    page = tmp_path / "report.html"
    page.write_text(render_html(report.to_json()))
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    assert "</html>" in dom, "Chromium rendered nothing"
    # The parsed DOM has no element the question tried to add, only its text.
    assert "<script" not in dom and "<img" not in dom and "<b>bold" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def write_object(folder: Path, name: str, data: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def test_corrupt_foreign_and_partial_objects_are_skipped_and_counted(tmp_path: Path) -> None:
    log = tmp_path / "log"
    day = log / "asks" / "2026-03-02"
    good = ask_record({"id": "x", "abstained": True, "citations": []}, "kept question", 2.0)
    good["t"] = "2026-03-02T10:00:00.000000Z"
    whole = gzip.compress((json.dumps(good) + "\n").encode())
    write_object(day, "a.jsonl.gz", whole)
    write_object(day, "b.jsonl.gz", whole[:-9])  # partial: cut before the gzip trailer
    write_object(day, "c.jsonl.gz", b"PK\x03\x04 a zip, not ours")
    write_object(day, "d.jsonl.gz", gzip.compress(b'{"some": "other tool"}\n'))
    write_object(log / "asks" / "not-a-day", "e.jsonl.gz", whole)  # ignored: not a day
    data = collect(str(log)).to_json()
    assert data["questions"] == 1
    assert data["log"] == {
        "objects": 4,
        "records": 1,
        "skipped_objects": 2,
        "skipped_records": 1,
    }
    assert "skipped 2 unreadable objects" in render_html(data)


def test_a_period_with_no_data_reports_nothing_gracefully(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    code = main(
        [
            *("report", str(tmp_path / "empty"), "--since", "2026-01-01", "--until", "2026-01-31"),
            *("--index", str(tmp_path / "no-index"), "--out", str(out), "--markdown", "-"),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "0 questions" in text and "None in this period." in text
    assert "No questions in this period." in out.read_text()


def test_since_and_until_select_days(tmp_path: Path) -> None:
    sink = LocalSink(tmp_path)
    for day in ("2026-03-01", "2026-03-02", "2026-03-03"):
        row: dict[str, Any] = ask_record({"id": day, "citations": []}, f"q {day}", 1.0)
        row["t"] = f"{day}T00:00:00.000000Z"
        sink.write("asks", day, gzip.compress((json.dumps(row) + "\n").encode()))
    from datetime import date

    report = collect(str(tmp_path), since=date(2026, 3, 2), until=date(2026, 3, 2))
    assert report.total == 1 and list(report.days) == ["2026-03-02"]
    assert render_markdown(report.to_json()).startswith("## Anchored: 1 questions")


def test_markdown_escapes_markup_and_table_syntax() -> None:
    gap = {"count": 1, "questions": [{"question": MARKUP + " | `x` [l](u)", "count": 1}]}
    data: dict[str, Any] = {
        "questions": 1,
        "answered": 0,
        "refused": 1,
        "fallen_back": 0,
        "period": {"since": "", "until": ""},
        "feedback": {"up": 0, "down": 0},
        "latency_ms": {"p50": 1.0, "p90": 1.0},
        "log": {"skipped_objects": 0, "skipped_records": 0},
        "coverage_gaps": [{**gap, "closest_sections": [("a/#b", 1)]}],
        "pages_never_cited": [],
    }
    row = render_markdown(data).splitlines()[-1]
    assert "<" not in row and "&lt;script&gt;" in row
    assert row.count(" | ") == 3 and "\\|" in row and "\\`x\\`" in row and "\\[l\\]" in row


def test_the_report_shows_what_verification_decided_per_check(tmp_path: Path) -> None:
    """Issue 27: the question log keeps each answer's verification counts (no sentence
    text), and the report shows per check the share of sentences removed and left
    unverified."""
    sink = LocalSink(tmp_path)
    verification = {
        "sentences": 10,
        "checks": {"weak_support": {"removed": 0, "unverified": 2}},
        "decisions": [{"index": 3, "check": "weak_support", "action": "unverified"}],
    }
    other = {"sentences": 10, "checks": {"unknown_citation": {"removed": 1, "unverified": 0}}}
    day = "2026-03-02"
    rows = []
    for n, v in enumerate((verification, other)):
        result = {"id": f"a{n}", "citations": [], "removed_sentences": 1, "verification": v}
        result["unverified_sentences"], result["coverage"] = 2 - n, "partial"
        row = ask_record(result, f"question {n}", 1.0)
        row["t"] = f"{day}T00:00:0{n}.000000Z"
        rows.append(row)
    assert rows[0]["verification"] == {
        "sentences": 10,
        "pasted": False,
        "checks": {"weak_support": {"removed": 0, "unverified": 2}},
    }
    assert rows[0]["unverified_sentences"] == 2 and rows[0]["coverage"] == "partial"
    blob = "".join(json.dumps(r) + "\n" for r in rows)
    sink.write("asks", day, gzip.compress(blob.encode()))
    data = collect(str(tmp_path)).to_json()
    by_check = {c["check"]: c for c in data["verification"]["checks"]}
    assert data["verification"]["sentences"] == 20
    assert by_check["weak_support"]["unverified_share"] == 0.1
    assert by_check["unknown_citation"]["removed_share"] == 0.05
    assert "What verification decided" in render_html(data)
    markdown = render_markdown(data)
    assert "### Verification (20 sentences)" in markdown
    assert "| unknown\\_citation | 5.0% | 0.0% |" in markdown


def test_the_report_counts_pasted_replies_and_those_shown_as_the_closest(tmp_path: Path) -> None:
    """A reply that only pasted its passages is judged as the quote; the owner sees how
    often, and how often the quote's refusal made it an abstention."""
    sink = LocalSink(tmp_path)
    day = "2026-03-03"
    rows = []
    for n, (pasted, abstained) in enumerate(((True, True), (True, False), (False, False))):
        result = {
            "id": f"p{n}",
            "citations": [],
            "abstained": abstained,
            "verification": {"sentences": 3, "checks": {}, "pasted": pasted},
        }
        row = ask_record(result, f"pasted question {n}", 1.0)
        row["t"] = f"{day}T00:00:0{n}.000000Z"
        rows.append(row)
    sink.write("asks", day, gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    data = collect(str(tmp_path)).to_json()
    assert data["verification"]["pasted"] == 2 and data["verification"]["pasted_refused"] == 1
    line = "only pasted passage text: 2; shown as the closest passages (the quoted answer"
    assert line in render_markdown(data) and line in render_html(data)
