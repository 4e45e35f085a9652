"""The quality gate: `anchored eval` thresholds exit non-zero naming what fell below;
`anchored eval --from-log` turns labelled logged questions into golden questions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from anchored_query.owner.evaluation import gate_failures, golden_from_log, load_questions
from anchored_query.owner.querylog import LocalSink, QuestionLog, ask_record
from mkdocs_anchored.cli import main

GOLDEN = [
    {"qid": "1", "question": "default port", "gold_refs": ["guide/configuration/#port"]},
    # A question as readers write it: the bare keywords "upgrade the package" sit just
    # under the refusal threshold since the qa-site gained a section (0.635 vs 0.649).
    {
        "qid": "2",
        "question": "How do I upgrade the package?",
        "gold_refs": ["guide/install/#upgrading"],
    },
    {"qid": "3", "question": "sourdough recipe", "gold_refs": [], "answerable": False},
]


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_build_that_meets_the_thresholds_passes(
    qa_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = write(tmp_path / "golden.jsonl", GOLDEN)
    code = main(
        [
            *("eval", str(questions), "--index", str(qa_index), "--min-recall-at-10", "1.0"),
            *("--min-ndcg", "0.5", "--max-false-refusals", "0", "--min-refusals-unanswerable", "1"),
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "quality gate passed (4 thresholds)" in out.out
    assert "false_abstention" in out.out  # the refusal thresholds answered the questions


def test_a_build_that_falls_below_fails_naming_each_threshold(
    qa_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A golden question whose section the docs do not have (a page removed by a change).
    rows = [*GOLDEN, {"qid": "4", "question": "default port", "gold_refs": ["gone/#port"]}]
    questions = write(tmp_path / "golden.jsonl", rows)
    code = main(
        [
            *("eval", str(questions), "--index", str(qa_index)),
            *("--min-recall-at-10", "0.9", "--min-ndcg", "0.1", "--max-false-refusals", "0"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    failed = [line for line in err.splitlines() if "FAILED" in line]
    assert len(failed) == 1, err
    assert "recall@10 0.6667 is below the minimum 0.9 (--min-recall-at-10)" in failed[0]


def test_gate_failures_reads_both_directions() -> None:
    summary: dict[str, float | int] = {"recall@10": 0.8, "false_abstention": 0.25}
    assert gate_failures(summary, {"min_recall_at_10": 0.8, "max_false_refusals": 0.25}) == []
    failures = gate_failures(summary, {"min_recall_at_10": 0.81, "max_false_refusals": 0.2})
    assert [f.split()[0] for f in failures] == ["recall@10", "false_abstention"]
    assert "above the maximum 0.2" in failures[1]


def test_labelled_logged_questions_become_golden_questions(
    qa_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log"
    qlog = QuestionLog(LocalSink(log), flush_s=0.01)
    asked = [
        ({"id": "a" * 20, "citations": [{"url": "guide/configuration/#port"}]}, "default port"),
        ({"id": "b" * 20, "abstained": True, "citations": []}, "sourdough recipe"),
        ({"id": "c" * 20, "citations": [{"url": "index/"}]}, "not labelled"),
        ({"id": "d" * 20, "citations": [{"url": "index/"}]}, "default port"),  # asked again
    ]
    for result, question in asked:
        qlog.submit(ask_record(result, question, 5.0))
    qlog.close()

    # Without labels: a sheet to label, each question once, closest sections suggested.
    sheet = tmp_path / "sheet.jsonl"
    assert main(["eval", "--from-log", str(log), "--out", str(sheet)]) == 0
    rows = [json.loads(x) for x in sheet.read_text().splitlines()]
    assert [r["question"] for r in rows] == ["default port", "sourdough recipe", "not labelled"]
    assert rows[0]["gold_refs"] == ["guide/configuration/#port"] and rows[0]["answerable"] is None

    # The owner labels two of them (one by id, one by question) and leaves one null.
    labels = write(
        tmp_path / "labels.jsonl",
        [
            {**rows[0], "answerable": True},
            {"question": "sourdough recipe", "answerable": False},
            rows[2],  # answerable still null: not a label
        ],
    )
    golden = tmp_path / "golden.jsonl"
    assert (
        main(["eval", "--from-log", str(log), "--labels", str(labels), "--out", str(golden)]) == 0
    )
    assert "wrote 2 golden questions" in capsys.readouterr().err
    loaded = load_questions(golden)
    assert [(q.question, q.gold_refs, q.answerable) for q in loaded] == [
        ("default port", ("guide/configuration/#port",), True),
        ("sourdough recipe", (), False),
    ]
    # And they gate a build.
    assert main(["eval", str(golden), "--index", str(qa_index), "--min-recall-at-10", "1"]) == 0


def test_a_label_without_a_verdict_is_not_a_golden_question() -> None:
    asks = [{"answer_id": "x", "question": "q"}]
    assert golden_from_log(asks, [{"answer_id": "x", "gold_refs": ["a/"]}]) == []
