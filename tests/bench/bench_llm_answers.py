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

Per question set it reports (see ``score`` and ``judge``):

- answered / refused: answerable questions answered, unanswerable ones refused (and
  the wrong side of each);
- kept: the model's sentences shown with a verified citation, of all it wrote;
- cit. prec.: citation precision, judged pair by pair (shown sentence, passage it
  cites) by the same local model with the fixed rubric in ``JUDGE_RUBRIC`` — one
  judge call per answer — and counted as supported only when the judge says so
  *and* the lexical check passes (every checkable token of the sentence — numbers,
  identifiers, inline code — occurs in the passage). The judge is validated against
  the hand labels in ``tests/bench/data/llm-judge-labels.jsonl`` (agreement printed);
- fact: answerable questions whose shown answer states one of the question's facts;
- p50 s: latency of the whole ask (the model's time as recorded when the reply was made);
- in/out tok: prompt and output tokens per ask, as the server reported them.

Each set is scored twice from the same replies: with today's verifier (kept verbatim
in ``tests/bench/baseline_citations.py``, for comparison only) and with the current one.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO / "lambda"), str(REPO)]

import anchored_query.citations as citations_module  # noqa: E402
import baseline_citations  # noqa: E402
import llm_server  # noqa: E402
from anchored_query.app import create_app  # noqa: E402
from anchored_query.citations import parse_answer  # noqa: E402
from anchored_query.engine import Engine  # noqa: E402
from anchored_query.errors import LLMError  # noqa: E402
from anchored_query.llm import ChatMessage, Completion, OpenAICompatClient  # noqa: E402
from anchored_query.prompt import echoes_instructions  # noqa: E402
from anchored_query.settings import Settings  # noqa: E402
from anchored_query.types import Passage  # noqa: E402

REPLIES = llm_server.CACHE / "replies"
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


# ---------------------------------------------------------------- cached real replies


def request_key(body: dict[str, Any]) -> str:
    """The cache key of a chat request: what decides the model's reply."""
    wanted = {k: body.get(k) for k in ("model", "messages", "max_tokens", "temperature")}
    return hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()


@dataclass
class Call:
    """One model call made during an ask."""

    key: str
    messages: list[dict[str, str]]
    completion: Completion | None
    error: str
    latency_s: float
    cached: bool


class CachingClient(OpenAICompatClient):
    """The real OpenAI-compatible client; each raw response body is cached by request.

    A cached body is parsed by the same code as a fresh one. ``offline`` refuses to
    call the server (a reply that is not cached is an ``LLMError("connection")``).
    """

    def __init__(self, base_url: str, model: str, *, offline: bool = False) -> None:
        super().__init__(base_url, "", model, timeout_s=3500.0, max_retries=0)
        self.offline = offline
        self.calls: list[Call] = []
        REPLIES.mkdir(parents=True, exist_ok=True)

    def _attempt(self, body: dict[str, Any], timeout_s: float) -> Completion:
        key = request_key(body)
        path = REPLIES / f"{key}.json"
        messages = list(body["messages"])
        if path.exists():
            entry = json.loads(path.read_text("utf-8"))
            try:
                completion = self._parse(entry["raw"].encode(), 200)
            except LLMError as exc:
                self.calls.append(Call(key, messages, None, exc.category, entry["latency_s"], True))
                raise
            self.calls.append(Call(key, messages, completion, "", entry["latency_s"], True))
            return completion
        if self.offline:
            raise LLMError("connection", "offline: reply not cached", provider=self.name)
        t0 = time.perf_counter()
        self._captured: bytes | None = None
        try:
            completion = super()._attempt(body, timeout_s)
        except LLMError as exc:
            self.calls.append(
                Call(key, messages, None, exc.category, time.perf_counter() - t0, False)
            )
            raise
        latency = time.perf_counter() - t0
        raw = self._captured or b""
        entry = {"request": body, "raw": raw.decode("utf-8"), "latency_s": round(latency, 3)}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry, ensure_ascii=False), "utf-8")
        tmp.replace(path)
        self.calls.append(Call(key, messages, completion, "", latency, False))
        return completion

    def _parse(self, raw: bytes, status: int) -> Completion:
        self._captured = raw
        return super()._parse(raw, status)


