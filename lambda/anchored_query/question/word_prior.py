"""How specific a question word is in the language at large, from the embedder's vocabulary.

The index's IDF says how rare a word is *on this site*; a long question's
context words ("supported", "yesterday", "migrated") are often rare there
too and then outweigh the word that asks ("providers", ``ReadTimeout``). A
general-language prior tells them apart, and the index already ships one:
the embedding model's tokenizer vocabulary. Its whole words come roughly in
order of frequency in the text the tokenizer was trained on (a WordPiece
vocabulary in the order its pieces were learnt, most frequent first; a
Unigram / SentencePiece vocabulary with each piece's log probability), so a
word's rank among them is a Zipf estimate of its general frequency:
``log(rank)`` grows like its general IDF.

:func:`prior` maps that to a factor in [:data:`FLOOR`, 1]: 1 for a word the
vocabulary does not hold whole (an identifier, a product name, a misspelling
— the specific words), falling linearly in ``log(rank)`` from rank
:data:`SPECIFIC_RANK` down to :data:`FLOOR` at rank :data:`COMMON_RANK`. It
multiplies the index's IDF of the word's terms in the extractive answerer's
weights. Nothing here knows English; a multilingual model's vocabulary gives
the same for its languages.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from build_index.tokenizer import tokenize

__all__ = ["COMMON_RANK", "FLOOR", "SPECIFIC_RANK", "WordPrior", "term_priors", "word_prior"]

COMMON_RANK: Final = 300  # at or above this frequency rank a word gets FLOOR
SPECIFIC_RANK: Final = 20_000  # below this frequency rank a word counts fully
FLOOR: Final = 0.25
_WORD = re.compile(r"[^\W\d_]{2,}")
_EDGE = "\"'`.,;:!?()[]{}<>«»“”‘’*"
_SPIECE = "\u2581"  # SentencePiece's word-start mark

_lock = threading.Lock()
_priors: dict[Path, WordPrior] = {}  # by model folder
_by_content: dict[str, WordPrior] = {}  # by the sha256 of tokenizer.json: builds share one


class WordPrior:
    """Frequency ranks of the whole words of one tokenizer vocabulary."""

    def __init__(self, ranks: dict[str, int]) -> None:
        self.ranks = ranks
        self._lo = math.log(COMMON_RANK)
        self._span = math.log(SPECIFIC_RANK) - self._lo

    @classmethod
    def from_tokenizer(cls, path: Path) -> WordPrior:
        """Read a Hugging Face ``tokenizer.json`` (WordPiece or Unigram); empty if neither."""
        try:
            return cls.from_json(path.read_bytes())
        except OSError:
            return cls({})

    @classmethod
    def from_json(cls, raw: bytes) -> WordPrior:
        """The prior of a ``tokenizer.json``'s bytes; empty if they are neither vocabulary."""
        try:
            model: dict[str, Any] = json.loads(raw).get("model") or {}
        except ValueError:
            return cls({})
        vocab = model.get("vocab")
        words: list[str] = []
        if isinstance(vocab, dict):  # WordPiece / BPE: piece -> id, learnt in order
            words = sorted(vocab, key=vocab.__getitem__)
        elif isinstance(vocab, list):  # Unigram: [piece, log probability]
            scored = [(str(p[0]), float(p[1])) for p in vocab if isinstance(p, list) and p]
            words = [
                w[1:] for w, _ in sorted(scored, key=lambda ps: -ps[1]) if w.startswith(_SPIECE)
            ]
        # Each whole word's first place, lowercased (a question's words are looked up so);
        # map/filter/dict.fromkeys keep the loop over ~30k pieces out of Python bytecode.
        whole = dict.fromkeys(filter(_WORD.fullmatch, map(str.lower, words)))
        return cls({w: rank for rank, w in enumerate(whole, start=1)})

    def holds(self, word: str) -> bool:
        """Whether the vocabulary holds ``word`` whole: a word of the language, not a
        misspelling or an identifier the tokenizer splits into pieces."""
        return word.lower() in self.ranks

    def prior(self, word: str) -> float:
        """The factor of the module docstring for one word as the reader typed it."""
        rank = self.ranks.get(word.lower())
        if rank is None:
            return 1.0
        x = (math.log(rank) - self._lo) / self._span
        return FLOOR + (1.0 - FLOOR) * min(1.0, max(0.0, x))


def word_prior(model_dir: Path) -> WordPrior:
    """The prior of the model in ``model_dir`` (its ``tokenizer.json``), read once per
    folder and made once per tokenizer: a new build or another version of the same
    model costs a read and a hash (the engine calls this when it loads an index)."""
    key = model_dir.resolve()
    with _lock:
        found = _priors.get(key)
        if found is None:
            found = _priors[key] = _by_tokenizer(key / "tokenizer.json")
    return found


def _by_tokenizer(path: Path) -> WordPrior:
    try:
        raw = path.read_bytes()
    except OSError:
        return WordPrior({})
    digest = hashlib.sha256(raw).hexdigest()
    found = _by_content.get(digest)
    if found is None:
        found = _by_content[digest] = WordPrior.from_json(raw)
    return found


def term_priors(
    text: str,
    prior: WordPrior | None,
    tokens: Callable[[str], Sequence[str]] = tokenize,
) -> dict[str, float]:
    """Each search term of ``text`` (as :func:`tokenize` makes it) -> the prior of the
    word it came from (the highest, if several words make it); empty without a prior.
    ``tokens``: the tokenizer (an analysed question's, which tokenizes a word once)."""
    out: dict[str, float] = {}
    if prior is None or not prior.ranks:
        return out
    for raw in text.split():
        word = raw.strip(_EDGE)
        value = prior.prior(word) if _WORD.fullmatch(word) else 1.0
        for term in tokens(word):
            out[term] = max(out.get(term, 0.0), value)
    return out
