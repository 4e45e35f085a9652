"""The one BM25 tokenizer, shared by the index build and the query function.

``tokenize(text)`` turns text into search terms:

* Unicode NFKC normalisation, then ``casefold()`` (so ``Ｍｋｄｏｃｓ`` and
  ``MKDOCS`` both become ``mkdocs``);
* identifiers stay searchable: a compound such as ``use_directory_urls``,
  ``mkdocs.yml``, ``--dev-addr`` or ``v1.2.3`` yields the whole identifier
  (exact, unstemmed, without leading sigils like ``--`` or ``#``) *and* its
  parts (stemmed), so the query ``directory urls`` finds it and the query
  ``use_directory_urls`` scores it higher still; ``CamelCase`` yields the word
  (stemmed, so ``MkDocs`` matches ``mkdocs``) and its parts;
* English words lose a ~150-word stopword list and are stemmed with the
  Snowball English (Porter2) stemmer (PyStemmer, C);
* Chinese, Japanese and Korean need no dictionary: every Han/Kana/Hangul run
  becomes overlapping character bigrams (a 1-character run stays as is).

``TOKENIZER_SETTINGS`` names this behaviour; the index manifest records it and
the reader refuses an index whose settings differ from the running code's,
because query terms must be made exactly like the indexed ones.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from typing import Final

import Stemmer

__all__ = ["STOPWORDS", "TOKENIZER_SETTINGS", "tokenize", "word_terms"]

# The common English function words (NLTK-style list, ~150), plus the fragments
# that apostrophes leave behind ("don't" -> "don", "t"; "user's" -> "user", "s").
_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because
    been before being below between both but by can could did do does doing down
    during each either etc few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just may me
    might more most must my myself neither no nor not of off on once only or other
    ought our ours ourselves out over own same shall she should so some such than
    that the their theirs them themselves then there these they this those
    through to too under until up upon us very via was we were what whatever when
    where whether which while who whom whose why will with within without would
    yet you your yours yourself yourselves e.g i.e
    s t d ll m re ve o y don doesn didn isn aren wasn weren hasn haven hadn won
    wouldn shouldn couldn mustn needn shan mightn ain
"""
STOPWORDS: Final[frozenset[str]] = frozenset(_STOPWORD_TEXT.split())

_MAX_TOKEN_LEN: Final = 64  # longer runs are blobs (hashes, base64, minified code)
_STEM_MIN_LEN: Final = 3
_CACHE_MAX: Final = 100_000

TOKENIZER_SETTINGS: Final[dict[str, object]] = {
    "name": "anchored-v1",
    "normalization": "NFKC+casefold",
    "identifiers": "whole+parts",
    "stemmer": "snowball-english",
    "stem_min_len": _STEM_MIN_LEN,
    "stopwords": "en-{}-{}".format(
        len(STOPWORDS),
        hashlib.sha256(" ".join(sorted(STOPWORDS)).encode()).hexdigest()[:8],
    ),
    "cjk": "bigrams",
    "max_token_len": _MAX_TOKEN_LEN,
}

# Han (incl. extension A, compatibility, supplementary planes), the iteration
# marks 々〆〇, Hiragana, Katakana (without the ・ separator), Hangul.
_CJK = (
    "\u3005-\u3007\u3040-\u309f\u30a0-\u30fa\u30fc-\u30ff\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
    "\U00020000-\U0002ffff"
)


def _combining_marks() -> str:
    """Character-class ranges of the combining marks (Mn, Mc, Me) in the BMP.

    Python's ``\\w`` excludes them, which would cut Devanagari or pointed
    Hebrew words apart at every vowel sign.
    """
    marks = [c for c in range(0x10000) if unicodedata.category(chr(c)) in ("Mn", "Mc", "Me")]
    ranges: list[str] = []
    start = prev = marks[0]
    for c in [*marks[1:], -1]:
        if c == prev + 1:
            prev = c
            continue
        ranges.append(f"\\u{start:04x}" if start == prev else f"\\u{start:04x}-\\u{prev:04x}")
        start = prev = c
    return "".join(ranges) + "\u200c\u200d"  # and the zero-width (non-)joiner


