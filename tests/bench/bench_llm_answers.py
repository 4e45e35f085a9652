"""Answers made by a real model: the LLM path of ``/v1/ask`` on the development sets.

    python tests/bench/bench_llm_answers.py                 # run (or replay) and print the table
    python tests/bench/bench_llm_answers.py --per-set 10    # questions per set (default 10)
    python tests/bench/bench_llm_answers.py --record-fixtures  # record tests/fixtures/llm-replies
    python tests/bench/bench_llm_answers.py --offline       # score cached replies only, no server

The model is Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) behind llama.cpp's OpenAI-compatible
server (``tests/bench/llm_server.py`` reproduces it from registry packages; a server
already on ``--port`` is reused). Every question goes through the real route: the
Starlette app of ``create_app`` with an ``Engine`` whose LLM client is the ordinary
``OpenAICompatClient`` pointed at that server. Replies are cached by a hash of the
request (model, messages, max_tokens, temperature) in ``~/.cache/anchored-bench/replies``
as the raw HTTP body, and a cached reply is parsed again by the real client code, so
rerunning the scoring is free and every figure comes from real replies. Not part of CI.

Per question set it reports (``llm_scoring.py``):

- answered / refused: answerable questions answered, unanswerable ones refused (and
  the wrong side of each);
- kept: the model's sentences shown with a verified citation, of all it wrote;
- cit. prec.: citation precision, judged pair by pair (shown sentence, passage it
  cites) by the same local model with a fixed rubric plus a lexical check
  (``llm_judge.py``; ``--judge pair``, one call per pair, is the default), validated
  against the hand labels in ``tests/bench/data/llm-judge-labels.jsonl`` (agreement
  printed under the table);
- fact: answerable questions whose shown answer states one of the question's facts;
- p50 s: latency of the whole ask (the model's time as recorded when the reply was made);
- in/out tok: prompt and output tokens per ask, as the server reported them.

Each set is scored twice from the same replies: with today's verifier (kept verbatim
in ``tests/bench/baseline_citations.py``, for comparison only) and with the current one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO / "lambda"), str(REPO)]

import anchored_query.answer.llm_answer as answer_module  # noqa: E402
import llm_server  # noqa: E402
from anchored_query.engine import Engine  # noqa: E402
from anchored_query.errors import LLMError  # noqa: E402
from anchored_query.llm import Completion, OpenAICompatClient  # noqa: E402
from anchored_query.serve.app import create_app  # noqa: E402
from anchored_query.settings import Settings  # noqa: E402
from anchored_query.types import Passage  # noqa: E402
from llm_judge import JUDGES, LABELS, SUPPORT_LABELS, Judge, agreement  # noqa: E402
from llm_replies import REPLIES, Asked, CachingClient, Call  # noqa: E402
from llm_scoring import BEFORE, HEADER, judge_all, row, score_new, score_old  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "llm-replies"
DATA = HERE / "data"
REALDOCS = Path(os.environ.get("ANCHORED_REALDOCS", "/tmp/anchored-bench/realdocs"))
WORK = Path("/tmp/anchored-bench/llm")
# The model's window as served (--n_ctx 8192) is larger than what we give it: on two
# cores ~3k tokens of prompt already take about a minute to read.
# The model server reads one prompt at a time and keeps working on a request whose
# client gave up (llama-cpp-python does not stop a non-streamed completion when the
# connection closes), so the benchmark never gives up on one.
BENCH_ENV = {
    "ANCHORED_LLM_CONTEXT_TOKENS": "2048",
    "ANCHORED_LLM_MAX_OUTPUT_TOKENS": "300",
    "ANCHORED_DEADLINE_S": "3600",
    "ANCHORED_LLM_TIMEOUT_S": "3500",
}
# The questions recorded as fixtures (this project's docs, today's prompt).
FIXTURE_QIDS = [
    *("a1", "a3", "a5", "a7", "a8", "a10", "a12", "a13", "a15", "a16", "a18", "a20"),
    *("u0", "u20", "a8-zh"),
]
EXTRA_QUESTIONS = {
    "a8-zh": {
        "qid": "a8-zh",
        "question": "Anchored 默认使用哪个嵌入模型？",
        "gold_refs": [],
        "answerable": True,
        "facts": ["all-MiniLM-L6-v2"],
        "lang": "zh",
    }
}


def log(message: str) -> None:
    print(f"[bench_llm] {message}", file=sys.stderr, flush=True)


class StashingEngine(Engine):
    """The real engine, keeping the passages each LLM answer was made from and why the
    verifier removed what it removed."""

    last_passages: list[Passage]
    last_reasons: list[str]

    def _answer_llm(self, request: Any, passages: list[Passage], *args: Any, **kw: Any) -> Any:
        self.last_passages = list(passages)
        self.last_reasons = []
        real = answer_module.verify

        def recording(*a: Any, **k: Any) -> Any:
            verified = real(*a, **k)
            self.last_reasons = list(verified.reasons)
            return verified

        answer_module.verify = recording  # type: ignore[assignment]
        try:
            return super()._answer_llm(request, passages, *args, **kw)
        finally:
            answer_module.verify = real  # type: ignore[assignment]


# ---------------------------------------------------------------- question sets


@dataclass
class QuestionSet:
    name: str
    index: Path
    questions: list[dict[str, Any]]


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def sample(
    questions: list[dict[str, Any]],
    n: int,
    *,
    second: str = "zh",
    split: str = "dev",
    all_unanswerable: bool = False,
) -> list[dict[str, Any]]:
    """``n`` questions of ``split``, spread over the set (deterministic): answerable
    English ones, plus, from n=2, one ``second`` kind ("zh": Chinese, "unanswerable"), and
    from n=3 one of the other kind; a fifth of each from n=5. With ``all_unanswerable``
    every unanswerable question of the split is added (a refusal rate needs more than one)."""
    dev = [q for q in questions if q.get("split", "dev") == split] or questions
    english = [q for q in dev if q.get("answerable", True) and q.get("lang", "en") == "en"]
    chinese = [q for q in dev if q.get("answerable", True) and q.get("lang", "en") != "en"]
    unanswerable = [q for q in dev if not q.get("answerable", True)]
    extra = max(1, n // 5) if n >= 2 else 0
    kinds = {"zh": chinese, "unanswerable": unanswerable}
    first = kinds[second]
    other = unanswerable if second == "zh" else chinese
    want = [(first, extra), (other, extra if n >= 3 else 0)]
    picked: list[dict[str, Any]] = []
    for group, k in want:
        picked += _spread(group, k)
    chosen = _spread(english, n - len(picked)) + picked
    if all_unanswerable:
        chosen += [q for q in unanswerable if q not in chosen]
    return chosen


def _spread(group: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    if not group or k <= 0:
        return []
    step = max(1, len(group) // k)
    return group[::step][:k]


def anchored_docs_index() -> Path:
    """This project's own docs, built as tests/bench/bench_extractive.py builds them."""
    import bench_extractive

    return bench_extractive.build_corpus("anchored-docs", WORK)


