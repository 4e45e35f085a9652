"""Checking one answer's sentences against its context: the pieces of ``verify``.

:class:`Item` holds what the checks need of a sentence, :class:`Checker` runs the
fact, pairing and support tests of :mod:`anchored_query.citations.facts` and
:mod:`anchored_query.citations.support` for a group of passages, and :func:`attribute`
finds the passage that supports a sentence without its own marker. The policy
is described in :mod:`anchored_query.citations.verify`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from anchored_query.citations.facts import Claim, Haystack, claims
from anchored_query.citations.failures import Failure
from anchored_query.citations.polarity import (
    POLARITY_COVERAGE,
    passage_clauses,
    polarity_conflict,
    polarity_terms,
)
from anchored_query.citations.support import (
    LEXICAL_FLOOR,
    LEXICAL_WEIGHT,
    STRICT_MARGIN,
    SUPPORT_MIN,
    Support,
    Terms,
    content_terms,
    lexical_found,
    lexical_support,
    pairing_conflicts,
    passage_terms,
    qualifier_conflicts,
    quotes_a_quotation,
    restates_headings,
)
from anchored_query.types import AnswerSentence, Passage

__all__ = ["TOGETHER_LINES", "Checker", "Item", "attribute", "attribute_all"]

# A sentence found by searching the context must have its facts this close together
# in the passage (Checker.together) to be checked as leniently as a cited one.
TOGETHER_LINES = 2

#: No candidate passage supports an uncited sentence (nor does any passage in context).
NOTHING_SUPPORTS = Failure(
    "no_passage_supports", "no citation and no passage in context supports it"
)


@dataclass
class Item:
    """One sentence under verification."""

    index: int
    sentence: AnswerSentence
    own: list[int]
    paragraph: int
    footer: tuple[int, ...]
    claims: list[Claim]
    terms: frozenset[str]
    is_code: bool
    no_coverage: bool
    code: list[str]  # lines of code a passage must hold (see code_lines)

    @classmethod
    def of(
        cls,
        index: int,
        sentence: AnswerSentence,
        usable: Collection[int],
        *,
        paragraph: int,
        footer: tuple[int, ...],
        no_coverage: bool,
        derived: Derived | None = None,
    ) -> Item:
        """The sentence at ``index`` with what the checks need of it, computed once
        (``derived``: its claims, terms and code lines, when known already)."""
        text = sentence.text
        d = derived or Derived.of(text)
        return cls(
            index=index,
            sentence=sentence,
            own=[n for n in dict.fromkeys(sentence.citations) if n in usable],
            paragraph=paragraph,
            footer=footer,
            claims=d.claims,
            terms=d.terms,
            is_code=d.is_code,
            no_coverage=no_coverage and not d.is_code,
            code=d.code,
        )


@dataclass(frozen=True)
class Derived:
    """What the checks read of a sentence's text: its facts, terms and code lines."""

    claims: list[Claim]
    terms: frozenset[str]
    is_code: bool
    code: list[str]

    @classmethod
    def of(cls, text: str) -> Derived:
        is_code = text.startswith(("```", "~~~"))
        terms = content_terms(_code_body(text) if is_code else text)
        return cls(claims(text), terms, is_code, code_lines(text))


def attribute(
    item: Item,
    items: list[Item],
    checker: Checker,
    decided: Mapping[int, list[int]],
    *,
    exclude: Collection[int] = (),
    search: bool = True,
) -> tuple[list[int], Failure | None]:
    """Citations for a sentence without its own: the first candidate that supports it.

    Candidates in order: the markers of its paragraph (later sentences first, then
    earlier), the citations its paragraph's other sentences were given, its
    neighbours' citations (their own or already attributed), the footer's passages
    one by one, then (with ``search``) the best passage of the context (strict).
    A sentence whose own markers failed the check passes them as ``exclude``:
    groups of only those passages are not tried again.
    """
    same = [o for o in items if o.paragraph == item.paragraph and o is not item]
    after = [o for o in same if o.index > item.index and o.own]
    before = [o for o in reversed(same) if o.index < item.index and o.own]
    groups: list[list[int]] = [o.own for o in (*after, *before)]
    nearest = sorted(same, key=lambda o: (abs(o.index - item.index), o.index))
    groups.extend(list(decided[o.index]) for o in nearest if decided.get(o.index))
    for j in (item.index - 1, item.index + 1):
        if 0 <= j < len(items):
            cited = items[j].own or decided.get(j, [])
            if cited:
                groups.append(list(cited))
    groups.extend([n] for n in item.footer if n in checker.usable)
    tried: set[tuple[int, ...]] = {tuple(exclude)} if exclude else set()
    first_failure: Failure | None = None
    for group in groups:
        if tuple(group) in tried:
            continue
        tried.add(tuple(group))
        failure = checker.check(item, group, strict=False)
        if failure is None:
            return group, None
        first_failure = first_failure or failure.attributed(group)
    if search:
        best = checker.best(item, exclude={n for g in tried for n in g} | set(exclude))
        if best is not None:
            return [best], None
    return [], first_failure or NOTHING_SUPPORTS


