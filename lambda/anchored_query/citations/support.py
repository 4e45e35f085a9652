"""Does a passage support a sentence? Lexical, value-pairing and semantic tests.

The citation check (:mod:`anchored_query.citations.verify`) first requires every
checkable fact of a sentence (numbers, options, identifiers, code, quotes) to
occur in its passages. That is necessary, not sufficient: "MkDocs can export a
PDF of the site" passes it against a passage that mentions neither. Three more
tests, each cheap and each documented with its threshold:

* **Lexical support** (:func:`lexical_support`): the share of the sentence's
  content terms (the BM25 tokenizer's stemmed terms, minus words that talk
  about the documentation itself) that occur in the passage (or share a
  prefix of four letters or more with one of its terms). A term found
  only in the passage's title or heading path counts half: a heading names a
  topic, the body says something about it. Terms of another script than the
  passage (a Chinese sentence about an English page) are left out; a sentence
  with fewer than half of its terms comparable gets ``None`` (the test does not
  apply). Without a test that applies, only a sentence that cites the passage
  itself and has checkable facts (all found) is kept: with an English-only
  embedding model, Chinese sentences about an English site are kept only then.
* **Value pairing** (:func:`pairing_conflicts`): where the sentence pairs a
  value with a thing in one clause ("`navigation_depth` defaults to 4 in
  readthedocs") and a passage pairs that value with another thing the
  sentence names (same line or table row, or the section's heading), the
  sentence has swapped them.
* **Semantic support** (:func:`make_support`): the best cosine between the
  sentence's embedding and the passage's chunk embeddings (the index's own
  model) or the embeddings of the passage's lines that share most of its terms
  (:func:`best_units`), put on one 0..1 scale per model (:data:`SEMANTIC_SCALE`).

The support score is a weighted mean of lexical and semantic support
(:data:`LEXICAL_WEIGHT`; lexical alone without an embedder); a passage supports a
sentence when lexical support is at least :data:`LEXICAL_FLOOR` and the score at
least :data:`SUPPORT_MIN`.

Thresholds were chosen with ``tests/bench/calibrate_support.py`` on
``tests/fixtures/support-labels.jsonl`` (46 hand-labelled sentence/passage pairs
from the MkDocs, HTTPX and Material docs; 22 unsupported, most of them plausible
claims on the passage's topic), and checked on the replies recorded from a real
model (``tests/fixtures/llm-replies/``). With the fact and pairing checks,
"supported" had precision/recall 0.96/0.92 with all-MiniLM-L6-v2, 1.00/0.92 with
multilingual-e5-small, 0.88/0.92 on lexical support alone, against 0.57/1.00 for
the fact checks alone. The thresholds were chosen on that same set (no held-out
part): read the figures as a calibration, not a test score.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Callable, Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from anchored_query.citations.semantic import SEMANTIC_SCALE, make_support, rescale
from anchored_query.citations.sentences import code_spans, is_cjk, outside_code
from anchored_query.question.word_prior import WordPrior, term_priors
from anchored_query.types import Passage
from build_index.tokenizer import tokenize

__all__ = [
    "LEXICAL_FLOOR",
    "LEXICAL_WEIGHT",
    "PASSAGE_CACHE",
    "SEMANTIC_SCALE",
    "STRICT_MARGIN",
    "SUPPORT_MIN",
    "Support",
    "content_terms",
    "foreign_terms",
    "lexical_found",
    "lexical_support",
    "make_support",
    "pairing_conflicts",
    "passage_terms",
    "qualifier_conflicts",
    "quotes_a_quotation",
    "rescale",
    "restates_headings",
]

Support = Callable[
    [str, Passage], float
]  # make_support's callable (anchored_query.citations.semantic)

# Lexical support below this fails whatever the semantic test says.
LEXICAL_FLOOR = 0.5
# The support score -- LEXICAL_WEIGHT * lexical + (1 - LEXICAL_WEIGHT) * semantic
# support, or lexical support alone without a semantic test -- must reach this for a
# passage the model cited or that its paragraph, a neighbour or a footer cited ...
SUPPORT_MIN = 0.7
# Lexical support weighs more: a chunk vector of a long table dilutes the one row a
# sentence restates (recorded reply anchored-01: lexical 0.8, semantic 0.56).
LEXICAL_WEIGHT = 0.6
# ... and this much more for a passage found by searching the whole context.
STRICT_MARGIN = 0.1

# Words that talk about the documentation or fill a sentence, not about the product.
_GENERIC_WORDS = """
    document documentation docs doc passage passages section sections page pages site
    information info mention mentioned mentions describe described describes explain
    explained explains cover covered covers provide provided provides state stated states
    say says said specify specified specifies example examples following follow note notes
    also can need needs may like way ways here there thing things detail details refer
    refers see find found show shows shown available allow allows let lets help mean means
    use used uses using way possible able yes
