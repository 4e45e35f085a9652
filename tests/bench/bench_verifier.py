"""Verification as a classifier over labelled sentences (issue 27).

    python tests/bench/bench_verifier.py [--data tests/bench/data/capable]

Two sets of recorded replies, every sentence labelled by a separate, blind annotator
(``judge-support.md``): the capable model's replies to the development questions of
the four real sites (``cases.jsonl``, ``replies/``, ``labels/labels-[123].jsonl``),
and the local 1.5B model's recorded replies (``tests/fixtures/llm-replies``,
``labels/labels-weak.jsonl``). Each reply goes through the real LLM answer step
(``answer_llm``: parsing, the echo filter, verification, renumbering) with the
passages the model was shown, on the site's real index (``realdocs.py`` builds them).

A sentence is *shown* when the answer holds it (verified, marked as not verified, or
as a note of what the docs do not cover) and *shown as verified* when it holds it
without the mark. Printed per set: supported sentences shown and shown as verified,
unsupported (and partial) sentences shown as verified, questions whose key answer
sentence is not shown, "not covered" hedges shown and the answer's ``coverage``, and
the unanswerable questions counted as refusals. Run it on an older tree (its
``lambda/`` first on ``PYTHONPATH``) for today's figures beside the new ones.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
from collections import Counter
from dataclasses import fields
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import realdocs  # noqa: E402

DATA = HERE / "data" / "capable"
WEAK = HERE.parent / "fixtures" / "llm-replies"
SITE_OF_PREFIX = {"a": "anchored", "anchored": "anchored"}


def modules() -> tuple[Any, Any, Any]:
    try:
        from anchored_query.answer import llm_answer
        from anchored_query.citations.verify import parse_answer
        from anchored_query.question.validation import AskRequest
    except ImportError:  # a tree before the stage packages
        from anchored_query import llm_answer  # type: ignore[no-redef]
        from anchored_query.citations import parse_answer  # type: ignore[no-redef]
        from anchored_query.validation import AskRequest  # type: ignore[no-redef]
    return llm_answer, AskRequest, parse_answer


class Recorded:
    """A client whose reply is the recorded one (what the model answered)."""

    name = "recorded"

    def __init__(self, text: str) -> None:
        self.text = text

    def complete(self, messages: Any, **_: Any) -> Any:
        from anchored_query.llm import Completion

        return Completion(self.text, None, None, "stop")


def engines() -> dict[str, Any]:
    from anchored_query.engine import Engine
    from anchored_query.settings import Settings

    out = {}
    for site in realdocs.SITES:
        root = realdocs.build(site, realdocs.DEFAULT_OUT, stale_ok=True)
        out[site] = Engine(Settings(index=str(root / "index"), refresh_s=3600))
    return out


def passages_of(rows: list[dict[str, Any]]) -> list[Any]:
    from anchored_query.types import Passage

    names = {f.name for f in fields(Passage)}
    return [Passage(**{k: v for k, v in r.items() if k in names}) for r in rows]


def answer(engine: Any, question: str, history: list[Any], passages: list[Any], reply: str) -> Any:
    from anchored_query.llm.calls import Deadline
    from anchored_query.types import Turn

    llm_answer, ask_request, _ = modules()
    request = ask_request(
        question=question, history=tuple(Turn(t["role"], t["content"]) for t in history)
    )
    if hasattr(engine, "answer_with_llm"):
        # The engine's LLM step (what follows the model's reply, the judgement of a pasted
        # reply included) with the passages the model was shown.
        prepared = engine.prepare(request)
        prepared.passages = passages
        return engine.with_llm(Recorded(reply)).answer_with_llm(prepared)
    loaded = engine.current()
    return llm_answer.answer_llm(
        Recorded(reply), engine.settings, request, passages, loaded, Deadline(60)
    )


def load_labels(paths: list[Path]) -> dict[str, dict[int, dict[str, Any]]]:
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out.setdefault(row["key"], {})[int(row["i"])] = row
    return out


def cases(data: Path) -> list[dict[str, Any]]:
    """Every labelled reply: key, site, question, history, answerable, passages, reply."""
    rows = {}
    for site in realdocs.SITES:
        for row in realdocs.load_set(realdocs.DATA / f"{site}.jsonl"):
            rows[row["qid"]] = row
    out = []
    for line in (data / "cases.jsonl").read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        reply = data / "replies" / f"{case['key']}.txt"
        if not reply.exists():
            continue
        row = rows[case["qid"]]
        out.append(
            {
                "set": "capable",
                "key": case["key"],
                "site": case["site"],
                "question": row["question"],
                "history": row.get("history") or [],
                "answerable": row["answerable"],
                "style": row["style"],
                "passages": case["passages"],
                "reply": reply.read_text(encoding="utf-8"),
            }
        )
    weak = [(path, "1.5B", "weak-") for path in sorted(WEAK.glob("*.json"))]
    weak += [(path, "1.5B, dev", "weakdev-") for path in sorted((data / "weak-dev").glob("*.json"))]
    for path, name, prefix_key in weak:
        rec = json.loads(path.read_text(encoding="utf-8"))
        row = rec["question"] if isinstance(rec["question"], dict) else {}
        qid = str(row.get("qid", path.stem))
        prefix = qid.rsplit("-", 1)[0] if "-" in qid else qid.rstrip("0123456789")
        site = SITE_OF_PREFIX.get(prefix, prefix)
        if site not in realdocs.SITES:
            continue
        out.append(
            {
                "set": name,
                "key": f"{prefix_key}{path.stem}",
                "site": site,
                "question": row.get("question", ""),
                "history": row.get("history") or [],
                "answerable": row.get("answerable", True),
                "style": row.get("style", ""),
                "passages": rec["passages"],
                "reply": rec["reply"],
                "finish_reason": rec.get("finish_reason") or "stop",
            }
        )
    return out


def matched(sentences: list[Any], result: dict[str, Any]) -> list[dict[str, Any] | None]:
    """The answer item that shows each parsed sentence (None: not shown); a text the
    reply repeats is matched in order."""
    shown: dict[str, list[dict[str, Any]]] = {}
    for item in result.get("answer", []):
        shown.setdefault(item["text"], []).append(item)
    out: list[dict[str, Any] | None] = []
    for s in sentences:
        same = shown.get(s.text)
        out.append(same.pop(0) if same else None)
    return out


def attributed_cites(case: dict[str, Any], result: dict[str, Any]) -> Any:
    """For a sentence and the item that shows it: the passage numbers (as the model was
    shown them) it is shown as verified with, when they are not its own markers (the
    verifier attributed it, or cut its group); else None. The answer renumbers its
    citations; its ``citations`` name their chunks."""
    by_chunk = {cid: p["n"] for p in case["passages"] for cid in p["chunk_ids"]}
    by_new = {c["n"]: by_chunk.get(c["chunk_id"]) for c in result.get("citations", [])}

    def cites(sentence: Any, item: dict[str, Any] | None) -> list[int] | None:
        if item is None or item.get("note") or not item.get("verified", True):
            return None
        shown = sorted({n for k in item.get("citations", []) if (n := by_new.get(k)) is not None})
        return shown if shown and shown != sorted(set(sentence.citations)) else None

    return cites


def attribution_key(case: dict[str, Any], i: int, cites: list[int]) -> str:
    """The label key of sentence ``i`` of a reply judged against the passages it is shown
    with (``attributions-*.jsonl``): a later verifier that shows it with other passages
    needs a new label, not this one."""
    return f"{case['key']}:{i}:{','.join(map(str, cites))}"


def attribution_items(
    results: list[tuple[dict[str, Any], Any, dict[int, dict[str, Any]]]],
) -> list[dict[str, Any]]:
    """Judge items (``judge-support.md``'s input) for every sentence shown as verified
    with citations other than its own markers: what the verifier attributed it to is
    judged like a citation of the model's."""
    _, _, parse_answer = modules()
    items = []
    for case, result, _ in results:
        passages = {p["n"]: p for p in case["passages"]}
        sentences = parse_answer(case["reply"])
        cites_of = attributed_cites(case, result)
        for i, (s, item) in enumerate(zip(sentences, matched(sentences, result), strict=True)):
            cites = cites_of(s, item)
            if cites is None:
                continue
            items.append(
                {
                    "key": attribution_key(case, i, cites),
                    "question": case["question"],
                    "reply": case["reply"],
                    "sentences": [{"text": s.text, "cites": cites}],
                    "passages": {str(n): passages[n]["text"] for n in cites},
                }
            )
    return items


def score(
    results: list[tuple[dict[str, Any], Any, dict[int, dict[str, Any]]]],
    detail: list[str] | None = None,
    attributed: dict[str, dict[int, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Counts over the labelled sentences. A sentence shown as verified with citations
    other than its own is also scored *as shown* (``*_as_shown``): by the label of the
    passages it is shown with (``attributed``), when the model's own markers differ."""
    _, _, parse_answer = modules()
    attributed = attributed or {}
    c: Counter[str] = Counter()
    for case, result, labels in results:
        sentences = parse_answer(case["reply"])
        cites_of = attributed_cites(case, result)
        key_lost = False
        hedged = False
        unsupported_verified = 0  # (as shown)
        for i, (s, item) in enumerate(zip(sentences, matched(sentences, result), strict=True)):
            label = labels.get(i)
            if label is None:
                continue
            is_shown = item is not None
            verified = is_shown and item.get("verified", True) and not item.get("note")
            kind = label["label"]
            if detail is not None:
                status = "verified" if verified else ("unverified" if is_shown else "removed")
                if item is not None and item.get("note"):
                    status = "note"
                decisions = (result.get("verification") or {}).get("decisions", [])
                check = next((d["check"] for d in decisions if d["index"] == i + 1), "")
                detail.append(
                    f"{case['key']}\t{i}\t{kind}\t{status}\t{check}\t"
                    f"{grounding(case, s)}\t{s.text[:70]!r}"
                )
            c[f"{kind}"] += 1
            c[f"{kind}_shown"] += is_shown
            c[f"{kind}_verified"] += bool(verified)
            as_shown = kind
            cites = cites_of(s, item)
            if cites is not None:
                c["attributed"] += 1
                judged = attributed.get(attribution_key(case, i, cites), {}).get(0)
                as_shown = judged["label"] if judged else "unlabelled"
            c[f"{as_shown}_verified_as_shown"] += bool(verified)
            unsupported_verified += as_shown == "unsupported" and bool(verified)
            if label.get("key_answer") and kind in ("supported", "partial") and not is_shown:
                key_lost = True
            if kind == "meta":
                hedged = True
        c["questions"] += 1
        c["key_lost"] += key_lost
        coverage = result.get("coverage", "none" if result.get("abstained") else "full")
        if hedged:
            c["hedged_questions"] += 1
            c["hedged_coverage_set"] += coverage in ("partial", "none")
        if not case["answerable"]:
            c["unanswerable"] += 1
            c["unanswerable_refused"] += coverage == "none" or bool(result.get("abstained"))
        else:
            c["answerable"] += 1
            c["answerable_refused"] += coverage == "none" or bool(result.get("abstained"))
        # The answers a reader must not take for verified ones: a reply that mostly
        # pastes passages to a question the docs do not answer, and a reply in another
        # language than its pages that makes a claim no passage makes.
        answered = coverage != "none" and not result.get("abstained")
        pasted, counted = copies(sentences, case["passages"])
        if counted and 2 * pasted >= counted:
            c["pasted"] += 1
            if not case["answerable"]:
                c["pasted_unanswerable"] += 1
                c["pasted_unanswerable_answered"] += answered
        if other_language(case) and any(
            labels.get(i, {}).get("label") == "unsupported" for i in range(len(sentences))
        ):
            c["foreign_claims"] += 1
            c["foreign_claims_verified"] += unsupported_verified > 0
    return dict(c)


def copies(sentences: list[Any], passages: list[dict[str, Any]]) -> tuple[int, int]:
    """(sentences copied from a passage, sentences counted) of a reply: the measure of
    this repository's ``pasted.py`` (the same on an older tree, which may lack it)."""
    counts: tuple[int, int] = this_trees_pasted().pasted_share(
        (s.text for s in sentences), passages_of(passages)
    )
    return counts


@functools.cache
def this_trees_pasted() -> Any:
    """``citations/pasted.py`` of this repository, read from its file."""
    path = HERE.parents[1] / "lambda" / "anchored_query" / "citations" / "pasted.py"
    spec = importlib.util.spec_from_file_location("bench_pasted", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def other_language(case: dict[str, Any]) -> bool:
    """A Chinese question on English pages: the reply is in another language than its
    passages."""
    from anchored_query.citations.sentences import is_cjk

    text = " ".join(p["text"] for p in case["passages"][:3])
    return any(map(is_cjk, case["question"])) and not any(map(is_cjk, text))


def grounding(case: dict[str, Any], sentence: Any) -> str:
    """Lexical support of a sentence by its cited passages and by the best passage shown
    (for reading the detail; the new tree's checks)."""
    try:
        from anchored_query.citations.checking import Checker, Item
    except ImportError:
        return ""
    passages = {p.n: p for p in passages_of(case["passages"])}
    checker = Checker(passages, None)
    item = Item.of(0, sentence, checker.usable, paragraph=0, footer=(), no_coverage=False)
    own = [n for n in item.own if n in passages]
    cited = checker.lexical(item, own) if own else None
    best = max((checker.lexical(item, [n]) or 0.0 for n in checker.usable), default=0.0)
    return f"{cited if cited is None else round(cited, 2)}/{best:.2f}"


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}% ({a}/{b})" if b else "–"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--detail", default="", help="write each sentence's label and fate here")
    p.add_argument(
        "--attributions",
        default="",
        help="write the judge input of the sentences shown with citations of the verifier's",
    )
    args = p.parse_args()
    detail: list[str] = []
    data = Path(args.data)
    labels = load_labels(sorted((data / "labels").glob("labels-*.jsonl")))
    attributed = load_labels(sorted((data / "labels").glob("attributions-*.jsonl")))
    built = engines()
    by_set: dict[str, list[Any]] = {}
    cut: Counter[str] = Counter()
    for case in cases(data):
        if case["key"] not in labels:
            continue
        if case.get("finish_reason") == "length":
            # The product never verifies a reply the model did not finish: the quoted
            # answer replaces it (llm_answer.complete_answer). Not a verifier case.
            cut[case["set"]] += 1
            continue
        result = answer(
            built[case["site"]],
            case["question"],
            case["history"],
            passages_of(case["passages"]),
            case["reply"],
        )
        by_set.setdefault(case["set"], []).append((case, result, labels[case["key"]]))
    print(
        "\n| set | supported shown | supported shown as verified | unsupported shown as "
        "verified | partial shown as verified | key answer lost | hedges shown "
        "| hedged answers' coverage set | unanswerable refused | answerable refused |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    shown_as: dict[str, dict[str, Any]] = {}
    for name, results in by_set.items():
        s = shown_as[name] = score(results, detail, attributed)
        print(
            f"| {name} | {pct(s.get('supported_shown', 0), s.get('supported', 0))} "
            f"| {pct(s.get('supported_verified', 0), s.get('supported', 0))} "
            f"| {pct(s.get('unsupported_verified', 0), s.get('unsupported', 0))} "
            f"| {pct(s.get('partial_verified', 0), s.get('partial', 0))} "
            f"| {pct(s.get('key_lost', 0), s.get('questions', 0))} "
            f"| {pct(s.get('meta_shown', 0), s.get('meta', 0))} "
            f"| {pct(s.get('hedged_coverage_set', 0), s.get('hedged_questions', 0))} "
            f"| {pct(s.get('unanswerable_refused', 0), s.get('unanswerable', 0))} "
            f"| {pct(s.get('answerable_refused', 0), s.get('answerable', 0))} |"
        )
    for name, n in cut.items():
        print(f"\n{name}: {n} replies cut at the output limit, answered by the quote instead")
    print(
        "\nShown as verified, judged against the passages shown: a sentence the verifier"
        " attributed (its own markers differ) counts by the label of what it is shown with"
        " (`labels/attributions-*.jsonl`).\n"
    )
    print("| set | shown as verified | attributed | of which unlabelled | unsupported | partial |")
    print("|---|---|---|---|---|---|")
    for name, s in shown_as.items():
        total = sum(v for k, v in s.items() if k.endswith("_verified_as_shown"))
        print(
            f"| {name} | {total} | {s.get('attributed', 0)} "
            f"| {s.get('unlabelled_verified_as_shown', 0)} "
            f"| {pct(s.get('unsupported_verified_as_shown', 0), total)} "
            f"| {pct(s.get('partial_verified_as_shown', 0), total)} |"
        )
    print(
        "\nAnswers not to be taken for verified ones: replies that paste passages (half of"
        " their sentences or more copied word for word) to a question the docs do not"
        " answer, and replies in another language than their pages with a claim no passage"
        " makes (a sentence labelled unsupported).\n"
    )
    print(
        "| set | replies pasted | of them to unanswerable questions | shown as an answer "
        "| other-language replies with an unsupported claim | that claim shown as verified |"
    )
    print("|---|---|---|---|---|---|")
    for name, s in shown_as.items():
        print(
            f"| {name} | {s.get('pasted', 0)} | {s.get('pasted_unanswerable', 0)} "
            f"| {s.get('pasted_unanswerable_answered', 0)} | {s.get('foreign_claims', 0)} "
            f"| {s.get('foreign_claims_verified', 0)} |"
        )
    if args.attributions:
        items = [i for results in by_set.values() for i in attribution_items(results)]
        Path(args.attributions).write_text(
            json.dumps(items, ensure_ascii=False, indent=1), encoding="utf-8"
        )
        print(f"\n{len(items)} attributed sentences → {args.attributions}")
    if args.detail:
        Path(args.detail).write_text("\n".join(detail) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