def attribute_all(
    open_items: list[Item],
    items: list[Item],
    checker: Checker,
    decided: dict[int, list[int]],
) -> dict[int, Failure]:
    """Attribute every sentence of ``open_items`` that a candidate supports, adding its
    citations to ``decided``; returns why each of the others was not.

    Until nothing changes: what the paragraph's markers and the citations already given
    to its sentences and neighbours support; only when a round finds none, a
    context-wide search (a sentence attributed by search gives its neighbours a
    candidate, so local rounds follow again).
    """
    failures: dict[int, Failure] = {}
    search = False
    while open_items:
        progress = False
        for item in open_items:
            found, failure = attribute(
                item, items, checker, decided, exclude=item.own, search=search
            )
            if found:
                decided[item.index] = checker.fewest(item, found)
                progress = True
            elif failure is not None and (search or item.index not in failures):
                failures[item.index] = failure
        open_items = [o for o in open_items if o.index not in decided]
        if progress:
            search = False
        elif search:
            break
        else:
            search = True
    return {o.index: failures[o.index] for o in open_items}


class Checker:
    """The support checks of one context, with its passages' terms and haystacks cached."""

    def __init__(
        self,
        passages: Mapping[int, Passage],
        support: Support | None,
        foreign: Callable[[str], list[str]] | None = None,
        asked: str = "",
    ) -> None:
        self.passages = passages
        # The numbers the reader gave (the question, a follow-up's earlier turns): an
        # answer applying them to the docs' option has not invented them.
        self.asked_numbers = frozenset(c.value for c in claims(asked) if c.kind == "number")
        self.support = support
        self.foreign = foreign
        self.usable = [n for n, p in passages.items() if not p.excluded]
        self.shown = [passages[n] for n in self.usable]
        self._haystacks: dict[int, Haystack] = {}
        self._terms: dict[int, tuple[Terms, Terms]] = {}
        self._code_text: dict[int, str] = {}
        self._polarity: dict[str, str | None] = {}  # a sentence's polarity conflict
        # Decisions by sentence (its text and markers) and group: a streamed reply is
        # re-verified at each paragraph, and each sentence is then checked only once.
        self._checks: dict[tuple[str, tuple[int, ...], tuple[int, ...], bool], Failure | None] = {}
        self._best: dict[tuple[str, tuple[int, ...], frozenset[int]], int | None] = {}
        self._derived: dict[str, Derived] = {}
        self._restates: dict[str, bool] = {}

    def restates(self, text: str) -> bool:
        """:func:`restates_headings` of ``text`` with the passages shown, once a text."""
        found = self._restates.get(text)
        if found is None:
            found = self._restates[text] = restates_headings(text, self.shown)
        return found

    def derived(self, text: str) -> Derived:
        """:class:`Derived` of a sentence's text, once."""
        found = self._derived.get(text)
        if found is None:
            found = self._derived[text] = Derived.of(text)
        return found

    def polarity(self, text: str) -> str | None:
        """:func:`polarity_conflict` of ``text`` with every passage shown (whatever the
        group: computed once a sentence).

        Only the passages that hold :data:`POLARITY_COVERAGE` of the sentence's terms
        are cut into clauses: a clause's terms are among its passage's (:meth:`terms`),
        so no clause of another passage covers that much, and the verdict is the same
        as over every passage.
        """
        if text not in self._polarity:
            terms = polarity_terms(text)
            # (the share is computed as polarity_conflict computes a clause's cover)
            candidates = [
                self.passages[n]
                for n in (self.usable if len(terms) >= 2 else ())  # (fewer: no test)
                if sum(lexical_found(t, self.terms(n)[0]) for t in terms) / len(terms)
                >= POLARITY_COVERAGE
            ]
            self._polarity[text] = polarity_conflict(text, passage_clauses(candidates))
        return self._polarity[text]

    def haystack(self, n: int) -> Haystack:
        if n not in self._haystacks:
            self._haystacks[n] = Haystack(self.passages[n])
        return self._haystacks[n]

    def terms(self, n: int) -> tuple[Terms, Terms]:
        if n not in self._terms:
            p = self.passages[n]
            body = passage_terms(p.text)
            if p.highlight and p.highlight != p.text:
                body = Terms(body | passage_terms(p.highlight))
            self._terms[n] = (body, passage_terms(" ".join([p.title, *p.heading_path])))
        return self._terms[n]

    def lexical(self, item: Item, group: Sequence[int]) -> float | None:
        if len(group) == 1:
            return lexical_support(item.terms, *self.terms(group[0]))
        body: set[str] = set()
        heading: set[str] = set()
        for n in group:
            b, h = self.terms(n)
            body |= b
            heading |= h
        return lexical_support(item.terms, body, heading)

    def semantic(self, item: Item, group: Sequence[int], *, strict: bool = False) -> float | None:
        # Code, and a sentence that is one config line, is compared verbatim (code_lines).
        if self.support is None or item.is_code or item.code:
            return None
        # Searching the whole context, a passage line that matches by chance is likelier:
        # only the section vectors count there (SemanticSupport.sections_only).
        score = getattr(self.support, "sections_only", self.support) if strict else self.support
        scores = [score(item.sentence.text, self.passages[n]) for n in group]
        scores = [s for s in scores if not math.isnan(s)]
        return max(scores) if scores else None

    def has_line(self, n: int, line: str) -> bool:
        """Whether passage ``n`` holds the code line (spacing and quote style aside; of
        an assignment, the assigned expression is enough)."""
        if n not in self._code_text:
            p = self.passages[n]
            self._code_text[n] = _code_norm(p.text + "\n" + p.highlight)
        text = self._code_text[n]
        return line in text or _ASSIGNED.sub("", line) in text

    def check(self, item: Item, group: Sequence[int], *, strict: bool) -> Failure | None:
        """None when ``group`` supports the sentence, else why not (decided once per
        sentence and group: see :meth:`_check`)."""
        key = (item.sentence.text, tuple(item.sentence.citations), tuple(group), strict)
        if key not in self._checks:
            self._checks[key] = self._check(item, group, strict=strict)
        return self._checks[key]

    def _check(self, item: Item, group: Sequence[int], *, strict: bool) -> Failure | None:
        missing = [c for c in item.claims if not any(self.haystack(n).has(c) for n in group)]
        invented = [
            c
            for c in missing
            if c.kind == "number" and not item.is_code and c.value not in self.asked_numbers
        ]
        if invented:
            # A number in prose that the passages do not state and the reader did not
            # give is a value they contradict or never gave (conclusive).
            values = ", ".join(repr(c.value) for c in invented)
            return Failure("number_not_found", f"number {values} not in {list(group)}")
        if missing:
            values = ", ".join(repr(c.value) for c in missing)
            return Failure("fact_not_found", f"{values} not in {list(group)}")
        alien = self.foreign(item.sentence.text) if self.foreign and not item.is_code else []
        if alien:
            return Failure(
                "foreign_term", f"names {', '.join(alien)}, which the site never mentions"
            )
        unquoted = [line for line in item.code if not any(self.has_line(n, line) for n in group)]
        if unquoted:
            return Failure("code_not_found", f"code line {unquoted[0]!r} not in {list(group)}")
        if all(quotes_a_quotation(item.sentence.text, self.passages[n]) for n in group):
            return Failure("quotes_a_quotation", f"only repeats a quotation of {list(group)}")
        shown = [self.passages[n] for n in group]
        conflicts = pairing_conflicts(item.sentence.text, shown)
        conflicts += qualifier_conflicts(item.sentence.text, shown)
        if conflicts:
            detail = f"values paired differently in {list(group)}: {', '.join(conflicts)}"
            return Failure("contradicts_value", detail)
        flipped = None if item.is_code else self.polarity(item.sentence.text)
        if flipped:
            return Failure("contradicts_polarity", flipped)
        need = SUPPORT_MIN + (STRICT_MARGIN if strict else 0.0)
        lexical = self.lexical(item, group)
        if lexical is not None and (
            lexical < LEXICAL_FLOOR or LEXICAL_WEIGHT * lexical + (1 - LEXICAL_WEIGHT) < need
        ):
            # Fails whatever the semantic test would say (at best 1): it is not asked, and
            # the sentence is not embedded for it.
            detail = f"lexical support {lexical:.2f} too low in {list(group)} (need {need:.2f})"
            return Failure("weak_support", detail)
        score = self.score(item, group, strict=strict)
        if score is None:
            # Only the facts can be checked. A code line or block is its facts: enough for
            # a passage the model cited; for one found by searching the context, only when
            # the model did cite (a passage it miscounted) and a fact few passages hold
            # singles the passage out. A sentence in another language than the page claims
            # more than its names and values ("the comment system is enabled through
            # GitHub Discussions" holds only the name): not confirmed (shown, marked).
            code = item.is_code or bool(item.code)
            cited = bool(item.sentence.citations) and self.distinctive(item)
            if code and item.claims and (not strict or cited):
                return None
            if item.claims:
                return Failure("no_test", "no test of support applies: only its facts were found")
            return Failure("no_test", "no test of support applies")
        lexical, value = score
        if value < need:  # (lexical support under the floor failed above)
            detail = f"support {value:.2f} < {need:.2f} (lexical {lexical}) in {list(group)}"
            return Failure("weak_support", detail)
        return None

    def score(
        self, item: Item, group: Sequence[int], *, strict: bool = False
    ) -> tuple[float | None, float] | None:
        """(lexical support, support score) of ``group`` for the sentence; None when
        neither test applies (a Chinese sentence on an English page, no embedder)."""
        lexical = self.lexical(item, group)
        semantic = self.semantic(item, group, strict=strict)
        if lexical is None and semantic is None:
            return None
        if lexical is None or semantic is None:
            return lexical, lexical if lexical is not None else semantic  # type: ignore[return-value]
        return lexical, LEXICAL_WEIGHT * lexical + (1 - LEXICAL_WEIGHT) * semantic

    def fewest(self, item: Item, group: list[int]) -> list[int]:
        """``group`` (which supports the sentence) cut to the passages it needs: a
        citation shown must support its sentence, not only the group it came in (a
        paragraph's "[4, 5]", a model's "[1, 2, 3]"). The first passage that supports
        it alone and holds every fact and content term of it that the group holds is
        enough; otherwise the passages that add a fact or term the others lack, in
        the group's order (a sentence joining two passages' rows cites both)."""
        if len(group) <= 1:
            return group
        held = {n: self.held(item, n) for n in group}
        every = set().union(*held.values())
        for n in group:
            if held[n] >= every and self.check(item, [n], strict=False) is None:
                return [n]
        chosen: list[int] = []
        covered: set[str] = set()
        for n in sorted(group, key=lambda n: (-len(held[n]), group.index(n))):
            if held[n] - covered:
                chosen.append(n)
                covered |= held[n]
        return [n for n in group if n in chosen] or group

    def held(self, item: Item, n: int) -> set[str]:
        """The facts and content terms of the sentence that passage ``n`` holds."""
        body, heading = self.terms(n)
        found = {"t:" + t for t in item.terms if lexical_found(t, body | heading)}
        found |= {"f:" + c.kind + c.value for c in item.claims if self.haystack(n).has(c)}
        return found

    def distinctive(self, item: Item, passage: int | None = None, *, numbers: bool = False) -> bool:
        """Whether a fact of the sentence other than a value (number, boolean), of four
        characters or more, occurs verbatim in at most half of the context's passages
        (``timeout=None``; not the site's name, nor code composed of pieces); with
        ``passage``, also verbatim in that passage (the fact singles it out). With
        ``numbers``, a number of four characters or more counts too (``3.11``, ``8000``)."""
        return any(
            (c.kind != "number" or numbers)
            and len(c.value) >= 4
            and c.value.strip("`'\"").casefold() not in _LITERALS  # a value names nothing
            and 2 * sum(1 for n in self.usable if self.haystack(n).verbatim(c)) <= len(self.usable)
            and any(self.haystack(n).verbatim(c) for n in self.usable)
            and (passage is None or self.haystack(passage).verbatim(c))
            for c in item.claims
        )

    def best(self, item: Item, exclude: set[int]) -> int | None:
        """The context passage that best supports the sentence under the strict test
        (searched once per sentence and exclusions)."""
        key = (item.sentence.text, tuple(item.sentence.citations), frozenset(exclude))
        if key not in self._best:
            self._best[key] = self._search(item, exclude)
        return self._best[key]

    def _search(self, item: Item, exclude: set[int]) -> int | None:
        ranked = []
        for n in self.usable:
            if n in exclude:
                continue
            lexical = self.lexical(item, [n])
            if lexical is None:
                # No comparable terms (a Chinese sentence, an English page): the facts decide.
                if item.claims and all(self.haystack(n).has(c) for c in item.claims):
                    ranked.append((0.0, -n, n))
            elif lexical >= LEXICAL_FLOOR:
                ranked.append((lexical, -n, n))
        for _, _, n in sorted(ranked, reverse=True)[:5]:
            # A name few passages hold, held by this one with the sentence's other facts,
            # points at it as a marker would: checked as a cited sentence is (when a test
            # of support applies; names alone never pick a passage). Otherwise a match
            # by chance is likelier.
            relaxed = (
                self.distinctive(item, n, numbers=True)
                and self.together(item, n)
                and self.score(item, [n]) is not None
            )
            if self.check(item, [n], strict=not relaxed) is None:
                return n
        return None

    def together(self, item: Item, n: int) -> bool:
        """Whether the sentence's facts occur together in passage ``n``: within
        :data:`TOGETHER_LINES` consecutive lines of its text. A section that holds
        a command in one place and a file name in another does not say what the
        sentence pairs them for ("Run `mkdocs gh-deploy --config-file …` to push the
        CNAME file", recorded reply mkdocs-04)."""
        if item.is_code or not item.claims:
            return True
        lines = [
            Haystack(replace(self.passages[n], text=line, highlight="", title="", heading_path=[]))
            for line in self.passages[n].text.split("\n")
        ]
        holders = [{i for i, h in enumerate(lines) if h.has(c)} for c in item.claims]
        return any(
            all(any(start <= i < start + TOGETHER_LINES for i in held) for held in holders)
            for start in range(len(lines))
        )