"""
_GENERIC = frozenset(tokenize(_GENERIC_WORDS))

_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])[vV]?(\d+(?:\.\d+)*)(?![A-Za-z0-9_]|\.[A-Za-z0-9_])")
_BOOLEAN = re.compile(r"(?<![\w-])(true|false|none|null|yes|no)(?![\w-])", re.IGNORECASE)
_ENTITY_WORD = re.compile(
    r"(?<![\w-])(?:--?[A-Za-z][\w-]*|[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+"
    r"|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z]*)(?![\w-])"
)
_CLAUSE_BREAK = re.compile(
    r"[;；。,，]|\b(?:while|whereas|but|however)\b|\band\b(?=\s+(?:the\s+)?(?:`|--|\w+_\w))"
    r"|\band\b(?=\s+(?:the\s+)?`?[\w-]+`?(?:\s+(?:theme|option|setting|plugin))?"
    r"\s+(?:has|uses|is|sets?|defaults?)\b)",
    re.IGNORECASE,
)
_HEADING_LABELS = re.compile(
    r"(?:\b(?:section|page|passage|source)s?\s*[:：]|[›»>|/·•]|\b\d{1,3}[.)](?=\s|$))", re.I
)


_NUMERIC_TERM = re.compile(r"^v?\d[\d.,]*$")


# The terms of a passage's text (and, in polarity, its clauses) are kept for this many
# texts across requests: the same sections come back for many questions (of the 1,751
# passages 100 SciFact questions showed at 5,000 chunks, 667 were shown before), and
# cutting them into terms is most of a check's work.
PASSAGE_CACHE = 1024


@functools.lru_cache(maxsize=PASSAGE_CACHE)
def passage_terms(text: str) -> Terms:
    """:func:`content_terms` of a passage's text, kept across requests
    (:data:`PASSAGE_CACHE`)."""
    return content_terms(text)


def content_terms(text: str) -> Terms:
    """The stemmed terms of ``text`` that can carry a claim (see the module docstring).

    Numbers and versions are left to the fact check, which compares them exactly.
    """
    return Terms(t for t in tokenize(text) if t not in _GENERIC and not _NUMERIC_TERM.match(t))


def lexical_support(
    terms: AbstractSet[str], body: AbstractSet[str], heading: AbstractSet[str]
) -> float | None:
    """Share of ``terms`` found in a passage's ``body`` terms (``heading`` terms count half).

    Terms in a script the passage does not use at all (CJK against a page
    without CJK, or the reverse) are not compared; ``None`` (the test does not
    apply) when fewer than half of the terms remain: the names a Chinese sentence
    shares with an English page say nothing about what it claims of them.
    """
    body, heading = as_terms(body), as_terms(heading)
    body_cjk = body.has_cjk()
    comparable = {t for t in terms if _is_cjk_term(t) == body_cjk}
    if not comparable or len(comparable) * 2 < len(terms):
        return None
    score = sum(1.0 if _found(t, body) else 0.5 if _found(t, heading) else 0.0 for t in comparable)
    return score / len(comparable)


def as_terms(terms: AbstractSet[str]) -> Terms:
    """``terms`` as a :class:`Terms` (itself when it is one)."""
    return terms if isinstance(terms, Terms) else Terms(terms)


def lexical_found(term: str, terms: AbstractSet[str]) -> bool:
    """Whether ``term`` occurs in ``terms`` as :func:`lexical_support` counts it."""
    return _found(term, terms)


class Terms(frozenset[str]):
    """A term set that also finds a term by prefix (:func:`lexical_found`) without
    scanning: its alphabetic terms of 4+ letters bucketed by their first four, built
    on the first such look-up."""

    _by_head: dict[str, tuple[str, ...]] | None = None
    _has_cjk: bool | None = None

    def has_cjk(self) -> bool:
        """Whether any term is CJK (computed once: every sentence compared with the
        passage asks)."""
        if self._has_cjk is None:
            # (is_cjk holds from U+3000 on: a plain comparison leaves out the rest)
            self._has_cjk = any(_is_cjk_term(t) for t in self if t >= "\u3000")
        return self._has_cjk

    def by_head(self) -> dict[str, tuple[str, ...]]:
        if self._by_head is None:
            buckets: dict[str, list[str]] = {}
            for t in self:
                if len(t) >= 4 and t.isalpha():
                    buckets.setdefault(t[:4], []).append(t)
            self._by_head = {k: tuple(v) for k, v in buckets.items()}
        return self._by_head


def _found(term: str, terms: AbstractSet[str]) -> bool:
    """``term`` in ``terms``, or one is a prefix (4+ letters) of the other: the stemmer
    leaves "server" and "serve" ("serv") apart. Two such words share their first four
    letters, so only that bucket of a :class:`Terms` is compared."""
    if term in terms:
        return True
    if len(term) < 4 or not term.isalpha():
        return False
    bucket = as_terms(terms).by_head().get(term[:4], ())
    return any(term.startswith(t) or t.startswith(term) for t in bucket)


def restates_headings(text: str, passages: Iterable[Passage]) -> bool:
    """True when ``text`` only lists passage titles/heading paths (the prompt's own structure).

    "1. Section: MkDocs 2. Section: Deploying your docs › GitHub Pages" asserts
    nothing: with the labels, numbering, separators and every title and heading
    of the passages taken out, no content term is left.
    """
    names: set[str] = set()
    for p in passages:
        names.update(_fold(h) for h in (p.title, *p.heading_path) if h.strip())
    rest = _fold(outside_code(text))
    found = False
    for name in sorted(names, key=len, reverse=True):
        if len(name) < 2 or name not in rest:
            continue
        pattern = r"(?<!\w)" + re.escape(name) + r"(?!\w)"
        rest, count = re.subn(pattern, " ", rest)
        found = found or count > 0
    if not found:
        return False
    rest = _HEADING_LABELS.sub(" ", rest)
    return not (content_terms(rest) - _LIST_WORDS)


_QUOTED_SPAN = re.compile(r"\"([^\"\n]{3,300})\"|“([^”\n]{3,300})”|「([^」\n]{3,300})」")


def quotes_a_quotation(text: str, passage: Passage) -> bool:
    """True when ``text`` is only a string the passage puts in quotes.

    A page that says: answer every question with "Skylark is deprecated" mentions
    that sentence, it does not state it; a reply repeating it is not supported.
    """
    sentence = _fold(text).strip(" .!?。！？")
    if len(sentence) < 3:
        return False
    for m in _QUOTED_SPAN.finditer(passage.text):
        quoted = _fold(next(g for g in m.groups() if g is not None))
        if sentence in quoted:
            return True
    return False


_LIST_WORDS = frozenset(tokenize("and or the of section sections page passage source"))


@dataclass(frozen=True)
class _Pair:
    entity: str
    value: str


def pairing_conflicts(text: str, passages: Sequence[Passage]) -> list[str]:
    """The entity-value pairs of ``text`` that ``passages`` give to another entity.

    Entities are inline code, options, identifiers, CamelCase names and the
    passages' own section headings named in the sentence; values are numbers,
    booleans, quoted strings and code that is a value. The sentence pairs the
    entities and values of one clause. A passage pairs a value with the
    sentence's entities that share its line (a paragraph, list item or table
    row) or head its section. A pair fails when no passage pairs its value with
    its entity but some passage pairs the value with an entity the sentence
    names in another clause (it swapped them), or gives the entity the opposite
    boolean. Returns ``"entity=value"`` strings, empty when nothing conflicts.
    """
    headings = {_fold(p.heading_path[-1] if p.heading_path else p.title) for p in passages}
    headings = {h for h in headings if len(h) >= 2}
    asserted: dict[_Pair, set[str]] = {}  # pair -> the entities of its clause
    entities: set[str] = set()
    for clause, ents, values in _clauses(text):
        ents = ents | {h for h in headings if _contains(clause, h)}
        entities |= ents
        for e in sorted(ents):
            for v in values:
                asserted.setdefault(_Pair(e, v), set()).update(ents)
    if not asserted:
        return []
    units = [unit for p in passages for unit in _passage_units(p, entities)]
    conflicts: list[str] = []
    for pair, clause_entities in asserted.items():
        # A section name paired with a value competes with the sections that hold it.
        section = pair.entity in headings
        holders = [
            scope | ({heading} if section else set())
            for scope, heading, vals in units
            if pair.value in vals
        ]
        holders = [scope for scope in holders if scope]
        if any(pair.entity in scope for scope in holders):
            continue
        elsewhere = any(scope - clause_entities for scope in holders)
        if elsewhere or (pair.value in _BOOLEANS and _other_boolean(pair, units)):
            conflicts.append(f"{pair.entity}={pair.value}")
    return conflicts


_BOOLEANS = frozenset({"true", "false"})

# A number's qualifiers: the content words right after it ("58 MB zipped", "5 seconds").
_QUALIFIER_WINDOW = 2
_QUALIFIER_STOP = re.compile(r"[,;:.()\[\]{}=|\n]|\b(?:and|or|but|while|whereas)\b", re.I)


def qualifier_conflicts(text: str, passages: Sequence[Passage]) -> list[str]:
    """Numbers the sentence qualifies with a word the passages give to another number.

    A number's qualifiers are the first content terms after it, up to
    :data:`_QUALIFIER_WINDOW`, before any punctuation or conjunction ("171 MB
    unzipped and 58 MB zipped": 171 -> {mb, unzip}, 58 -> {mb, zip}). The
    sentence's "58 MB unzipped" conflicts: "unzip" follows 171 in the passage and
    never 58. Words that follow both numbers (the unit "MB") decide nothing.
    Returns ``"number~word"`` strings, empty when nothing conflicts.
    """
    said = _qualified(outside_code(text))
    if not said:
        return []
    found: dict[str, set[str]] = {}
    for p in passages:
        for value, words in _qualified(p.text).items():
            found.setdefault(value, set()).update(words)
    conflicts = []
    for value, words in said.items():
        if value not in found:
            continue
        for word in sorted(words - found[value]):
            if any(word in w for v, w in found.items() if v != value):
                conflicts.append(f"{value}~{word}")
    return conflicts


# A word at least this specific in the language at large (word_prior: 1 for a word the
# embedder's vocabulary does not hold whole, a name or identifier) that the site never
# uses is something the docs cannot support.
FOREIGN_PRIOR = 0.9
# An HTML-like tag is markup, not a word: `<b>bold</b>` is judged as "bold".
_TAG = re.compile(r"</?[A-Za-z][\w-]*\s*/?>")


def foreign_terms(text: str, vocabulary: Collection[str], prior: WordPrior | None) -> list[str]:
    """The words of ``text`` the site never uses (no term of them in the index's
    ``vocabulary``) that are specific in the language at large (``prior``; see
    :mod:`anchored_query.question.word_prior`): "NTLM", "QUIC", "Helm" in an answer about a
    site that never names them. Code, numbers and CJK words are left to the other
    checks; without a prior nothing is foreign."""
    if prior is None:
        return []
    out = []
    for term, value in term_priors(_TAG.sub(" ", outside_code(text)), prior).items():
        if value < FOREIGN_PRIOR or term in vocabulary or _NUMERIC_TERM.match(term):
            continue
        if len(term) < 3 or _is_cjk_term(term) or term in _GENERIC:
            continue
        out.append(term)
    return out


def _qualified(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m in _NUMBER.finditer(text):
        rest = text[m.end() : m.end() + 60]
        stop = _QUALIFIER_STOP.search(rest)
        rest = rest[: stop.start()] if stop else rest
        # In the order written (content_terms is a set: its order changes per process).
        words = [t for t in tokenize(rest) if t not in _GENERIC and not _NUMERIC_TERM.match(t)]
        out.setdefault(m.group(1), set()).update(list(dict.fromkeys(words))[:_QUALIFIER_WINDOW])
    return out


def _other_boolean(pair: _Pair, units: list[tuple[set[str], str, set[str]]]) -> bool:
    """The passages give the entity the opposite boolean ("Default: `False`" for "is True")."""
    return any(
        pair.entity in scope and (vals & _BOOLEANS) - {pair.value} for scope, _, vals in units
    )


def _clauses(text: str) -> list[tuple[str, set[str], list[str]]]:
    """(folded text, entities, values) of each clause of a sentence."""
    out: list[tuple[str, set[str], list[str]]] = []
    masked = outside_code(text)
    spans = [(s, e) for s, e, fenced in code_spans(text) if not fenced]
    # Clause breaks are found outside code, with each code span kept as `xxx`.
    shape = list(masked)
    for s, e in spans:
        shape[s:e] = "`" + "x" * (e - s - 2) + "`"
    cuts = [0, *(m.start() for m in _CLAUSE_BREAK.finditer("".join(shape))), len(text)]
    # "In the `mkdocs` theme, …": a clause without values is the topic of the next one.
    carried: set[str] = set()
    carried_text = ""
    for start, end in itertools.pairwise(cuts):
        ents: set[str] = set(carried)
        values: list[str] = []
        for s, e in spans:
            if start <= s < end:
                code = text[s:e].strip("`").strip()
                value = _as_value(code)
                if value is not None:
                    values.append(value)
                elif code:
                    ents.add(_fold(code))
        prose = masked[start:end]
        ents.update(_fold(m.group(0)) for m in _ENTITY_WORD.finditer(prose))
        values.extend(_values(prose))
        clause = carried_text + " " + _fold(text[start:end].replace("`", " "))
        if values:
            out.append((clause, ents, list(dict.fromkeys(values))))
            carried, carried_text = set(), ""
        else:
            carried, carried_text = ents, clause
    return out


def _passage_units(p: Passage, entities: set[str]) -> list[tuple[set[str], str, set[str]]]:
    heading = _fold(p.heading_path[-1] if p.heading_path else p.title)
    heading_scope = {e for e in entities if _contains(heading, e)}
    units = []
    for line in p.text.split("\n"):
        folded = _fold(line)
        values = set(_values(line)) | {v for v in map(_as_value, _code_texts(line)) if v}
        if not values:
            continue
        scope = {e for e in entities if _contains(folded, e)} | heading_scope
        units.append((scope, heading, values))
    return units


def _code_texts(line: str) -> list[str]:
    return [line[s:e].strip("`").strip() for s, e, fenced in code_spans(line) if not fenced]


def _values(text: str) -> list[str]:
    values = [m.group(1) for m in _NUMBER.finditer(text)]
    values.extend(m.group(1).casefold() for m in _BOOLEAN.finditer(text))
    values.extend(
        _fold(m.group(1) or m.group(2))
        for m in re.finditer(r"\"([^\"\n]{1,60})\"|'([^'\n]{1,60})'", text)
    )
    return values


def _as_value(code: str) -> str | None:
    code = code.strip().strip("\"'")
    if re.fullmatch(r"\d+(?:\.\d+)*", code) or code.casefold() in {"true", "false", "none", "null"}:
        return code.casefold()
    return None


def _contains(haystack: str, needle: str) -> bool:
    return re.search(r"(?<![\w-])" + re.escape(needle) + r"(?![\w-])", haystack) is not None


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _is_cjk_term(term: str) -> bool:
    return bool(term) and is_cjk(term[0])
