"""The reader's language on a multilingual site (mkdocs-static-i18n and the like).

Each chunk records its page's language (``lang`` in ``chunks.jsonl``). A
request names the reader's language (``"lang"``: the page's
``<html lang>``, which the ask box sends) and may include the others
(``"other_languages": true``).

* **Reader's pages first.** Retrieval searches the chunks of the reader's
  language (an exact tag, else the same primary subtag: ``zh-CN`` reads
  ``zh``), plus chunks of no known language.
* **Another language only when the reader's pages do not answer.** Whether
  pages answer is decided by the evidence the extractive refusal uses
  (:mod:`anchored_query.retrieval.evidence`, gathered over those pages only): the
  extractive answerer is run on the reader's pages, and when it refuses, on
  the other languages' pages; when those answer, the answer comes from them
  and says so (``other_language``, ``note``). When neither answers, the
  refusal shows the reader's own closest sections.
* **Unchanged** without ``lang``, with an index that records no languages,
  and on a site whose pages are all in the reader's language.

A Chinese question searched on pages in a language not written in CJK is
glossed through CC-CEDICT (:mod:`anchored_query.question.crosslingual`), as on an
English-only index.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from anchored_query.answer.extractive import answer_extractively
from anchored_query.question.analysis import Question
from anchored_query.retrieval.ranking import Ranking, Retriever
from anchored_query.types import Passage, Scope, Turn

__all__ = [
    "LanguageChoice",
    "annotate",
    "index_languages",
    "language_name",
    "normalize",
    "rank_for_reader",
    "reader_languages",
]

# English names of common documentation languages (the note's wording); others by tag.
NAMES: Final = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "fa": "Persian", "fi": "Finnish", "fr": "French",
    "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian",
    "ja": "Japanese", "ko": "Korean", "nb": "Norwegian", "nl": "Dutch", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "th": "Thai",
    "tr": "Turkish", "uk": "Ukrainian", "vi": "Vietnamese", "zh": "Chinese",
}  # fmt: skip
_TAG: Final = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{1,8}){0,3}")
_languages: weakref.WeakKeyDictionary[Retriever, tuple[str, ...]] = weakref.WeakKeyDictionary()

#: ``answers(hits, langs)``: whether these hits (searched in ``langs``) answer.
Decide = Callable[[Ranking, tuple[str, ...]], bool]


@dataclass(frozen=True)
class LanguageChoice:
    """Which pages an answer was looked for in.

    ``reader``: the reader's language as sent (``""``: none); ``own``: the
    index's languages that are the reader's; ``searched``: the languages the
    hits come from (``()``: all); ``other``: the reader's pages did not answer
    and the hits come from the other languages.
    """

    reader: str = ""
    own: tuple[str, ...] = ()
    searched: tuple[str, ...] = ()
    other: bool = False


def normalize(tag: str) -> str:
    """A language tag as chunks record it: lower case, ``-`` (``zh_CN`` -> ``zh-cn``);
    ``""`` for anything that is not a tag."""
    tag = tag.strip().lower().replace("_", "-")
    return tag if _TAG.fullmatch(tag) else ""


def index_languages(retriever: Retriever) -> tuple[str, ...]:
    """The languages the index's chunks record, sorted (once per loaded build)."""
    found = _languages.get(retriever)
    if found is None:
        found = tuple(sorted(str(t) for t in np.unique(retriever.langs) if t))
        _languages[retriever] = found
    return found


def reader_languages(reader: str, available: Sequence[str]) -> tuple[str, ...]:
    """The index's languages that are the reader's: the exact tag, else those with
    the same primary subtag (``zh-cn`` reads ``zh`` and ``zh-tw``)."""
    if reader in available:
        return (reader,)
    primary = reader.split("-", 1)[0]
    return tuple(t for t in available if t.split("-", 1)[0] == primary)


def language_name(tag: str) -> str:
    """``Chinese`` for ``zh`` / ``zh-cn``; the tag itself when the name is not known."""
    return NAMES.get(tag.split("-", 1)[0], tag)


