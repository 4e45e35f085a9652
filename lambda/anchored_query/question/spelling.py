"""Spelling correction of query terms against the index's own BM25 vocabulary.

A reader who types "confgure the plaeholder" gets BM25 terms (``confgur``,
``plaehold``) that no chunk has, so the lexical half of retrieval finds
nothing. :func:`corrected` adds, for each such term, the vocabulary term of
the index closest to it by edit distance (optimal string alignment: an
insertion, deletion, substitution or swap of neighbours counts one), the most
frequent one among equally close ones. Only terms the index does not know
are corrected, only plain words of at least :data:`MIN_LENGTH` letters, and
at most one edit for words under :data:`TWO_EDITS_FROM` letters (two from
there): a short word a few letters from a known one is as often another word
as a typo.

Typos are made on words, not on their stems: "setings" stems to ``sete``, a letter
away from ``see``, and "insted" to ``inst``, a letter away from ``int``. So a misspelt
word of the question is read first (:func:`mended`): a word the docs write, one slip
from it (a letter dropped, added or swapped with its neighbour; no letter replaced),
gives its correction ("settings", "instead"), and only without one is its stem looked
up as above. A word the embedder's vocabulary holds whole is no typo, and the mended
word must be one the docs write: "backend" minus a letter stems to ``back``, but the
docs never write "backed".

The vocabulary is the index's own, so the correction transfers to any site:
nothing here knows English. Lookups use the symmetric-delete method
(SymSpell): every vocabulary term is indexed under itself and each string one
deletion away, as 64-bit hashes in one sorted numpy array (about 12 bytes per
entry), built once per index on the first misspelt query.

The embedder reads words, not terms: :func:`respelled` gives the question with
each corrected word replaced by the word the docs write for that term (its
surface form in a few chunks that hold it, closest to what was typed), so that
the dense half of retrieval reads "pipeline" where the reader typed "pipline".
It is stricter than the terms' correction, which only adds a term to BM25's
query: the typed word must be none the embedder's vocabulary holds whole, and
the docs' word must be the typed one with letters dropped, doubled or swapped
(no letter replaced).
"""

from __future__ import annotations

import re
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from build_index.bm25 import BM25Index
from build_index.tokenizer import STOPWORDS, tokenize, word_terms

__all__ = [
    "MIN_LENGTH",
    "SHORTHAND",
    "TWO_EDITS_FROM",
    "Speller",
    "corrected",
    "edit_distance",
    "known_terms",
    "mended",
    "respelled",
]

MIN_LENGTH = 4
TWO_EDITS_FROM = 9
_WORD = re.compile(r"[a-z]+")
_TEXT_WORD = re.compile(r"[A-Za-z]+")
#: Chunks read for a corrected term's surface form (its first postings).
_SURFACE_CHUNKS = 32
#: Lookups a speller remembers, of each kind (nearest terms, slips mended).
_KEPT = 4096
_UNSEEN = ""  # never a term: the vocabulary's terms are non-empty
#: Misspelt words of one text read as words (:func:`mended`, :func:`respelled`).
_MISSPELT_MAX = 8

#: Chat shorthand readers type for common words ("hw do i …", "pls", "im stuck"): never a
#: term the docs could be missing, so never counted as unknown, nor corrected ("cant" is no
#: typo of "cent").
SHORTHAND = frozenset(
    [
        "hw",
        "u",
        "ur",
        "r",
        "pls",
        "plz",
        "thx",
        "ty",
        "im",
        "ive",
        "id",
        "idk",
        "btw",
        "wanna",
        "gonna",
        "dont",
        "cant",
        "wont",
        "doesnt",
        "isnt",
        "didnt",
        "shouldnt",
        "wouldnt",
        "aint",
        "ya",
    ]
)

_spellers: weakref.WeakKeyDictionary[BM25Index, Speller] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def corrected(
    bm25: BM25Index, terms: Sequence[str], mended: Mapping[str, str] | None = None
) -> list[str]:
    """``terms`` plus the index's spelling of each term it does not know (see the module).
    ``mended``: the corrections read from the words typed (:func:`mended`), taken first."""
    if all(t in bm25.vocab for t in terms):
        return list(terms)
    return _speller(bm25).correct(terms, mended or {})