class StashingEngine(Engine):
    """The real engine, keeping the passages each LLM answer was made from."""

    last_passages: list[Passage]

    def _answer_llm(self, request: Any, passages: list[Passage], *args: Any, **kw: Any) -> Any:
        self.last_passages = list(passages)
        return super()._answer_llm(request, passages, *args, **kw)


# ---------------------------------------------------------------- question sets


@dataclass
class QuestionSet:
    name: str
    index: Path
    questions: list[dict[str, Any]]


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def sample(questions: list[dict[str, Any]], n: int, *, second: str = "zh") -> list[dict[str, Any]]:
    """``n`` questions of the dev split, spread over the set (deterministic): answerable
    English ones, plus, from n=2, one ``second`` kind ("zh": Chinese, "unanswerable"), and
    from n=3 one of the other kind; a fifth of each from n=5."""
    dev = [q for q in questions if q.get("split", "dev") == "dev"] or questions
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
    return _spread(english, n - len(picked)) + picked


def _spread(group: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    if not group or k <= 0:
        return []
    step = max(1, len(group) // k)
    return group[::step][:k]


def anchored_docs_index() -> Path:
    """This project's own docs, built as tests/bench/bench_extractive.py builds them."""
    import bench_extractive

    return bench_extractive.build_corpus("anchored-docs", WORK)


def question_sets(names: Sequence[str], per_set: int) -> list[QuestionSet]:
    """The development sets of tests/bench/data/realdocs with the indexes
    ``python tests/bench/realdocs.py`` builds, ``per_set`` questions each."""
    sets = []
    for name in names:
        path = DATA / "realdocs" / f"{name}.jsonl"
        index = REALDOCS / name / "index"
        if not path.exists() or not (index / "manifest.json").exists():
            log(f"skipping {name}: {path} or {index} missing (python tests/bench/realdocs.py)")
            continue
        second = "zh" if len(sets) % 2 == 0 else "unanswerable"
        sets.append(QuestionSet(name, index, sample(load_jsonl(path), per_set, second=second)))
    return sets


# ---------------------------------------------------------------- asking


@dataclass
class Asked:
    """One question asked through /v1/ask, with what the model did."""

    qid: str
    question: dict[str, Any]
    body: dict[str, Any]
    status: int
    wall_s: float
    calls: list[Call]
    passages: list[Passage] = field(default_factory=list)

    @property
    def reply(self) -> str:
        """The text of the answer call's reply ('' when it failed)."""
        answers = [c for c in self.calls if c.completion is not None]
        return answers[-1].completion.text if answers and answers[-1].completion else ""

    @property
    def latency_s(self) -> float:
        """The ask's time, with each model call's time as recorded when it was made."""
        fresh = sum(c.latency_s for c in self.calls if not c.cached)
        return self.wall_s - fresh + sum(c.latency_s for c in self.calls)


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
            t0 = time.perf_counter()
            response = http.post("/v1/ask", json={"question": q["question"]})
            wall = time.perf_counter() - t0
            yield Asked(
                q["qid"],
                q,
                response.json(),
                response.status_code,
                wall,
                list(client.calls),
                list(engine.last_passages),
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

    The prompt is whatever ``anchored_query.prompt`` builds now; each fixture holds
    the question, the passages (as the engine made them), the messages, the raw
    response body, usage and finish_reason, so tests can replay them.
    """
    import anchored_query.engine as engine_module

    # Today's prompt (as at PROMPT_REV), not the one in the working tree.
    old_prompt = module_at(PROMPT_REV, "lambda/anchored_query/prompt.py", "prompt_at_rev")
    engine_module.build_messages = old_prompt.build_messages  # type: ignore[attr-defined]
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


def write_fixture(asked: Asked, prompt_rev: str) -> None:
    """tests/fixtures/llm-replies/<qid>.json from one real ask (no secrets: the local
    server has no key, and the request holds only the prompt)."""
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
    FIXTURES.mkdir(parents=True, exist_ok=True)
    out = FIXTURES / f"{asked.qid}.json"
    out.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", "utf-8")
    reply = choice["message"]["content"]
    log(f"{asked.qid}: recorded ({entry['latency_s']:.0f}s) {reply[:80]!r}")


# ---------------------------------------------------------------- scoring

JUDGE_SYSTEM = "You check whether documentation passages support statements. You answer tersely."
JUDGE_RUBRIC = """\
For each numbered statement below, decide whether the passage named in brackets \
supports it. "yes" means the passage states what the statement says: the same facts, \
names, numbers and values, with the same things paired (paraphrase is fine). "no" means \
the passage does not say it, says something different, or the statement adds a fact the \
passage lacks. Judge only against the named passage, not against what you know.

{passages}

Statements:
{claims}

Reply with one line per statement, "<number>: yes" or "<number>: no", and nothing else."""
JUDGE_PASSAGE_CHARS = 600
JUDGE_MAX_PASSAGES = 4
_JUDGE_LINE = re.compile(r"(?m)^\s*\**\s*(\d+)\s*\**\s*[:.)\-]\s*\**\s*(yes|no)\b", re.IGNORECASE)
_CHECKABLE = re.compile(r"`([^`]+)`|(\d[\d.,:]*\d|\d)|\b([A-Za-z_][\w]*[_.][\w.]*\w)\b")


@dataclass(frozen=True)
class Pair:
    """A shown sentence and one passage it cites."""

    sentence: str
    passage: str


def lexical_ok(pair: Pair) -> bool:
    """Every checkable token of the sentence (inline code, numbers, dotted or
    underscored identifiers) occurs in the passage (case and spacing aside)."""
    haystack = " ".join(pair.passage.casefold().split())
    for match in _CHECKABLE.finditer(pair.sentence):
        token = " ".join((match.group(1) or match.group(2) or match.group(3)).casefold().split())
        if token and token not in haystack:
            return False
    return True


class Judge:
    """The local model as a judge: one call per answer, all its pairs at once."""

    def __init__(self, base_url: str, *, offline: bool) -> None:
        self.client = CachingClient(base_url, llm_server.MODEL_NAME, offline=offline)

    def verdicts(self, pairs: Sequence[Pair]) -> dict[Pair, bool | None]:
        """yes/no per pair (None: the judge gave no verdict for it)."""
        unique = list(dict.fromkeys(pairs))
        out: dict[Pair, bool | None] = {}
        # Passages in a call are capped (prompt length on 2 cores): split when needed.
        batches: list[list[Pair]] = [[]]
        for pair in unique:
            names = {p.passage for p in batches[-1]}
            if pair.passage not in names and len(names) >= JUDGE_MAX_PASSAGES:
                batches.append([])
            batches[-1].append(pair)
        for batch in batches:
            if batch:
                out.update(self._judge(batch))
        return out

    def _judge(self, batch: list[Pair]) -> dict[Pair, bool | None]:
        letters: dict[str, str] = {}
        for pair in batch:
            letters.setdefault(pair.passage, chr(ord("A") + len(letters)))
        passages = "\n\n".join(
            f"Passage {letter}:\n{' '.join(text.split())[:JUDGE_PASSAGE_CHARS]}"
            for text, letter in letters.items()
        )
        claims = "\n".join(
            f"{i}. [{letters[p.passage]}] {' '.join(p.sentence.split())}"
            for i, p in enumerate(batch, start=1)
        )
        prompt = JUDGE_RUBRIC.format(passages=passages, claims=claims)
        messages = [ChatMessage("system", JUDGE_SYSTEM), ChatMessage("user", prompt)]
        try:
            text = self.client.complete(messages, max_tokens=8 * len(batch) + 16).text
        except LLMError as exc:
            log(f"judge failed: {exc.category}")
            return dict.fromkeys(batch)
        said = {int(m.group(1)): m.group(2).lower() == "yes" for m in _JUDGE_LINE.finditer(text)}
        return {p: said.get(i) for i, p in enumerate(batch, start=1)}


@dataclass
class Scored:
    """One answer, scored."""

    qid: str
    answerable: bool
    lang: str
    abstained: bool
    fell_back: str  # the fallback code when the LLM answer was replaced, else ""
    written: int
    kept: int
    pairs: list[Pair]
    text: str
    fact: bool
    latency_s: float
    input_tokens: int
    output_tokens: int
    supported: list[bool | None] = field(default_factory=list)


def written(sentences: Sequence[Any]) -> int:
    """The model's sentences that say something about the docs: a refusal ("The
    documentation does not cover this.") is not counted as a sentence to keep."""
    refusal = getattr(citations_module, "_NO_COVERAGE", None)
    return sum(1 for s in sentences if refusal is None or not refusal.search(s.text))


def facts_stated(question: dict[str, Any], text: str) -> bool:
    norm = " ".join(text.casefold().split())
    return any(" ".join(f.casefold().split()) in norm for f in question.get("facts", []))


def _tokens(asked: Asked) -> tuple[int, int]:
    done = [c.completion for c in asked.calls if c.completion is not None]
    return (
        sum(c.input_tokens or 0 for c in done),
        sum(c.output_tokens or 0 for c in done),
    )


def score_new(asked: Asked) -> Scored:
    """The answer as /v1/ask returned it (the current verifier)."""
    body = asked.body
    chunks = {p.chunk_ids[0]: p for p in asked.passages}
    cited = {c["n"]: chunks.get(c["chunk_id"]) for c in body.get("citations", [])}
    llm = body.get("mode") == "llm"
    items = body.get("answer", []) if llm else []
    pairs = [
        Pair(item["text"], passage.text)
        for item in items
        for n in item["citations"]
        if (passage := cited.get(n)) is not None
    ]
    n_written = written(parse_answer(asked.reply)) if asked.reply else 0
    tokens = _tokens(asked)
    return Scored(
        asked.qid,
        bool(asked.question.get("answerable", True)),
        asked.question.get("lang", "en"),
        bool(body.get("abstained")) or not llm,
        body.get("fallback", "") if not llm else "",
        n_written,
        len(items),
        pairs,
        " ".join(i["text"] for i in items),
        facts_stated(asked.question, " ".join(i["text"] for i in items)),
        asked.latency_s,
        *tokens,
    )


def score_old(asked: Asked) -> Scored:
    """The same reply through today's verifier (tests/bench/baseline_citations.py), as
    today's engine used it: parse, drop echoed instructions, verify, abstain."""
    by_n = {p.n: p for p in asked.passages}
    reply = asked.reply
    sentences = baseline_citations.parse_answer(reply) if reply else []
    shown = [s for s in sentences if not echoes_instructions(s.text)]
    verified = baseline_citations.verify(shown, by_n)
    kept = [] if verified.abstained else verified.sentences
    pairs = [Pair(s.text, by_n[n].text) for s in kept for n in s.citations if n in by_n]
    text = " ".join(s.text for s in kept)
    llm = bool(reply) and asked.body.get("mode") == "llm"
    tokens = _tokens(asked)
    return Scored(
        asked.qid,
        bool(asked.question.get("answerable", True)),
        asked.question.get("lang", "en"),
        verified.abstained or not llm,
        asked.body.get("fallback", "") if not llm else "",
        written(sentences),
        len(kept) if llm else 0,
        pairs if llm else [],
        text,
        llm and facts_stated(asked.question, text),
        asked.latency_s,
        *tokens,
    )


def judge_all(judge: Judge, scored: Sequence[Scored]) -> None:
    """Fill ``supported`` per pair: the judge's yes and the lexical check."""
    for s in scored:
        verdicts = judge.verdicts(s.pairs)
        s.supported = [
            None if verdicts.get(p) is None else bool(verdicts[p]) and lexical_ok(p)
            for p in s.pairs
        ]


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "–"


def row(name: str, verifier: str, scored: Sequence[Scored]) -> str:
    ans = [s for s in scored if s.answerable]
    unans = [s for s in scored if not s.answerable]
    answered = sum(not s.abstained for s in ans)
    refused = sum(s.abstained for s in unans)
    written = sum(s.written for s in scored)
    kept = sum(s.kept for s in scored)
    judged = [v for s in scored for v in s.supported if v is not None]
    facts = sum(s.fact for s in ans)
    lat = [s.latency_s for s in scored]
    fell = sum(bool(s.fell_back) for s in scored)
    latency = f"{statistics.median(lat):.0f}" if lat else "–"
    tokens_in = f"{statistics.mean(s.input_tokens for s in scored):.0f}" if scored else "–"
    tokens_out = f"{statistics.mean(s.output_tokens for s in scored):.0f}" if scored else "–"
    cells = [
        name,
        verifier,
        str(len(scored)),
        f"{answered}/{len(ans)} ({pct(answered, len(ans))})",
        f"{refused}/{len(unans)} ({pct(refused, len(unans))})",
        f"{kept}/{written} ({pct(kept, written)})",
        f"{pct(sum(judged), len(judged))} ({len(judged)})",
        f"{facts}/{len(ans)} ({pct(facts, len(ans))})",
        str(fell),
        latency,
        tokens_in,
        tokens_out,
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| set | verifier | n | answered | refused | kept | cit. prec. (pairs) | fact | fell back "
    "| p50 s | in tok | out tok |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)
BEFORE = (
    "| anchored (issue #9, before) | today | 15 | 5/13 (38%) | – | 5/78 (6%) | – | – | – "
    "| – | – | – |"
)


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
    from anchored_query.validation import AskRequest

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


LABELS = DATA / "llm-judge-labels.jsonl"


def judge_agreement(judge: Judge) -> str:
    """How often the judge (with the lexical check) agrees with the hand labels."""
    if not LABELS.exists():
        return "judge: no hand labels yet"
    rows = load_jsonl(LABELS)
    pairs = [Pair(r["sentence"], r["passage"]) for r in rows]
    verdicts = judge.verdicts(pairs)
    agree = tp = fp = fn = tn = 0
    for r, pair in zip(rows, pairs, strict=True):
        said = bool(verdicts.get(pair)) and lexical_ok(pair)
        agree += said == r["supported"]
        tp += said and r["supported"]
        fp += said and not r["supported"]
        fn += not said and r["supported"]
        tn += not said and not r["supported"]
    return (
        f"judge vs {len(rows)} hand-labelled pairs: agreement {pct(agree, len(rows))} "
        f"(yes/yes {tp}, yes/no {fp}, no/yes {fn}, no/no {tn}; judge first, label second)"
    )


def report(name: str, asked: list[Asked], judge: Judge | None) -> list[str]:
    new = [score_new(a) for a in asked]
    old = [score_old(a) for a in asked]
    if judge is not None:
        judge_all(judge, new + old)
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
    parser.add_argument("--no-judge", action="store_true")
    parser.add_argument(
        "--recorded-only",
        action="store_true",
        help="score only the recorded fixtures (their passages and replies), no new asks",
    )
    parser.add_argument("--record-fixtures", action="store_true")
    parser.add_argument("--dump", type=Path, help="write every answer and verdict as JSON")
    parser.add_argument(
        "--export-fixtures", action="store_true", help="also write the replies as test fixtures"
    )
    args = parser.parse_args(argv)
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
        judge = None if args.no_judge else Judge(base_url, offline=args.offline)
        answers_offline = args.offline or args.cached_answers
        fixtures = replay_fixtures()
        for name in dict.fromkeys(a.question["_set"] for a in fixtures):
            group = [a for a in fixtures if a.question["_set"] == name]
            lines += report(f"{name} (recorded)", group, judge)
        if args.recorded_only:
            args.sets = ""
        for qset in question_sets([n for n in args.sets.split(",") if n], args.per_set):
            asked = []
            for a in ask_all(qset, base_url, offline=answers_offline):
                log(f"{qset.name}/{a.qid}: {a.body.get('mode')} {a.latency_s:.0f}s")
                asked.append(a)
                if args.export_fixtures:
                    write_fixture(a, "new")
            lines += report(qset.name, asked, judge)
            dump += [
                {"set": qset.name, "qid": a.qid, "body": a.body, "reply": a.reply} for a in asked
            ]
            print("\n".join(lines), flush=True)
        if judge is not None:
            lines.append("")
            lines.append(judge_agreement(judge))
    print("\n".join(lines))
    if args.dump:
        args.dump.write_text(json.dumps(dump, ensure_ascii=False, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