def rank_for_reader(
    retriever: Retriever,
    variants: Sequence[str],
    scope: Scope,
    reader: str,
    other_languages: bool,
    answers: Decide,
    depth: int | None = None,
    analysed: Question | None = None,
) -> tuple[Ranking, LanguageChoice]:
    """Hits for the reader (see the module docstring) and where they come from;
    ``analysed``: the question analysed once, which every ranking reads."""
    a = analysed
    available = index_languages(retriever) if reader else ()
    if not available:
        return retriever.rank(variants, scope, depth, analysed=a), LanguageChoice(reader=reader)
    own = reader_languages(reader, available)
    if other_languages or set(own) == set(available):
        return retriever.rank(variants, scope, depth, analysed=a), LanguageChoice(reader, own)
    others = tuple(t for t in available if t not in own)
    if own:
        hits = retriever.rank(variants, scope, depth, langs=own, analysed=a)
        if answers(hits, own):
            return hits, LanguageChoice(reader, own, own)
    elsewhere = retriever.rank(variants, scope, depth, langs=others, analysed=a)
    if not own or answers(elsewhere, others):
        return elsewhere, LanguageChoice(reader, own, others, other=True)
    return hits, LanguageChoice(reader, own, own)


def extractive_decider(
    retriever: Retriever,
    question: str,
    scope: Scope,
    passages_for: Callable[[Ranking], list[Passage]],
    history: Sequence[Turn] = (),
    analysed: Question | None = None,
) -> Decide:
    """``answers``: the extractive answerer does not refuse on these hits, its evidence
    gathered over the chunks searched (the same decision as its refusal; ``history``
    resolves a follow-up as there).

    For a CJK question (not glossed) with an embedder that does not place it near
    its own English gloss (all-MiniLM-L6-v2 is English-only: it finds any Chinese
    text about as close to any Chinese question), the dense signals are noise and
    the answerer's lexical-only model decides
    (:func:`anchored_query.question.crosslingual.dense_is_noise`), as in the final answer.
    """
    index = retriever.index
    model = str(index.manifest["model"]["name"])

    def answers(hits: Ranking, langs: tuple[str, ...]) -> bool:
        text = hits.gloss or question
        result = answer_extractively(
            text,
            passages_for(hits),
            index=index,
            embedder=retriever.embedder,
            model=model,
            question_vector=hits.query_vector,
            similarity=hits.best_similarity,
            mask=retriever.mask(scope, langs),
            history=history,
            asked=question if hits.gloss else "",
            analysed=analysed,
        )
        hits.decided = (langs, result)
        return not result.abstained

    return answers


def annotate(result: dict[str, Any], choice: LanguageChoice, retriever: Retriever) -> None:
    """Each citation's ``lang``; with a reader's language, ``lang``, ``other_language``,
    ``answer_languages`` and a reader-facing ``note`` when the cited pages are in
    another language than the reader's."""
    if not index_languages(retriever):
        return
    chunks = retriever.index.chunks
    cited: list[str] = []
    for citation in result.get("citations", []):
        try:
            lang = str(retriever.langs[chunks.row_of(str(citation.get("chunk_id")))])
        except KeyError:
            continue
        if lang:
            citation["lang"] = lang
            if lang not in cited:
                cited.append(lang)
    if not choice.reader:
        return
    result["lang"] = choice.reader
    foreign = [t for t in cited if t not in choice.own]
    answered = not result.get("abstained") and bool(result.get("answer"))
    result["other_language"] = bool(answered and foreign)
    result["answer_languages"] = sorted(cited)
    if answered and foreign:
        names = " and ".join(dict.fromkeys(language_name(t) for t in foreign))
        if choice.other:
            mine = language_name(choice.reader)
            result["note"] = (
                f"No page in {mine} answers this question, so this answer comes from "
                f"the {names} pages."
            )
        elif len(foreign) == len(cited):
            result["note"] = f"This answer comes from the {names} pages."
        else:
            result["note"] = f"This answer also cites pages in {names}."
