"""The `anchored` command line on real indexes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mkdocs_anchored.cli import main


def test_index_a_built_static_site(
    fixture_site_build: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "index"
    code = main(["index", str(fixture_site_build), "-o", str(out), "--cache-dir", str(tmp_path)])
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["chunks"] > 0
    assert "indexed" in capsys.readouterr().out
    # The page excluded by front matter stays out.
    pages = {json.loads(line)["page"] for line in (out / "chunks.jsonl").read_text().splitlines()}
    assert not any("excluded" in p for p in pages)


def test_index_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="not a folder"):
        main(["index", str(tmp_path / "nope"), "-o", str(tmp_path / "i")])


def test_search_json(qa_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "dev_addr", "--index", str(qa_index), "--json", "-k", "3"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert 0 < len(body["results"]) <= 3
    assert body["results"][0]["url"].startswith("guide/configuration/")


def test_ask_prints_cited_sentences(qa_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "How do I upgrade Skylark?", "--index", str(qa_index)]) == 0
    out = capsys.readouterr().out
    assert "--upgrade" in out
    assert re.search(r"^\[1\] .*Upgrading", out, re.M)
    # the citation's link: full URL (the site_url of the build), highlight parameter, text fragment
    link = r"^    (https?://\S+/)?guide/install/\?anchored-hl=\S+#upgrading:~:text=\S+$"
    assert re.search(link, out, re.M), out


def test_ask_without_index_fails_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ask", "hello?", "--index", str(tmp_path / "missing")]) == 1
    assert "index is unavailable" in capsys.readouterr().err


def test_eval_writes_a_run_file(qa_index: Path, tmp_path: Path) -> None:
    questions = tmp_path / "qa.jsonl"
    rows = [
        {"qid": "1", "question": "default port", "gold_refs": ["guide/configuration/#port"]},
        {"qid": "2", "question": "upgrade the package", "gold_refs": ["/guide/install/#upgrading"]},
        {"qid": "3", "question": "sourdough recipe", "gold_refs": [], "answerable": False},
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs_anchored.cli",
            "eval",
            str(questions),
            "--index",
            str(qa_index),
            "--out",
            str(run),
            "--answers",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    metrics = dict(line.split() for line in done.stdout.splitlines())
    assert float(metrics["recall@10"]) == 1.0
    assert float(metrics["abstention_unanswerable"]) == 1.0
    lines = [json.loads(x) for x in run.read_text().splitlines()]
    assert [x["qid"] for x in lines] == ["1", "2", "3"]
    assert lines[0]["ranked"][0] == "guide/configuration/#port"
    assert lines[2]["abstained"] is True


def test_commands_wait_longer_than_the_function_for_a_first_download(
    qa_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold load is bounded by the deadline; the function's 20 s (for Lambda's 30 s
    timeout) would cut a command's first download of a large s3:// index short."""
    from anchored_query.settings import Settings
    from mkdocs_anchored.cli_query import CLI_DEADLINE_S, _engine

    monkeypatch.delenv("ANCHORED_DEADLINE_S", raising=False)
    engine = _engine(str(qa_index))
    assert engine.settings.deadline_s == CLI_DEADLINE_S > Settings(index="x").deadline_s
    assert (
        _engine(str(qa_index), one_shot=False).settings.deadline_s == Settings(index="x").deadline_s
    )
    monkeypatch.setenv("ANCHORED_DEADLINE_S", "7")
    assert _engine(str(qa_index)).settings.deadline_s == 7.0


def test_ask_json_names_each_sentence_verification_removed_or_left_unverified(
    qa_index: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 27: `anchored ask --json` says, sentence by sentence, what verification did
    and which check decided (the API response carries only their numbers and checks)."""
    from fakes import FakeOpenAIServer, Reply, quote_passages

    def reply(request: object) -> str:
        supported = quote_passages(k=1)(request)  # type: ignore[arg-type]
        return f"{supported} Skylark also ships a warp drive [99]."

    with FakeOpenAIServer() as llm:
        llm.default = Reply(reply)
        for key, value in {
            "ANCHORED_LLM_PROVIDER": "openai",
            "ANCHORED_LLM_MODEL": "fake-model",
            "ANCHORED_LLM_BASE_URL": llm.url,
            "ANCHORED_LLM_RETRIES": "0",
            "ANCHORED_CACHE_DIR": str(tmp_path / "cache"),
        }.items():
            monkeypatch.setenv(key, value)
        assert (
            main(["ask", "Which port does Skylark use?", "--index", str(qa_index), "--json"]) == 0
        )
    body = json.loads(capsys.readouterr().out)
    assert body["mode"] == "llm" and body["coverage"] == "full"
    assert body["removed_sentences"] == 1
    checks = body["verification"]["checks"]
    assert checks["unknown_citation"] == {"removed": 1, "unverified": 0}
    (decision,) = body["verification"]["decisions"]
    assert decision == {"index": 2, "check": "unknown_citation", "action": "removed"}
    (why,) = body["verification"]["why"]
    assert why.startswith("sentence 2: removed: unknown_citation:") and "warp drive" in why
    assert all("warp" not in s["text"] for s in body["answer"])
