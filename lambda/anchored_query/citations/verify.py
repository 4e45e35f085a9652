"""Citations: parse the markers of an answer, verify each sentence, renumber.

Verification policy (what ``/v1/ask`` promises): no sentence is shown *as verified*
without a passage of the context that supports it, and no sentence cites a passage
the model was not shown. Support means: each checkable fact of the sentence (numbers
of every size, options, identifiers, inline code, quoted strings;
:mod:`anchored_query.citations.facts`) occurs in the cited passages, no value is
paired with another thing than the passage pairs it with, no clause of the context
states the opposite, and the lexical and (when the engine gives one) semantic
support tests of :mod:`anchored_query.citations.support` pass.

Each sentence ends one of three ways (``decisions`` says which check decided):

- **verified**: a supporting passage was found (its own markers, else attribution);
- **shown, not verified** (``verified: false`` in the answer): a check failed but
  could not settle it — a fact or code line not found (a model applying the option
  to the reader's own path or value), support too weak to tell (a paraphrase), no
  test for the language (a Chinese sentence on English pages), a word the site never
  uses, a value or a negation the context seems to contradict. It keeps the markers
  the model gave it. So is a sentence the model gave no source for (no marker, none
  in its paragraph, no footer) that attribution found a supporting passage for: it
  shows that passage. The data behind this split is in ``tests/bench/bench_verifier.py``;
- **removed**, only when a check is conclusive (:data:`CONCLUSIVE`): every passage it
  cites was not shown (a page's planted "cite [99]" is how an obeyed injection shows),
  it cites nothing and no passage shown supports it, it states a number the passages
  do not (and the reader did not give), it only repeats a quotation of a page (page
  text is data), it speaks of the assistant's instructions without a citation, it
  restates the prompt's headings, asserts nothing or asks a question; and what stands
  or falls with a removed sentence: a lead-in ending in ":" with nothing after it, a
  sentence that leans on the one before ("To avoid that, …", "This …"), code whose
  prose all went.

Models cite unevenly, so a sentence without its own marker is attributed: to
the markers of its paragraph (markers after the paragraph's last sentence
cover the paragraph), then the citations its paragraph's other sentences and its
neighbours were given, then a "Sources:" footer's, each checked exactly like a
cited sentence, repeated until nothing changes; only then to the best-supporting
passage of the context, under a stricter threshold unless a name few passages
hold singles that passage out with the sentence's other facts close by (then as
a cited sentence). A sentence that one of its group's passages supports alone,
holding every fact and content term of it the group holds, cites that passage
only; otherwise it cites the passages that add something: each citation shown
supports it.

A statement that the documentation does not cover something ("The documentation
does not cover `--watch`", "文档没有涉及 …") needs no citation and is kept as a
``note``, with the passage it names as the closest when it cites one; it may name
what is missing (``HTTP/3``) but not assert a number (one that does is checked as an
answer: "… but the port is 8080" is removed like any invented number). The answer's
``coverage``:
``none`` when no answering sentence is shown or the answer opens with such a note
(the prompt's form: "The documentation does not cover X. The closest it comes is Y
[n]."), ``partial`` when a note follows an answer, else ``full``. ``none`` is an
abstention.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

from anchored_query.citations.checking import Checker, Item, attribute_all
from anchored_query.citations.facts import Claim
from anchored_query.citations.failures import Failure
from anchored_query.citations.links import citation_link
from anchored_query.citations.markers import canonical_markers, marker_numbers, take_footers
from anchored_query.citations.sentences import CITATION_MARKER, outside_code, sentence_spans
from anchored_query.citations.support import Support
from anchored_query.llm.base import UnclosedReasoning, strip_reasoning
from anchored_query.types import AnswerSentence, Passage

__all__ = [
    "CONCLUSIVE",
    "PREVIEW_CHARS",
    "AnswerItem",
    "CitationItem",
    "Coverage",
    "Decision",
    "ParsedSentence",
    "VerifiedAnswer",
    "parse_answer",
    "renumber",
    "verify",
]

Coverage = Literal["full", "partial", "none"]

# The checks whose failure removes a sentence: what it cites was not shown, it cites
# nothing and no passage shown supports it, it is no claim, or it states a number the
# passages do not (and the reader did not give). Any other failure (a fact or code line
# not found, support too weak to tell, another language, a word the site never uses,
# a value or a negation the context seems to contradict) is inconclusive: the sentence
# is shown, marked as not verified. Decided on the labelled replies of
# tests/bench/bench_verifier.py: the polarity and value-pairing tests removed 9
# supported sentences of the capable model's and 1 unsupported one of the 1.5B's;
# "no passage supports an uncited sentence" removed none of the capable model's and 30
# unsupported of the 1.5B's (site/benchmarks.md).
CONCLUSIVE = frozenset(
    {
        "unknown_citation",
        "no_passage_supports",
        "instructions",
        "restates_headings",
        "asserts_nothing",
        "question",
        "quotes_a_quotation",
        "lead_in",
        "depends_on_removed",
        "code_without_prose",
        "number_not_found",
    }
)
PREVIEW_CHARS = 600

_FORMATTING_LINE = re.compile(r"^(?:#{1,6}\s.*|[-*_]{3,}|[-*+]|\d+[.)])$")
_CONTENT = re.compile(r"[^\W_]", re.UNICODE)
# A marker, or markers in brackets with an attribution word: "(see [2])", "(Source: [1], [3])".
_MARKER_GROUP = re.compile(
    r"[(（]\s*(?:(?:see|sources?|passages?|refs?|cf\.?|来源|参见)\s*[:：]?\s*)?"
    r"(?:(?:" + CITATION_MARKER.pattern + r")[\s,;，、]*)+[)）]"
    r"|" + CITATION_MARKER.pattern,
    re.IGNORECASE,
)
_BLANK_OR_HEADING = re.compile(r"^\s*$|^\s{0,3}#{1,6}\s")
# Fragments that carry no claim: "For example, [3]", "See [2].", "For more details:".
_FILLER = re.compile(
    r"^\W*(?:for\s+(?:example|instance|more\s+(?:details|information))|e\.g\.?|example|"
    r"see(?:\s+(?:also|below|above|here))?|as\s+(?:shown|described|explained)(?:\s+\w+)?|"
    r"here|note|sources?|references?|例如|比如|参见)\W*$",
    re.IGNORECASE,
)

# A sentence that only introduces what comes next: "add the following lines:", "例如："
_LEAD_IN = re.compile(r"[:：]\s*$")
# A sentence that asks: "How do I turn off SSL verification in httpx?", "如何关闭…？"
_QUESTION = re.compile(r"[?？]\s*$")
# A sentence that leans on the one before it: "To avoid that, …", "This means …",
# "Also, …", "In that case …", "它 …"; it goes when that one is removed.
_DEPENDS = re.compile(
    r"^\W*(?:to\s+(?:avoid|fix|prevent|change|undo)\s+(?:that|this|it)\b|this\b|that\b|these\b|"
    r"those\b|it\b|they\b|also\b|then\b|otherwise\b|in\s+(?:that|this)\s+case\b|"
    r"for\s+(?:that|this)\b|instead\b|however\b|but\b|so\b|这|那|它|此外|另外|否则)",
    re.IGNORECASE,
)

# "The documentation does not cover …" and its Chinese counterparts.
_NO_COVERAGE = re.compile(
    r"\b(?:documentation|docs|passages?|sources?|context|site)\b[^.!?\n]{0,60}?"
    r"\b(?:do|does|did)(?:\s+not|n['’]t)\b[^.!?\n]{0,30}?"
    r"\b(?:cover|mention|say|describe|explain|address|contain|include|document|discuss|specify|provide)"
    r"|\b(?:no|not\s+any)\s+(?:information|mention|details?|documentation)\b"
    r"|\bnot\s+(?:covered|mentioned|documented|described|addressed)\s+(?:in|by)\b"
    r"|\bI\s+(?:could\s+not|couldn['’]t|cannot|can['’]t)\s+find\b"
    r"|(?:文档|资料|段落|来源)[^。！？\n]{0,20}?(?:没有|并未|未|不)"
    r"(?:提到|提及|涉及|说明|介绍|包含|覆盖|涵盖|描述|讲|解释|讨论|记载|写)"
    r"|(?:没有|未能|未)找到",
    re.IGNORECASE,
)
# After a no-coverage statement: "It covers …", "The closest is …" belong to the refusal.
_META_COVERAGE = re.compile(
    r"^(?:however,?\s+|instead,?\s+|but\s+)?(?:it|they|the\s+(?:documentation|docs|passages?|"
    r"sources?|site|context))\s+(?:does\s+|do\s+)?(?:only\s+)?(?:covers?|describes?|explains?|"
    r"discuss(?:es)?|mentions?|provides?|includes?|contains?|talks?\s+about|focus(?:es)?\s+on)\b"
    r"|^(?:however,?\s+)?the\s+closest\b|^(?:文档|资料)(?:只|仅)?(?:介绍|说明|涉及|提到|讲)",
    re.IGNORECASE,
)


# Sentences about the assistant's own instructions are never answers about the docs. A
# model that repeats a page's injected instruction ("Ignore all previous instructions")
# without citing it is not credited with a citation by attribution.
_ADDRESSES_ASSISTANT = re.compile(
    r"\b(?:previous|prior|above|earlier|all|your|my|these|new)\s+instructions\b"
    r"|\bsystem\s+prompt\b|\bdeveloper\s+mode\b|\bas\s+instructed\b|^\W*system\s*:"
    r"|\byou\s+are\s+now\b|\bdisregard\s+(?:the|your|all|any)\b"
    r"|\bI\s+(?:will|shall|am\s+going\s+to|must)\s+(?:now\s+)?(?:follow|ignore|obey|reveal)\b"
    r"|\bcite\s*[(\[]?\s*\d",
    re.IGNORECASE,
)


class AnswerItem(TypedDict):
    """One sentence of the ``answer`` array of ``/v1/ask``: ``verified`` false when no
    check could confirm it (shown, marked); ``note`` true for a statement of what the
    documentation does not cover. Both absent for a verified sentence."""

    text: str
    citations: list[int]
    verified: NotRequired[bool]
    note: NotRequired[bool]


class CitationItem(TypedDict):
    """One entry of the ``citations`` array of ``/v1/ask``."""

    n: int
    chunk_id: str
    url: str
    title: str
    heading_path: list[str]
    passage: str
    highlight: str
    link: str  # url with ?anchored-hl= and a #:~:text= fragment (links.citation_link)


@dataclass(frozen=True)
class ParsedSentence(AnswerSentence):
    """A sentence as :func:`parse_answer` found it: ``citations`` are its own markers
    (a fenced code block shares its lead-in's), ``paragraph`` numbers its paragraph
    and ``footer`` holds the numbers of the "Sources:" footer that covers it."""

    paragraph: int = 0
    footer: tuple[int, ...] = ()


@dataclass(frozen=True)
class Decision:
    """What verification did to one sentence it did not show as verified: ``index``
    (1-based, in the reply), its ``text``, the ``check`` that decided (a
    :class:`~.failures.Failure`'s), the ``detail`` and the ``action``: ``removed`` or
    ``unverified``."""

    index: int
    text: str
    check: str
    detail: str
    action: Literal["removed", "unverified"]


@dataclass(frozen=True)
class VerifiedAnswer:
    """The sentences that survived verification.

    ``sentences`` cite only context passages (context numbering). ``removed``
    counts the sentences dropped, ``reasons`` says why (one line each, for the
    logs), ``invalid_citations`` lists cited numbers that were not in the
    context, ``attributed`` counts kept sentences whose citation came from
    attribution rather than their own marker. ``abstained`` is true when no
    supported sentence remains (see the module docstring).
    """

    sentences: list[AnswerSentence]
    removed: int
    reasons: list[str] = field(default_factory=list)
    abstained: bool = False
    invalid_citations: list[int] = field(default_factory=list)
    attributed: int = 0
    unverified: int = 0  # sentences shown, marked as not verified
    coverage: Coverage = "full"
    decisions: list[Decision] = field(default_factory=list)


def parse_answer(text: str, *, known: Collection[int] | None = None) -> list[AnswerSentence]:
    """Split an LLM answer into sentences with the passage numbers each cites.

    Reasoning blocks are removed first (``<think>``… anywhere; an unclosed one
    leaves only what precedes it — the engine treats that reply as truncated).
    Bracket markers (``[1]``, ``[1, 2]``, ``[1-3]``, ``[^1]``, ``[Source: 1]``,
    ``[1 and 2]``, ``[1: Configuration]``, ``【1】`` …) are taken from anywhere in
    a sentence outside code and removed from its text; parenthesised ones
    (``(1)``, ``(1, 2)``, ``（1）``, ``(Source: 1)``) where a citation is
    plausible (:func:`anchored_query.citations.markers.canonical_markers`; with ``known``,
    only context numbers). "Sources:" footers become the ``footer`` of the
    sentences before them. A fragment that is only markers, or markers with
    filler ("For example, [3]"), belongs to the sentence before it; a fenced code
    block without markers shares the citations of the sentence that introduces
    it. Markdown headings and rules are dropped; list items and line breaks
    separate sentences. Citations keep their order of appearance.
    """
    text = _without_reasoning(text)
    text, footers = take_footers(text)
    text = canonical_markers(text, known)
    paragraph_of_line = _paragraphs(text)
    spans = sentence_spans(text)
    out: list[ParsedSentence] = []
    pending: list[int] = []
    for k, span in enumerate(spans):
        raw = span.text
        line = text.count("\n", 0, span.start)
        paragraph = paragraph_of_line[min(line, len(paragraph_of_line) - 1)]
        footer = next((tuple(f.numbers) for f in footers if f.line > line), ())
        if raw.startswith(("```", "~~~")):
            inherited = out[-1].citations if out else []
            out.append(ParsedSentence(raw, list(inherited), paragraph=paragraph, footer=footer))
            continue
        body, ids = _take_markers(raw)
        next_is_code = k + 1 < len(spans) and spans[k + 1].text.startswith(("```", "~~~"))
        filler = ids and not next_is_code and _FILLER.match(body) is not None
        if not _CONTENT.search(body) or (filler and out):
            if out:
                last = out[-1]
                out[-1] = ParsedSentence(
                    last.text,
                    _merge(last.citations, ids),
                    paragraph=last.paragraph,
                    footer=last.footer,
                )
            else:
                pending = _merge(pending, ids)
            continue
        if _FORMATTING_LINE.match(body) and not ids:
            continue
        out.append(ParsedSentence(body, _merge(pending, ids), paragraph=paragraph, footer=footer))
        pending = []
    return list(out)


def verify(
    sentences: Sequence[AnswerSentence],
    passages: Mapping[int, Passage],
    *,
    support: Support | None = None,
    foreign: Callable[[str], list[str]] | None = None,
    checker: Checker | None = None,
) -> VerifiedAnswer:
    """Keep the sentences the context supports, each with the passages that support it.

    ``passages`` maps context numbers to passages; passages marked ``excluded``
    count as absent. Cited numbers outside the context are dropped; a sentence
    citing only such numbers is removed. A sentence with its own valid markers
    is checked against them; one without is attributed (module docstring). The
    check: every fact of :func:`anchored_query.citations.facts.claims` in the passages, no
    :func:`~anchored_query.citations.support.pairing_conflicts`, lexical support of at
    least :data:`~anchored_query.citations.support.LEXICAL_FLOOR`, and a support score of
    at least :data:`~anchored_query.citations.support.SUPPORT_MIN` (plus ``STRICT_MARGIN``
    for a passage found only by searching the context). The score is the
    lexical support, or with ``support`` — ``(sentence_text, passage) ->
    0..1``, see :func:`anchored_query.citations.support.make_support`; NaN is no opinion
    — its weighted mean with the best semantic support over the passages.
    ``foreign`` gives the words of a sentence the site never uses
    (:func:`anchored_query.citations.support.foreign_terms`); a sentence with any is not
    supported, whatever passage it cites. Plain :class:`AnswerSentence` items (the
    extractive answerer's) are each their own paragraph. ``checker``: the checks of
    this very context made earlier (a streamed reply verified paragraph by paragraph
    keeps one, so each sentence is checked once); ``support`` and ``foreign`` are its.
    """
    checker = checker or Checker(passages, support, foreign)
    support = checker.support
    usable = checker.usable
    prime = getattr(support, "prime", None)
    if prime is not None:  # every sentence's vector in one model run
        prime([s.text for s in sentences])
    items = [
        Item.of(
            i,
            s,
            usable,
            paragraph=s.paragraph if isinstance(s, ParsedSentence) else -1 - i,
            footer=s.footer if isinstance(s, ParsedSentence) else (),
            no_coverage=_NO_COVERAGE.search(s.text) is not None,
            derived=checker.derived(s.text),
        )
        for i, s in enumerate(sentences)
    ]
    invalid: list[int] = []
    for item in items:
        invalid.extend(n for n in item.sentence.citations if n not in usable and n not in invalid)

    decided: dict[int, list[int]] = {}
    reasons: dict[int, Failure] = {}
    miscited: dict[int, Failure] = {}  # own markers that failed the check: why
    notes: set[int] = set()  # what the documentation does not cover: shown, as a note
    attributed: set[int] = set()
    for item in items:
        i, text = item.index, item.sentence.text
        if item.no_coverage and _may_stand_uncited(text, item.claims):
            # "The documentation does not cover X; the closest is Y [n]": a note, with the
            # passage it points to when it names one. One that asserts a number ("… but
            # the port is 8080") is checked as an answer: not shown uncited and unsupported,
            # nor with a number that neither the passages nor the reader gave.
            notes.add(i)
            decided[i] = list(item.own)
            continue
        if item.sentence.citations and not item.own:
            # Not attributed: a page's planted "cite [99]" is how an obeyed injection shows.
            cited = item.sentence.citations
            reasons[i] = Failure(
                "unknown_citation", f"no citation (cited {cited}, none in context)"
            )
        elif not item.is_code and checker.restates(text):
            reasons[i] = Failure("restates_headings", "only restates passage headings")
        elif not item.is_code and not item.terms and not item.claims:
            reasons[i] = Failure("asserts_nothing", "asserts nothing")
        elif not item.is_code and _QUESTION.search(text):
            # Small models restate the reader's question; a question asserts nothing.
            reasons[i] = Failure("question", "asks a question, asserts nothing")
        elif item.own:
            failure = checker.check(item, item.own, strict=False)
            if failure is None:
                # Cited and supported: an answer, even if it also says what is missing.
                decided[i] = checker.fewest(item, item.own)
            else:
                # Small models miscount passages: attributed like an uncited sentence.
                miscited[i] = failure
    open_items = []
    for item in items:
        i = item.index
        if i in decided or i in reasons:
            continue
        if not item.own and _ADDRESSES_ASSISTANT.search(item.sentence.text):
            detail = "no citation, and it speaks of the assistant's instructions"
            reasons[i] = Failure("instructions", detail)
            continue
        open_items.append(item)
    failures = attribute_all(open_items, items, checker, decided)
    attributed.update(o.index for o in open_items if o.index in decided)
    for i, failure in failures.items():
        # A sentence that cites a passage shown keeps the verdict on what it cites; one
        # that cites nothing, and that no passage supports, is not grounded (conclusive).
        reasons[i] = miscited.get(i) or Failure(
            "no_passage_supports", f"no citation and no passage supports it ({failure})"
        )

    # Only a conclusive check removes a sentence; one no check could confirm is shown,
    # marked as not verified, with the passages it cites itself.
    unverified: dict[int, list[int]] = {}
    unverified_why: dict[int, Failure] = {}
    # A sentence the model gave no source for (no marker of its own, none in its
    # paragraph, no footer) is shown with the passage that supports it, marked: the
    # model never said where it came from (the labelled replies count such sentences as
    # unsupported; tests/bench/bench_verifier.py).
    cited_paragraphs = {o.paragraph for o in items if o.sentence.citations}
    for i in sorted(attributed):
        item = items[i]
        sourced = item.sentence.citations or item.footer or item.paragraph in cited_paragraphs
        if not sourced and i in decided and i not in notes:
            unverified[i] = decided.pop(i)
            unverified_why[i] = Failure("uncited", f"cited nothing; attributed to {unverified[i]}")
    attributed.difference_update(unverified)
    for i, reason in list(reasons.items()):
        if reason.check not in CONCLUSIVE:
            unverified[i] = list(items[i].own)
            unverified_why[i] = reason
            del reasons[i]

    def shown(i: int) -> bool:
        return i in decided or i in unverified

    # A lead-in ("add the following lines:") stands or falls with what it introduces.
    for item in items:
        i = item.index
        lead_in = not item.is_code and _LEAD_IN.search(item.sentence.text) is not None
        if shown(i) and lead_in and not shown(i + 1):
            decided.pop(i, None)
            unverified.pop(i, None)
            attributed.discard(i)
            reasons[i] = Failure("lead_in", "introduces what follows, and nothing shown follows")
    # A sentence that leans on the one before it ("To avoid that, …", "This …") goes
    # with it: a caveat without its fix misleads.
    for item in items:
        i = item.index
        if i - 1 in reasons and shown(i) and i not in notes and _DEPENDS.search(item.sentence.text):
            decided.pop(i, None)
            unverified.pop(i, None)
            attributed.discard(i)
            detail = "depends on the sentence before it, which was removed"
            reasons[i] = Failure("depends_on_removed", detail)

    first_note = min(notes, default=None)
    substantive = [
        i
        for i in sorted({*decided, *unverified})
        if i not in notes
        and not (
            first_note is not None
            and i > first_note
            and _META_COVERAGE.search(items[i].sentence.text)
        )
    ]
    # Code and config lines are the passages' own text; what they are for is said in
    # prose. With every sentence the model wrote about them removed, the answer says
    # nothing checked (a reply that is only code is left alone).
    prose = [o.index for o in items if not (o.is_code or o.code or o.no_coverage)]
    if substantive and prose and all(items[i].is_code or items[i].code for i in substantive):
        for i in substantive:
            decided.pop(i, None)
            unverified.pop(i, None)
            detail = "code without a sentence that says what it is for"
            reasons[i] = Failure("code_without_prose", detail)
        substantive = []
    verified_answer = [i for i in substantive if i in decided]
    abstained = not verified_answer and not any(i in unverified for i in substantive)
    kept = [
        AnswerSentence(
            items[i].sentence.text,
            decided[i] if i in decided else unverified[i],
            i not in unverified,
            "note" if i in notes else "answer",
        )
        for i in sorted({*decided, *unverified})
    ]
    decisions = [
        Decision(i + 1, items[i].sentence.text, r.check, r.detail, "removed")
        for i, r in sorted(reasons.items())
    ]
    decisions += [
        Decision(i + 1, items[i].sentence.text, r.check, r.detail, "unverified")
        for i, r in sorted(unverified_why.items())
        if i in unverified
    ]
    # An answer that opens with what the docs do not cover, then says what comes
    # closest (the form the prompt asks for), covers nothing asked; a note after an
    # answer says what part it misses.
    opens_with_note = bool(kept) and kept[0].kind == "note"
    if opens_with_note:
        abstained = True
    coverage: Coverage = "none" if abstained else ("partial" if notes else "full")
    return VerifiedAnswer(
        sentences=kept,
        removed=len(reasons),
        reasons=[
            f"sentence {d.index}: {d.action}: {d.check}: {d.detail}: {_short(d.text)}"
            for d in sorted(decisions, key=lambda d: d.index)
        ],
        abstained=abstained,
        invalid_citations=invalid,
        attributed=len(attributed & set(decided)),
        unverified=len(unverified),
        coverage=coverage,
        decisions=decisions,
    )


def renumber(
    verified: VerifiedAnswer, passages: Mapping[int, Passage]
) -> tuple[list[AnswerItem], list[CitationItem]]:
    """The ``answer`` and ``citations`` arrays of ``/v1/ask``.

    Context numbers become 1..n in order of first appearance in the answer; one
    citation per distinct passage, with ``url`` (``page#anchor``), the text to
    show in the preview (``passage``: the highlight, cut near
    :data:`PREVIEW_CHARS`) and the exact text for the page to highlight.
    """
    numbers: dict[int, int] = {}
    for sentence in verified.sentences:
        for n in sentence.citations:
            if n in passages and n not in numbers:
                numbers[n] = len(numbers) + 1
    answer: list[AnswerItem] = []
    for s in verified.sentences:
        item: AnswerItem = {
            "text": s.text,
            "citations": sorted({numbers[n] for n in s.citations if n in numbers}),
        }
        if s.kind == "note":
            item["note"] = True
        elif not s.supported:
            item["verified"] = False
        answer.append(item)
    citations: list[CitationItem] = []
    for old, new in numbers.items():
        p = passages[old]
        highlight = p.highlight.strip() or p.text.strip()
        citations.append(
            {
                "n": new,
                "chunk_id": p.chunk_ids[0] if p.chunk_ids else p.section_id,
                "url": p.url,
                "title": p.title,
                "heading_path": list(p.heading_path),
                "passage": _preview(highlight),
                "highlight": highlight,
                "link": citation_link(p.url, highlight),
            }
        )
    return answer, citations


def _without_reasoning(text: str) -> str:
    try:
        return strip_reasoning(text)
    except UnclosedReasoning:
        # Nothing after an unclosed opening is answer; the engine reports the reply as truncated.
        cut = re.search(r"<(?:think|thinking|reasoning)>|<\|channel\|>", text, re.IGNORECASE)
        return strip_reasoning(text[: cut.start()]) if cut else ""


def _paragraphs(text: str) -> list[int]:
    """The paragraph number of each line: blank lines and headings outside code separate."""
    fenced: set[int] = set()
    lines = text.split("\n")
    inside = False
    for i, line in enumerate(lines):
        if re.match(r"^[ \t]*(?:`{3,}|~{3,})", line):
            fenced.add(i)
            inside = not inside
        elif inside:
            fenced.add(i)
    out: list[int] = []
    paragraph = 0
    previous_break = True
    for i, line in enumerate(lines):
        is_break = i not in fenced and _BLANK_OR_HEADING.match(line) is not None
        if is_break and not previous_break:
            paragraph += 1
        previous_break = is_break and not line.lstrip().startswith("#")
        out.append(paragraph)
    return out


def _take_markers(text: str) -> tuple[str, list[int]]:
    """``text`` without its citation markers (outside code), and their numbers.

    Removal repeats until none is left: taking ``[29]`` out of ``[6[29]]`` must
    not leave a ``[6]`` in the text that looks like a citation but is none.
    """
    body, ids = _take_markers_once(text)
    while body != text and CITATION_MARKER.search(outside_code(body)):
        text = body
        body, more = _take_markers_once(text)
        ids = _merge(ids, more)
    return body, ids


def _take_markers_once(text: str) -> tuple[str, list[int]]:
    masked = outside_code(text)
    ids: list[int] = []
    pieces: list[str] = []
    last = 0
    for m in _MARKER_GROUP.finditer(masked):
        for marker in CITATION_MARKER.findall(m.group(0)):
            ids = _merge(ids, marker_numbers(marker))
        start = m.start()
        while start > last and text[start - 1] in " \t":
            start -= 1
        pieces.append(text[last:start])
        last = m.end()
    pieces.append(text[last:])
    return "".join(pieces).strip(), ids


def _merge(first: list[int], second: list[int]) -> list[int]:
    return list(dict.fromkeys([*first, *second]))


def _may_stand_uncited(text: str, claims: list[Claim]) -> bool:
    """A no-coverage statement may name what is missing (``HTTP/3``, ``PKCS#12``: a
    number that is part of a name) but not assert numbers ("… but the default is 30")."""
    prose = outside_code(text)
    return len(text) <= 200 and all(
        c.kind != "number" or not _BARE_NUMBER.search(_number_context(prose, c.value))
        for c in claims
    )


# A number standing alone ("30 seconds", "port 8000"), not glued to a name ("HTTP/3").
_BARE_NUMBER = re.compile(r"(?:^|[\s(（,，:：])\d[\d.,]*(?=$|[\s)）,，.。;；:：%])")


def _number_context(text: str, value: str) -> str:
    """``value`` with the characters around it in ``text`` (the whole text when absent)."""
    at = text.find(value)
    if at < 0:
        return text
    return text[max(0, at - 1) : at + len(value) + 1]


def _preview(text: str) -> str:
    if len(text) <= PREVIEW_CHARS:
        return text
    cut = text[:PREVIEW_CHARS]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > PREVIEW_CHARS * 0.8:
        cut = cut[:space]
    return cut.rstrip(" \n,;:") + "…"


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