_LITERALS = frozenset({"true", "false", "none", "null", "yes", "no"})

# A config line written as a sentence of its own: "name: Switch to light mode", "- media: x".
_CONFIG_LINE = re.compile(r"^(?:-[ \t]+)?[A-Za-z_][\w.-]*:(?:[ \t]+[^\n]*)?$")
_SENTENCE_END = re.compile(r"[.!?。！？]$")
# Lines that carry nothing to check: comments, ellipses, lone brackets and punctuation.
_CODE_NOISE = re.compile(
    r"^(?:#|//|--\s|\.\.\.|…|>>>\s*$|import\s+[\w.]+$|from\s+[\w.]+\s+import\s)"
    r"|^[\[\](){}<>,;:|`'\"\s.-]*$"
)
# "response = httpx.get(...)": the passage may hold only the call.
_ASSIGNED = re.compile(r"^(?:>>>\s*)?[A-Za-z_][\w.]*\s*=\s*(?=\S)")
_TRAILING_COMMENT = re.compile(r"[ \t]+#(?:[ \t].*)?$")
_QUOTES = str.maketrans({"'": '"', "“": '"', "”": '"', "‘": '"', "’": '"'})


def code_lines(text: str) -> list[str]:
    """The code a passage must hold verbatim for the sentence to be supported: each line
    of a fenced block (comments, ellipses and lone brackets aside, a trailing ``# …``
    comment cut), or a sentence that is one config line ("name: Switch to light mode").

    Code shown to the reader is the documentation's code: a block the model composed
    from attested pieces but with its own values (``dev_addr: '0.0.0.0:9000'``) or a
    YAML line from another passage is not supported, whatever its words.
    """
    if text.startswith(("```", "~~~")):
        lines = _code_body(text).split("\n")
    elif _CONFIG_LINE.match(text.strip()) and not _SENTENCE_END.search(text.strip()):
        lines = [text]
    else:
        return []
    out = []
    for line in lines:
        line = _TRAILING_COMMENT.sub("", line)
        norm = _code_norm(line)
        if norm and not _CODE_NOISE.match(norm):
            out.append(norm)
    return list(dict.fromkeys(out))


def _code_norm(text: str) -> str:
    return " ".join(text.translate(_QUOTES).split())


def _code_body(text: str) -> str:
    body = text.split("\n", 1)[1] if "\n" in text else ""
    return re.sub(r"\n[ \t]*(?:`{3,}|~{3,})[ \t]*$", "", body)