def question_sets(
    names: Sequence[str],
    per_set: int,
    *,
    split: str = "dev",
    all_unanswerable: bool = False,
    qids: Sequence[str] = (),
) -> list[QuestionSet]:
    """The question sets of tests/bench/data/realdocs with the indexes
    ``python tests/bench/realdocs.py`` builds, ``per_set`` questions each (see
    :func:`sample`), or only the questions ``qids`` when given."""
    sets = []
    for name in names:
        path = DATA / "realdocs" / f"{name}.jsonl"
        index = REALDOCS / name / "index"
        if not path.exists() or not (index / "manifest.json").exists():
            log(f"skipping {name}: {path} or {index} missing (python tests/bench/realdocs.py)")
            continue
        second = "zh" if len(sets) % 2 == 0 else "unanswerable"
        questions = load_jsonl(path)
        if qids:
            chosen = [q for q in questions if q["qid"] in qids]
        else:
            chosen = sample(
                questions, per_set, second=second, split=split, all_unanswerable=all_unanswerable
            )
        if chosen:
            sets.append(QuestionSet(name, index, chosen))
    return sets


# ---------------------------------------------------------------- asking


def bench_settings(index: Path, base_url: str, extra: dict[str, str] | None = None) -> Settings:
    env = {
        "ANCHORED_INDEX": str(index),
        "ANCHORED_CACHE_DIR": str(WORK / "cache"),
        "ANCHORED_LLM_PROVIDER": "openai",
        "ANCHORED_LLM_MODEL": llm_server.MODEL_NAME,
        "ANCHORED_LLM_BASE_URL": base_url,
        "ANCHORED_RATE_LIMIT_PER_MIN": "0",
        **BENCH_ENV,
        **(extra or {}),
    }
    return Settings.from_env(env)