# A word: letters/digits of any non-CJK script, combining marks allowed inside.
_LETTERS = rf"[^\W_{_CJK}]"
_WORD = rf"{_LETTERS}+(?:[{_combining_marks()}]+{_LETTERS}*)*"
# A compound: words joined by _ . - / (a trailing ++ or # keeps C++ and C#).
_CONNECTOR = r"(?:_+|[./\-])"
# No capture groups (findall then returns plain strings, ~25% faster); a CJK
# run is told apart by its first character.
_TOKEN_RE: Final = re.compile(rf"[{_CJK}]+|{_WORD}(?:{_CONNECTOR}{_WORD})*(?:\+\+|#(?![\w#]))?")
_IS_CJK: Final = re.compile(f"[{_CJK}]").match
_CONNECTOR_RE: Final = re.compile(_CONNECTOR)
# camelCase / PascalCase / HTMLParser / base64Encode boundaries; "URLs" stays one.
_CAMEL_RE: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2})")
_HAS_CAMEL_RE: Final = re.compile(r"[a-z0-9][A-Z]|[A-Z][A-Z][a-z]{2}")

_stemmer = Stemmer.Stemmer("english")
# raw compound (case kept) -> its tokens; cleared when full (Zipf: refills fast).
_cache: dict[str, tuple[str, ...]] = {}


def _term(word: str) -> str | None:
    """Casefold, drop stopwords and blobs, stem an ASCII word."""
    if word in STOPWORDS or len(word) > _MAX_TOKEN_LEN:
        return None
    if len(word) >= _STEM_MIN_LEN and word.isascii() and word.isalpha():
        return str(_stemmer.stemWord(word))
    return word


def word_terms(words: Sequence[str]) -> list[str | None]:
    """The term of each plain lower-case ASCII word, as :func:`tokenize` gives it for
    the word alone (None: a stopword), stemmed in one call; for many candidate words
    at once (the speller's), without filling the tokenizer's cache."""
    out: list[str | None] = []
    stem: list[int] = []
    for word in words:
        if word in STOPWORDS or len(word) > _MAX_TOKEN_LEN:
            out.append(None)
        else:
            if len(word) >= _STEM_MIN_LEN:
                stem.append(len(out))
            out.append(word)
    for i, term in zip(stem, _stemmer.stemWords([out[i] for i in stem]), strict=True):
        out[i] = str(term)
    return out


def _analyze(raw: str) -> tuple[str, ...]:
    """The tokens of one compound as matched by ``_TOKEN_RE``.

    Three levels: the whole compound if it has connectors (exact, unstemmed),
    each connector-separated piece as a word (stemmed), and the parts of a
    CamelCase piece (stemmed). So ``MkDocs`` gives ``mkdoc`` like ``mkdocs``
    does, plus ``mk`` and ``doc``.
    """
    suffix = ""
    if raw.endswith("++"):
        raw, suffix = raw[:-2], "++"
    elif raw.endswith("#"):
        raw, suffix = raw[:-1], "#"
    pieces = _CONNECTOR_RE.split(raw)
    tokens: list[str] = []
    if len(pieces) > 1 or suffix:
        whole = (raw + suffix).casefold()
        if whole in STOPWORDS:  # e.g., i.e.
            return ()
        if len(whole) <= _MAX_TOKEN_LEN:
            tokens.append(whole)
    for piece in pieces:
        term = _term(piece.casefold())
        if term:
            tokens.append(term)
        if _HAS_CAMEL_RE.search(piece):
            for part in _CAMEL_RE.split(piece):
                term = _term(part.casefold())
                if term:
                    tokens.append(term)
    return tuple(tokens)


def tokenize(text: str) -> list[str]:
    """Split ``text`` into BM25 terms (see the module docstring for the rules).

    Never raises on any ``str``; every term is a non-empty string. The same
    function serves documents and queries. A query's repeated terms are kept
    (BM25 counts each occurrence, like bm25s).
    """
    if not text:
        return []
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    cache = _cache
    for raw in _TOKEN_RE.findall(text):
        tokens = cache.get(raw)
        if tokens is None:
            if _IS_CJK(raw):  # runs are rarely repeated: not cached
                if len(raw) == 1:
                    out.append(raw)
                else:
                    out.extend([raw[i : i + 2] for i in range(len(raw) - 1)])
                continue
            tokens = _analyze(raw)
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            cache[raw] = tokens
        out.extend(tokens)
    return out
