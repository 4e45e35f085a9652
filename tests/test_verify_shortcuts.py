"""The verifier's shortcuts (issue 24: the LLM path's own work) decide as the full checks do.

Each shortcut skips work whose outcome is already known: a passage's terms are the
union of its text's and highlight's, the polarity test cuts only the passages that
could hold a covering clause, and a sentence is embedded only when a check gets as far
as the semantic test.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from anchored_query.citations.checking import Checker
from anchored_query.citations.polarity import passage_clauses, polarity_conflict
from anchored_query.citations.semantic import make_support
from anchored_query.citations.support import content_terms, passage_terms
from anchored_query.citations.verify import ParsedSentence, verify
from anchored_query.types import Passage
from hypothesis import given, settings
from hypothesis import strategies as st
from passages import make_passage
from test_support import labelled

from build_index.embedder import Embedder, get_model


def labelled_context() -> tuple[dict[int, Passage], list[str]]:
    """Every labelled passage as one context, and every labelled sentence."""
    rows = labelled()
    texts = list(dict.fromkeys(p.text for _, p, _ in rows))
    first = {p.text: p for _, p, _ in reversed(rows)}
    passages = {n: replace(first[t], n=n) for n, t in enumerate(texts, 1)}
    return passages, [sentence for sentence, _, _ in rows]


def denied(sentence: str) -> str:
    """The sentence with its first verb phrase negated (to make the test find conflicts)."""
    for verb in (" is ", " are ", " can ", " has ", " uses "):
        if verb in sentence:
            return sentence.replace(verb, verb.rstrip() + " not ", 1)
    return "It is not true that " + sentence


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.characters(codec=None), max_size=120),
    st.text(alphabet=st.characters(codec=None), max_size=120),
)
def test_a_passages_terms_are_its_texts_and_its_highlights(text: str, highlight: str) -> None:
    # Checker.terms reads the two apart (each cached across requests); the check
    # compares them with what it compared before: the terms of the two joined by a line.
    assert passage_terms(text) | passage_terms(highlight) == content_terms(text + "\n" + highlight)


def test_polarity_over_the_candidate_passages_is_polarity_over_every_passage() -> None:
    passages, sentences = labelled_context()
    assert len(passages) >= 20
    every = passage_clauses(list(passages.values()))
    checker = Checker(passages, None)
    asked = [*sentences, *(denied(s) for s in sentences)]
    verdicts = [(checker.polarity(s), polarity_conflict(s, every)) for s in asked]
    assert all(short == full for short, full in verdicts)
    assert sum(full is not None for _, full in verdicts) >= 3  # the test sees conflicts


class CountingEmbedder:
    """The real embedder, counting its model runs."""

    def __init__(self) -> None:
        self.inner = Embedder(get_model("all-MiniLM-L6-v2"))
        self.batches: list[int] = []

    def embed_query(self, text: str) -> Any:
        self.batches.append(1)
        return self.inner.embed_query(text)

    def embed_queries(self, texts: list[str]) -> Any:
        self.batches.append(len(texts))
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: list[str]) -> Any:
        return self.inner.embed_passages(texts)


PORT = make_passage(
    "The development server listens on port 8000 by default.\n"
    "Use the --dev-addr option to listen on another address.",
    highlight="The development server listens on port 8000 by default.",
)


def test_no_sentence_is_embedded_when_no_check_reaches_the_semantic_test() -> None:
    embedder = CountingEmbedder()
    support = make_support(embedder, "all-MiniLM-L6-v2")
    reply = [
        ParsedSentence("Bananas ripen faster beside apples.", [1]),
        ParsedSentence("Tomatoes bruise easily in transport.", [1]),
    ]
    result = verify(reply, {1: PORT}, support=support)
    assert not any(s.supported for s in result.sentences)
    assert embedder.batches == []


def test_the_sentences_are_embedded_in_one_batch_when_one_needs_it() -> None:
    embedder = CountingEmbedder()
    support = make_support(embedder, "all-MiniLM-L6-v2")
    reply = [
        ParsedSentence("The development server listens on port 8000 by default.", [1]),
        ParsedSentence("Use the --dev-addr option to listen on another address.", [1]),
        ParsedSentence("Bananas ripen faster beside apples.", [1]),
    ]
    result = verify(reply, {1: PORT}, support=support)
    assert [s.supported for s in result.sentences][:2] == [True, True]
    assert embedder.batches == [3]  # one model run, every sentence in it


def test_a_search_of_the_context_does_not_embed_what_cannot_reach_its_stricter_bar() -> None:
    # An uncited sentence is looked for in every passage under the stricter bar (0.8):
    # with half its terms found, even a perfect semantic score gives 0.6 * 0.5 + 0.4.
    embedder = CountingEmbedder()
    support = make_support(embedder, "all-MiniLM-L6-v2")
    reply = [
        ParsedSentence("The server ripens.", []),
        ParsedSentence("Bananas ripen faster beside apples.", []),
    ]
    result = verify(reply, {1: PORT}, support=support)
    assert not any(s.supported for s in result.sentences)
    assert embedder.batches == []