def ask_all(
    qset: QuestionSet, base_url: str, *, offline: bool, extra: dict[str, str] | None = None
) -> Iterator[Asked]:
    from starlette.testclient import TestClient

    settings = bench_settings(qset.index, base_url, extra)
    client = CachingClient(base_url, llm_server.MODEL_NAME, offline=offline)
    engine = StashingEngine(settings, llm=client)
    with TestClient(create_app(settings, engine=engine)) as http:
        for q in qset.questions:
            client.calls = []
            engine.last_passages = []
            engine.last_reasons = []
            t0 = time.perf_counter()
            # A follow-up carries the conversation it follows, as the ask box sends it.
            ask = {
                "question": q["question"],
                **({"history": q["history"]} if q.get("history") else {}),
            }
            response = http.post("/v1/ask", json=ask)
            wall = time.perf_counter() - t0
            yield Asked(
                q["qid"],
                q,
                response.json(),
                response.status_code,
                wall,
                list(client.calls),
                list(engine.last_passages),
                list(engine.last_reasons),
            )


# ---------------------------------------------------------------- recorded fixtures

# The revision whose prompt the fixtures were recorded with ("today's prompt").
PROMPT_REV = "56a0a56"


def module_at(rev: str, path: str, name: str) -> Any:
    """A module of the repository as it was at git revision ``rev`` (read-only use)."""
    import importlib.util
    import subprocess
    import tempfile

    source = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    target = Path(tempfile.mkdtemp(prefix="anchored-rev-")) / f"{name}.py"
    target.write_text(source, "utf-8")
    spec = importlib.util.spec_from_file_location(name, target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def record_fixtures(base_url: str) -> None:
    """Record real replies to this project's docs questions into tests/fixtures/llm-replies.

    The prompt is whatever ``anchored_query.answer.prompt`` builds now; each fixture holds
    the question, the passages (as the engine made them), the messages, the raw
    response body, usage and finish_reason, so tests can replay them.
    """
    import anchored_query.answer.llm_answer as answer_module

    # Today's prompt (as at PROMPT_REV), not the one in the working tree.
    old_prompt = module_at(PROMPT_REV, "lambda/anchored_query/answer/prompt.py", "prompt_at_rev")
    answer_module.build_messages = old_prompt.build_messages  # type: ignore[attr-defined]
    questions = {q["qid"]: q for q in load_jsonl(DATA / "anchored-docs-questions.jsonl")}
    questions.update(EXTRA_QUESTIONS)
    chosen = [questions[qid] for qid in FIXTURE_QIDS]
    qset = QuestionSet("anchored", anchored_docs_index(), chosen)
    FIXTURES.mkdir(parents=True, exist_ok=True)
    prompt_rev = PROMPT_REV
    # Today's engine sizes passages by ANCHORED_CONTEXT_TOKENS alone (and always rewrites).
    extra = {"ANCHORED_CONTEXT_TOKENS": "2500", "ANCHORED_LLM_REWRITE": "0"}
    for asked in ask_all(qset, base_url, offline=False, extra=extra):
        write_fixture(asked, prompt_rev)


def write_fixture(asked: Asked, prompt_rev: str, out_dir: Path = FIXTURES) -> None:
    """``out_dir``/<qid>.json (tests/fixtures/llm-replies) from one real ask (no secrets:
    the local server has no key, and the request holds only the prompt)."""
    answer_calls = [c for c in asked.calls if c.completion is not None]
    if not answer_calls:
        log(f"{asked.qid}: no reply ({[c.error for c in asked.calls]})")
        return
    call = answer_calls[-1]
    entry = json.loads((REPLIES / f"{call.key}.json").read_text("utf-8"))
    response = json.loads(entry["raw"])
    choice = response["choices"][0]
    fixture = {
        "qid": asked.qid,
        "question": asked.question,
        "model": llm_server.MODEL_NAME,
        "prompt_sha256": call.key,
        "prompt_rev": prompt_rev,
        "recorded": time.strftime("%Y-%m-%d"),
        "messages": call.messages,
        "max_tokens": entry["request"].get("max_tokens"),
        "temperature": entry["request"].get("temperature"),
        "passages": [asdict(p) for p in asked.passages],
        "response": response,
        "reply": choice["message"]["content"],
        "usage": response.get("usage"),
        "finish_reason": choice.get("finish_reason"),
        "latency_s": entry["latency_s"],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{asked.qid}.json"
    out.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", "utf-8")
    reply = choice["message"]["content"]
    log(f"{asked.qid}: recorded ({entry['latency_s']:.0f}s) {reply[:80]!r}")


class ReplayClient:
    """Answers every call with one recorded completion (scoring fixtures offline)."""

    name = "replay"

    def __init__(self) -> None:
        self.completion = Completion("")

    def complete(self, messages: Any, **_: Any) -> Completion:
        return self.completion


def fixture_set(fixture: dict[str, Any]) -> str:
    """The row a fixture is scored in: today's prompt, or the new prompt's set."""
    if fixture.get("prompt_rev") == PROMPT_REV:
        return "anchored, today's prompt"
    return str(fixture["qid"]).rsplit("-", 1)[0]


def replay_fixtures() -> list[Asked]:
    """The recorded fixtures through the current /v1/ask answer step:
    the engine's own verification of each recorded reply and its recorded passages."""
    from anchored_query.question.validation import AskRequest

    fixtures = [json.loads(f.read_text("utf-8")) for f in sorted(FIXTURES.glob("*.json"))]
    if not fixtures:
        return []
    replay = ReplayClient()
    engines: dict[Path, Any] = {}
    out = []
    for fx in fixtures:
        # The index the reply was made on (its IDF and embedder feed the support test).
        name = fixture_set(fx)
        index = REALDOCS / name / "index"
        if not (index / "manifest.json").exists():
            index = anchored_docs_index()
        if index not in engines:
            engine = Engine(bench_settings(index, "http://127.0.0.1:9/v1"), llm=replay)  # type: ignore[arg-type]
            engines[index] = (engine, engine.current())
        engine, loaded = engines[index]
        response = fx["response"]
        client = OpenAICompatClient("http://127.0.0.1:9/v1", "", fx["model"])
        completion = client._parse(json.dumps(response).encode(), 200)
        replay.completion = completion
        passages = [Passage(**p) for p in fx["passages"]]
        request = AskRequest(fx["question"]["question"])
        from anchored_query.llm.calls import Deadline

        try:
            body = engine._answer_llm(request, passages, loaded, Deadline(60))
        except LLMError as exc:
            body = {"mode": "extractive", "fallback": exc.category, "abstained": True}
        call = Call(fx["prompt_sha256"], fx["messages"], completion, "", fx["latency_s"], True)
        asked = Asked(fx["qid"], fx["question"], body, 200, 0.0, [call], passages)
        asked.question = {**fx["question"], "_set": fixture_set(fx)}
        out.append(asked)
    return out


def rescore_dump(path: Path, qids: Sequence[str] = ()) -> dict[str, list[Asked]]:
    """The answers of a ``--dump`` file (its replies and the passages each was made
    from) through the current /v1/ask answer step again, per set: rescoring after a
    verifier change needs neither the model nor today's retrieval (which others may
    have changed). Latency and tokens are taken from the dump when it has them."""
    from anchored_query.llm.calls import Deadline
    from anchored_query.question.validation import AskRequest

    replay = ReplayClient()
    engines: dict[str, Any] = {}
    out: dict[str, list[Asked]] = {}
    for entry in json.loads(path.read_text("utf-8")):
        if qids and entry["qid"] not in qids:
            continue
        name = entry["set"]
        if name not in engines:
            index = REALDOCS / name / "index"
            if not (index / "manifest.json").exists():
                index = anchored_docs_index()
            engine = Engine(bench_settings(index, "http://127.0.0.1:9/v1"), llm=replay)  # type: ignore[arg-type]
            engines[name] = (engine, engine.current())
        engine, loaded = engines[name]
        reply = entry.get("reply") or ""
        usage = entry.get("usage") or {}
        completion = Completion(
            reply, usage.get("prompt_tokens"), usage.get("completion_tokens"), "stop"
        )
        passages = [Passage(**p) for p in entry["passages"]]
        body = entry["body"]
        if reply and body.get("mode") == "llm":
            replay.completion = completion
            q = entry["question"]
            request = AskRequest(q["question"])
            try:
                body = engine._answer_llm(request, passages, loaded, Deadline(60))
            except LLMError as exc:
                body = {"mode": "extractive", "fallback": exc.category, "abstained": True}
        latency = float(entry.get("latency_s") or 0.0)
        calls = [Call("", [], completion, "", latency, True)] if reply else []
        asked = Asked(entry["qid"], entry["question"], body, 200, 0.0, calls, passages)
        out.setdefault(name, []).append(asked)
    return out


def report(
    name: str, asked: list[Asked], judge: Judge | None, *, judge_old: bool = True
) -> list[str]:
    new = [score_new(a) for a in asked]
    old = [score_old(a) for a in asked]
    if judge is not None:
        judge_all(judge, new + old if judge_old else new)
    return [row(name, "today", old), row(name, "new", new)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=llm_server.DEFAULT_PORT)
    parser.add_argument("--per-set", type=int, default=2)
    parser.add_argument("--sets", default="anchored,mkdocs,httpx,material")
    parser.add_argument("--offline", action="store_true", help="cached replies only")
    parser.add_argument(
        "--cached-answers",
        action="store_true",
        help="answers from cached replies only (rescore), the judge may still call the server",
    )
    parser.add_argument("--split", choices=["dev", "test"], default="dev")
    parser.add_argument(
        "--all-unanswerable", action="store_true", help="add every unanswerable question"
    )
    parser.add_argument("--qids", default="", help="only these questions (comma-separated)")
    parser.add_argument(
        "--system-prompt",
        type=Path,
        help="experiment: answer with this system prompt instead of prompt.SYSTEM_PROMPT",
    )
    parser.add_argument("--no-judge", action="store_true")
    parser.add_argument(
        "--judge-only", action="store_true", help="only check the judge against the hand labels"
    )
    parser.add_argument(
        "--judge-new-only", action="store_true", help="judge the current verifier's pairs only"
    )
    parser.add_argument(
        "--no-agreement", action="store_true", help="do not check the judge against the labels"
    )
    parser.add_argument("--judge", choices=sorted(JUDGES), default="pair")
    parser.add_argument(
        "--recorded-only",
        action="store_true",
        help="score only the recorded fixtures (their passages and replies), no new asks",
    )
    parser.add_argument("--record-fixtures", action="store_true")
    parser.add_argument("--no-recorded", action="store_true", help="skip the recorded fixtures")
    parser.add_argument("--dump", type=Path, help="write every answer and verdict as JSON")
    parser.add_argument(
        "--rescore",
        type=Path,
        help="score the replies of a --dump file with the current verifier (no model, "
        "no retrieval; the judge still calls the server unless --no-judge)",
    )
    parser.add_argument(
        "--export-fixtures", action="store_true", help="also write the replies as test fixtures"
    )
    args = parser.parse_args(argv)
    if args.system_prompt:
        import anchored_query.answer.prompt as prompt_module

        prompt_module.SYSTEM_PROMPT = args.system_prompt.read_text("utf-8")
    if args.record_fixtures:
        with llm_server.running(args.port) as base_url:
            record_fixtures(base_url)
        return 0
    lines = [HEADER, BEFORE]
    dump: list[dict[str, Any]] = []
    context = (
        contextlib.nullcontext(llm_server.base_url(args.port))
        if args.offline
        else llm_server.running(args.port)
    )
    with context as base_url:
        judge = (
            None
            if args.no_judge
            else JUDGES[args.judge](base_url, offline=args.offline, model=llm_server.MODEL_NAME)
        )
        if args.judge_only:
            assert judge is not None, "--judge-only needs a judge"
            print(agreement(judge, LABELS))
            print(agreement(judge, SUPPORT_LABELS))
            return 0
        if args.rescore:
            wanted = [q for q in args.qids.split(",") if q]
            every: tuple[list[Any], list[Any]] = ([], [])
            for name, group in rescore_dump(args.rescore, wanted).items():
                new = [score_new(a) for a in group]
                old = [score_old(a) for a in group]
                if judge is not None:
                    judge_all(judge, new if args.judge_new_only else new + old)
                lines += [row(name, "today", old), row(name, "new", new)]
                every[0].extend(old)
                every[1].extend(new)
            lines += [row("all", "today", every[0]), row("all", "new", every[1])]
            print("\n".join(lines))
            return 0
        answers_offline = args.offline or args.cached_answers
        fixtures = [] if args.no_recorded else replay_fixtures()
        for name in dict.fromkeys(a.question["_set"] for a in fixtures):
            group = [a for a in fixtures if a.question["_set"] == name]
            lines += report(f"{name} (recorded)", group, judge, judge_old=not args.judge_new_only)
        if args.recorded_only:
            args.sets = ""

        names = [n for n in args.sets.split(",") if n]
        qids = [q for q in args.qids.split(",") if q]
        chosen = question_sets(
            names, args.per_set, split=args.split, all_unanswerable=args.all_unanswerable, qids=qids
        )
        for qset in chosen:
            asked = []
            for a in ask_all(qset, base_url, offline=answers_offline):
                if answers_offline and a.body.get("fallback") == "connection":
                    log(f"{qset.name}/{a.qid}: no cached reply, left out")
                    continue
                log(f"{qset.name}/{a.qid}: {a.body.get('mode')} {a.latency_s:.0f}s")
                asked.append(a)
                if args.export_fixtures:
                    write_fixture(a, "new")
            lines += report(qset.name, asked, judge, judge_old=not args.judge_new_only)
            dump += [
                {
                    "set": qset.name,
                    "qid": a.qid,
                    "question": a.question,
                    "body": a.body,
                    "reply": a.reply,
                    "reasons": a.reasons,
                    "latency_s": round(a.latency_s, 3),
                    "usage": {
                        "prompt_tokens": score_new(a).input_tokens,
                        "completion_tokens": score_new(a).output_tokens,
                    },
                    "passages": [asdict(p) for p in a.passages],
                }
                for a in asked
            ]
            print("\n".join(lines), flush=True)
        if judge is not None and not args.no_agreement:
            lines.append("")
            lines.append(agreement(judge, LABELS))
            lines.append(agreement(judge, SUPPORT_LABELS))
    print("\n".join(lines))
    if args.dump:
        args.dump.write_text(json.dumps(dump, ensure_ascii=False, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