def known_terms(
    bm25: BM25Index, terms: Sequence[str], mended: Mapping[str, str] | None = None
) -> set[str]:
    """The ``terms`` the index knows, as spelt or misspelt (with a correction);
    ``mended`` as for :func:`corrected`."""
    known = {t for t in terms if t in bm25.vocab or t in (mended or {})}
    rest = [t for t in dict.fromkeys(terms) if t not in known]
    if rest:
        speller = _speller(bm25)
        known |= {t for t in rest if speller.correctable(t) and speller.nearest(t) is not None}
    return known


def mended(
    bm25: BM25Index,
    text: str,
    chunk_text: Callable[[int], str],
    is_word: Callable[[str], bool] = lambda word: False,
    tokens: Callable[[str], Sequence[str]] = tokenize,
) -> dict[str, str]:
    """The unknown term of each misspelt word of ``text`` -> the index's term for the
    word with its slip mended (:meth:`Speller.slipped`). Arguments as for
    :func:`respelled`: a word the embedder's vocabulary holds whole is no typo."""
    out: dict[str, str] = {}
    for match, term in _misspelt(bm25, text, is_word, tokens):
        found = _speller(bm25).slipped(match.group().lower(), chunk_text)
        if found is not None:
            out[term] = found[0]
    return out


def _misspelt(
    bm25: BM25Index,
    text: str,
    is_word: Callable[[str], bool],
    tokens: Callable[[str], Sequence[str]],
) -> Iterator[tuple[re.Match[str], str]]:
    """Each word of ``text`` the index may correct, and its term: one term it does not
    know, correctable, and no word of the language; the first :data:`_MISSPELT_MAX`
    (each costs a lookup of some 300 candidates; a question with more is rather in
    another language or noise)."""
    found = 0
    for match in _TEXT_WORD.finditer(text):
        terms = tokens(match.group())
        if len(terms) != 1 or terms[0] in bm25.vocab or is_word(match.group()):
            continue
        if _is_name(text, match):
            continue
        if _speller(bm25).correctable(terms[0]):
            yield match, terms[0]
            found += 1
            if found >= _MISSPELT_MAX:
                return


def respelled(
    bm25: BM25Index,
    text: str,
    chunk_text: Callable[[int], str],
    is_word: Callable[[str], bool] = lambda word: False,
    tokens: Callable[[str], Sequence[str]] = tokenize,
) -> str:
    """``text`` with each misspelt word (see :func:`corrected`) replaced by the word
    the index's chunks write for its correction, and each word whose term the docs hold
    but whose spelling they never write ("recal" for "recall", "bulit") by the docs'
    word of that term one slip away (:meth:`Speller.written`); ``text`` itself when
    none is.
    ``chunk_text(row)``: the text of chunk ``row``, where the surface form is read.
    ``is_word(word)``: whether ``word`` is a word of the language (the embedder's
    vocabulary holds it whole): such a word is what the reader meant, though the docs
    never use it ("React" is no typo of "reach"), and is left as typed. ``tokens``: the
    tokenizer (an analysed question's, which tokenizes a word once)."""
    speller = _speller(bm25)
    misspelt = {m.start(): term for m, term in _misspelt(bm25, text, is_word, tokens)}
    out: list[str] = []
    last = 0
    looked = 0
    for match in _TEXT_WORD.finditer(text):
        typed = match.group().lower()
        term = misspelt.get(match.start())
        word: str | None = None
        if term is not None:
            word = speller.docs_word(typed, term, chunk_text)
        elif (
            looked < _MISSPELT_MAX
            and len(typed) >= MIN_LENGTH
            and not is_word(match.group())
            and not _is_name(text, match)
        ):
            terms = tokens(match.group())
            if len(terms) == 1 and terms[0] in bm25.vocab:
                looked += 1
                word = speller.written(typed, terms[0], chunk_text)
        if word and _slip(typed, word):
            out += [text[last : match.start()], word]
            last = match.end()
    return "".join([*out, text[last:]]) if out else text


def _is_name(text: str, match: re.Match[str]) -> bool:
    """Whether the word ``match`` of ``text`` is a name rather than a word: written in
    capitals ("TMEM", "EMAs") or glued to a digit ("CHEK2", "LRRK2"). Names are typed
    as meant: none is mended nor respelled (BM25 still gets its stem's nearest term).
    A word of a snake_case identifier is a word: "web_concurency" is a typo."""
    word = match.group()
    if sum(c.isupper() for c in word) >= 2:
        return True
    before = text[match.start() - 1] if match.start() else ""
    after = text[match.end()] if match.end() < len(text) else ""
    return any(c.isdigit() for c in before + after)


def _slip(typed: str, word: str) -> bool:
    """Whether ``typed`` is ``word`` after the slips of fast typing: letters dropped,
    doubled or swapped with a neighbour, within the edits :func:`corrected` allows. A
    replaced letter is not one: it as often makes another word ("cert" and "cent",
    "skim" and "skip", "httpx" and "https")."""
    allowed = 2 if len(typed) >= TWO_EDITS_FROM else 1
    return edit_distance(typed, word, substitution=2) <= allowed


def _speller(bm25: BM25Index) -> Speller:
    with _lock:
        speller = _spellers.get(bm25)
        if speller is None:
            speller = _spellers[bm25] = Speller(bm25)
    return speller


#: The vocabulary by row; the hashes of every term's deletes, sorted; each one's row.
_Table = tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int64]]


class Speller:
    """Nearest vocabulary terms of one BM25 index (see the module docstring)."""

    def __init__(self, bm25: BM25Index) -> None:
        self.vocab = bm25.vocab
        indptr = np.asarray(bm25.indptr, dtype=np.int64)
        self.df: npt.NDArray[np.int64] = indptr[1:] - indptr[:-1]
        self._bm25 = bm25
        self._surfaces: dict[str, Counter[str]] = {}
        # nearest() and slipped() already looked up: one question asks them of a word up
        # to three times (its BM25 terms, the refusal evidence, the embedder's respelling).
        self._nearest: dict[str, str | None] = {}
        self._slipped: dict[str, tuple[str, str] | None] = {}
        # The symmetric-delete table, built by the first nearest-term search: every
        # question reads the speller (the embedder's spelling), few need the table
        # (78 ms for 45,000 terms).
        self._deletes: _Table | None = None
        self._deletes_lock = threading.Lock()

    def _table(self) -> _Table:
        """The vocabulary by row, and every term's deletes (hashed, sorted) with its row."""
        with self._deletes_lock:
            if self._deletes is None:
                keys: list[int] = []
                ids: list[int] = []
                for term, i in self.vocab.items():
                    if len(term) < MIN_LENGTH - 1 or not _WORD.fullmatch(term):
                        continue
                    for variant in _deletes(term):
                        keys.append(hash(variant))
                        ids.append(i)
                key_array = np.array(keys, dtype=np.int64)
                order = np.argsort(key_array, kind="stable")
                terms = sorted(self.vocab, key=self.vocab.__getitem__)
                self._deletes = (terms, key_array[order], np.array(ids, dtype=np.int64)[order])
            return self._deletes

    def correct(self, terms: Sequence[str], mended: Mapping[str, str]) -> list[str]:
        out = list(terms)
        for term in dict.fromkeys(terms):
            if not self.correctable(term):
                continue
            best = mended.get(term) or self.nearest(term)
            if best is not None:
                out.append(best)
        return out

    def correctable(self, term: str) -> bool:
        """An unknown plain word long enough to correct, and neither chat shorthand nor
        a stopword ("whats" stems to "what", which no index holds: it is no typo of
        "chat")."""
        return (
            term not in self.vocab
            and len(term) >= MIN_LENGTH
            and term not in SHORTHAND
            and term not in STOPWORDS
            and bool(_WORD.fullmatch(term))
        )

    def nearest(self, term: str) -> str | None:
        """The closest known term within the allowed edits (ties: the most frequent)."""
        kept = self._nearest.get(term, _UNSEEN)  # one lookup: another thread may clear it
        if kept != _UNSEEN:
            return kept
        best = self._search(term)
        _remember(self._nearest, term, best)
        return best

    def slipped(self, word: str, chunk_text: Callable[[int], str]) -> tuple[str, str] | None:
        """(term, word) of the word the docs write one slip from ``word`` (lower case):
        a letter dropped, added or swapped with its neighbour; the most used term's
        word, ties alphabetical. None if the docs write none."""
        kept = self._slipped.get(word, _UNSEEN)
        if kept != _UNSEEN:
            return None if isinstance(kept, str) else kept
        best: tuple[int, str, str] | None = None
        variants = sorted(_slips(word))
        for variant, term in zip(variants, word_terms(variants), strict=True):
            row = self.vocab.get(term) if term is not None else None
            if row is None or term is None:
                continue
            key = (-int(self.df[row]), term, variant)
            if (best is None or key < best) and variant in self._words(term, chunk_text):
                best = key
        found = (best[1], best[2]) if best is not None else None
        _remember(self._slipped, word, found)
        return found

    def docs_word(self, typed: str, term: str, chunk_text: Callable[[int], str]) -> str:
        """The word the docs write for the unknown ``term`` of the word ``typed``: one
        slip from it (:meth:`slipped`), else the closest of its nearest term's words
        (:meth:`surface`); ``""`` if none."""
        slipped = self.slipped(typed, chunk_text)
        if slipped is not None:
            return slipped[1]
        best = self.nearest(term)
        return self.surface(best, typed, chunk_text) if best else ""

    def written(self, typed: str, term: str, chunk_text: Callable[[int], str]) -> str:
        """For the word ``typed`` of a known ``term`` that the docs never write ("recal",
        whose term the docs' "recall" makes): the most written word of that term one
        slip from it; ``""`` when the docs write ``typed`` or none is."""
        words = self._words(term, chunk_text)
        if typed in words:
            return ""
        near = [v for v in _slips(typed) if v in words]
        return max(near, key=lambda v: (words[v], v), default="")

    def _search(self, term: str) -> str | None:
        allowed = 2 if len(term) >= TWO_EDITS_FROM else 1
        terms, keys, ids = self._table()
        hashes = np.array([hash(v) for v in _deletes(term)], dtype=np.int64)
        lo = np.searchsorted(keys, hashes, side="left")
        hi = np.searchsorted(keys, hashes, side="right")
        candidates: set[int] = set()
        for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
            candidates.update(ids[a:b].tolist())
        best: tuple[int, int, str] | None = None
        for i in candidates:
            known = terms[i]
            if abs(len(known) - len(term)) > allowed:
                continue
            distance = edit_distance(term, known)
            if distance > allowed:
                continue
            key = (distance, -int(self.df[i]), known)
            if best is None or key < best:
                best = key
        return best[2] if best is not None else None

    def surface(self, term: str, typed: str, chunk_text: Callable[[int], str]) -> str:
        """The word the docs write for ``term`` in a few chunks holding it, closest to
        what was ``typed`` (ties: the most frequent; lower case; ``""`` if none)."""
        words = self._words(term, chunk_text)
        return min(words, key=lambda w: (edit_distance(typed, w), -words[w], w), default="")

    def _words(self, term: str, chunk_text: Callable[[int], str]) -> Counter[str]:
        """The words (lower case) that make ``term`` in the first chunks holding it."""
        words = self._surfaces.get(term)
        if words is None:
            row = self.vocab[term]
            start = int(self._bm25.indptr[row])
            end = min(int(self._bm25.indptr[row + 1]), start + _SURFACE_CHUNKS)
            words = Counter()
            for chunk in self._bm25.indices[start:end].tolist():
                for word in _TEXT_WORD.findall(chunk_text(int(chunk))):
                    word = word.lower()
                    # A stem keeps its word's first two letters: the rest need no stemming.
                    if word[:2] == term[:2] and tokenize(word) == [term]:
                        words[word] += 1
            self._surfaces[term] = words  # whole, for other requests' threads
        return words


def _remember(memory: dict[str, Any], key: str, value: Any) -> None:
    if len(memory) >= _KEPT:
        memory.clear()  # readers' typos are many and rarely repeat: start over
    memory[key] = value


def _slips(word: str) -> set[str]:
    """``word`` with one letter dropped, one added (a-z) or two neighbours swapped."""
    out = {word[:i] + word[i + 1 :] for i in range(len(word))}
    out |= {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)}
    out |= {word[:i] + c + word[i:] for i in range(len(word) + 1) for c in _LETTERS}
    out.discard(word)
    return out


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _deletes(term: str) -> set[str]:
    """``term`` and every string one deletion away from it."""
    return {term, *(term[:i] + term[i + 1 :] for i in range(len(term)))}


def edit_distance(a: str, b: str, substitution: int = 1) -> int:
    """Optimal string alignment distance (Levenshtein plus swaps of neighbours);
    ``substitution``: the cost of replacing one letter (2: only insertions, deletions
    and swaps are single edits)."""
    if a == b:
        return 0
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else substitution
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]
