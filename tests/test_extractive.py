"""The no-LLM answerer: a quote of the passage that holds the answer, with its structure.

A small site of rendered HTML pages is indexed once with the real pipeline
(chunker, BM25, the shipped embedding model), retrieved from as ``/v1/ask``
does, and answered by ``engine.answer_extractive``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anchored_query.answer.extractive import (
    ExtractiveResult,
    Quote,
    _without_repeats,
    answer_extractively,
)
from anchored_query.answer.prompt import estimate_tokens
from anchored_query.citations.units import guess_language, render, section_units
from anchored_query.engine import EXTRACTIVE_PASSAGES, answer_extractive
from anchored_query.question import spelling
from anchored_query.question.spelling import (
    Speller,
    corrected,
    edit_distance,
    known_terms,
    mended,
    respelled,
)
from anchored_query.question.word_prior import WordPrior, term_priors, word_prior
from anchored_query.retrieval.evidence import SURE, gather_evidence
from anchored_query.retrieval.pointers import named_headings
from anchored_query.retrieval.ranking import Ranking, Retriever
from anchored_query.types import Passage, Turn

from build_index.embedder import Embedder, ModelSpec
from build_index.index_format import read_index
from build_index.pipeline import BuildConfig, build
from build_index.tokenizer import tokenize
from build_index.types import PageInput

PAGES = {
    "timeouts/": """
<h1 id="timeouts">Timeouts</h1>
<p>HTTPX is careful to enforce timeouts everywhere by default.</p>
<p>The default behavior is to raise a TimeoutException after 5 seconds of network inactivity.</p>
<h2 id="setting-and-disabling-timeouts">Setting and disabling timeouts</h2>
<p>You can set timeouts for an individual request:</p>
<pre><code class="language-python"># Using the top-level API:
httpx.get('http://example.com/api/v1/example', timeout=10.0)
</code></pre>
<p>Or disable timeouts for an individual request:</p>
<pre><code class="language-python">httpx.get('http://example.com/api/v1/example', timeout=None)
</code></pre>
""",
    "http2/": """
<h1 id="http2">HTTP/2</h1>
<p>HTTP/2 is a major new iteration of the HTTP protocol that provides a far more efficient
transport, with potential performance benefits.</p>
<h2 id="enabling-http2">Enabling HTTP/2</h2>
<p>When using the httpx client, HTTP/2 support is not enabled by default, because HTTP/1.1
is a mature, battle-hardened transport layer.</p>
<p>In order to enable HTTP/2 support you first need to install the optional dependencies:</p>
<pre><code class="language-bash">pip install httpx[http2]
</code></pre>
<p>And then instantiating a client with HTTP/2 support enabled:</p>
<pre><code class="language-python">client = httpx.AsyncClient(http2=True)
</code></pre>
""",
    "configuration/": """
<h1 id="configuration">Configuration</h1>
<p>All settings live in mkdocs.yml under the plugin's name.</p>
<h2 id="dev_addr">dev_addr</h2>
<p>Determines the address used when running mkdocs serve. Must be of the format
IP:PORT.</p>
<p>Allows a custom default to be set without the need to pass it through the --dev-addr
option every time the mkdocs serve command is called.</p>
<p><strong>default</strong>: <code>'127.0.0.1:8000'</code></p>
<h2 id="ask-box-options">Ask box options</h2>
<p>These options change the ask box that every page shows.</p>
<table>
<thead><tr><th>option</th><th>default</th><th>meaning</th></tr></thead>
<tbody>
<tr><td>widget_title</td><td>Ask the docs</td><td>Title of the dialog.</td></tr>
<tr><td>widget_placeholder</td><td>Ask a question</td><td>Placeholder text of the question
field.</td></tr>
<tr><td>widget_shortcut</td><td>/</td><td>Key that opens the dialog.</td></tr>
<tr><td>widget_starters</td><td>[]</td><td>Starter questions shown before the first
question.</td></tr>
</tbody>
</table>
<h2 id="rate-limits">Rate limits</h2>
<p>Each client may send 30 questions a minute; beyond that the API answers 429.</p>
<p>To change the limit, set ANCHORED_RATE_LIMIT_PER_MIN in the function's environment.</p>
""",
    "deploy/": """
<h1 id="deploy">Deploy</h1>
<p>The site is published to GitHub Pages with mkdocs gh-deploy.</p>
<p>Run this from the project folder:</p>
<pre><code class="language-bash">mkdocs gh-deploy --force
</code></pre>
""",
}


def _page(url: str, body: str) -> PageInput:
    html = f"<html><body><main>{body}</main></body></html>"
    return PageInput(url=url, html=html, title=url.strip("/").title() or "Home")


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    out = tmp_path_factory.mktemp("extractive-index")
    pages = [_page(url, body) for url, body in PAGES.items()]
    build(pages, out, BuildConfig(cache_dir=tmp_path_factory.mktemp("embed-cache")))
    index = read_index(Path(out))
    return Retriever(index, Embedder(ModelSpec.from_dir(index.model_dir)))


def retrieved(retriever: Retriever, variants: list[str]) -> tuple[Ranking, list[Passage]]:
    """The ranking and passages the extractive ``/v1/ask`` answers from."""
    hits = retriever.rank(variants)
    passages = retriever.passages(
        hits, token_budget=4000, max_passages=EXTRACTIVE_PASSAGES, estimate_tokens=estimate_tokens
    )
    return hits, passages


def ask(retriever: Retriever, question: str, history: list[Turn] | None = None) -> dict[str, Any]:
    history = history or []
    earlier = [t.content for t in history if t.role == "user"][-1:]
    hits, passages = retrieved(retriever, [question, *(f"{q} {question}" for q in earlier)])
    return answer_extractive(
        question,
        passages,
        similarity=hits.best_similarity,
        model=retriever.index.manifest["model"]["name"],
        embedder=retriever.embedder,
        question_vector=hits.query_vector,
        index=retriever.index,
        history=history,
    )


Unknown = Callable[..., float]


@pytest.fixture
def unknown(retriever: Retriever) -> Unknown:
    """``unknown(text, focus=, prior=)``: the share of ``text``'s terms the index lacks."""

    def measure(text: str, *, focus: str | None = None, prior: WordPrior | None = None) -> float:
        evidence = gather_evidence(
            text,
            {},
            index=retriever.index,
            question_vector=None,
            similarity=None,
            best_lexical=0.0,
            best_cosine=None,
            focus=focus,
            prior=prior,
        )
        return evidence.unknown

    return measure


def text_of(payload: dict[str, Any]) -> str:
    return "\n".join(item["text"] for item in payload["answer"])


def first_url(payload: dict[str, Any]) -> str:
    return str(payload["citations"][0]["url"])


def test_a_lead_in_with_a_colon_brings_its_code_block_as_a_fenced_block(
    retriever: Retriever,
) -> None:
    payload = ask(retriever, "How do I set a timeout for a single request?")
    assert not payload["abstained"]
    assert first_url(payload) == "timeouts/#setting-and-disabling-timeouts"
    texts = [item["text"] for item in payload["answer"]]
    code = [t for t in texts if t.startswith("```")]
    assert code, texts
    assert code[0].startswith("```python\n") and code[0].endswith("\n```")
    assert "timeout=10.0" in code[0]
    lead = texts.index(code[0]) - 1
    assert lead >= 0 and texts[lead].endswith(":")


def test_the_highlight_covers_the_quoted_text(retriever: Retriever) -> None:
    payload = ask(retriever, "How do I enable HTTP/2 in the client?")
    assert not payload["abstained"]
    citation = payload["citations"][0]
    assert citation["url"] == "http2/#enabling-http2"
    highlight = citation["highlight"]
    assert "http2=True" in text_of(payload)
    assert "http2=True" in highlight
    section = retriever.index.sections["http2/#enabling-http2"]["text"]
    assert highlight in " ".join(section.split())  # exact visible text of the page
    for item in payload["answer"]:
        assert item["citations"] == [1]


def test_an_options_section_brings_its_default_line(retriever: Retriever) -> None:
    payload = ask(retriever, "Which address does mkdocs serve listen on, and can I change it?")
    assert not payload["abstained"]
    assert first_url(payload) == "configuration/#dev_addr"
    assert "'127.0.0.1:8000'" in text_of(payload)


def test_a_table_row_comes_as_a_table_with_its_header_and_only_the_rows_that_match(
    retriever: Retriever,
) -> None:
    payload = ask(retriever, "How do I change the keyboard shortcut that opens the dialog?")
    assert not payload["abstained"]
    rows = [i["text"] for i in payload["answer"] if "widget_shortcut" in i["text"]]
    assert rows, text_of(payload)
    lines = rows[0].split("\n")
    assert lines[:2] == ["| option | default | meaning |", "|---|---|---|"], rows[0]
    assert lines[2].startswith("| widget_shortcut | / | Key that opens"), rows[0]
    # The other options' rows of the same short section are not the answer.
    assert len(lines) == 3 and "widget_title" not in rows[0], rows[0]
    assert "option: " not in text_of(payload)  # never "name: value; …" prose


def test_refuses_an_off_topic_question_and_names_the_closest_sections(
    retriever: Retriever,
) -> None:
    payload = ask(retriever, "What is the best recipe for sourdough bread with rye flour?")
    assert payload["abstained"]
    assert payload["answer"] == []
    assert payload["citations"], "a refusal still lists the closest sections"


def quoted(retriever: Retriever, question: str) -> ExtractiveResult:
    """The answerer's result for ``question``, never refused (what it would quote)."""
    hits, passages = retrieved(retriever, [question])
    return answer_extractively(
        question,
        passages,
        index=retriever.index,
        embedder=retriever.embedder,
        model=retriever.index.manifest["model"]["name"],
        question_vector=hits.query_vector,
        similarity=hits.best_similarity,
        min_confidence=0.0,
    )


def test_an_answer_under_the_sure_probability_is_tentative(retriever: Retriever) -> None:
    sure = SURE[retriever.index.manifest["model"]["name"]]
    weak = quoted(retriever, "What is the best recipe for sourdough bread with rye flour?")
    strong = quoted(retriever, "What is the default of dev_addr when running mkdocs serve?")
    assert not weak.abstained and weak.confidence < sure and weak.tentative
    assert not strong.abstained and strong.confidence >= sure and not strong.tentative
    assert ask(retriever, "What is the default of dev_addr?")["tentative"] is False


def test_unknown_terms_are_counted_in_the_asking_sentence_only(unknown: Unknown) -> None:
    question = (
        "Our zorblax gateway frobnicates quuxworks traffic. How do I set a timeout per request?"
    )
    assert unknown(question) >= 0.3  # the context sentence's words are not the docs'
    assert unknown(question, focus="How do I set a timeout per request?") == 0.0
    assert unknown("whats the timeout per request") == 0.0  # "whats" stems to a stopword
    assert unknown("how do i set a timout per requst") == 0.0  # the index's spelling fixes them
    # Chat shorthand stands for common words, never for a term the docs lack.
    assert unknown("hw do i set a timeout per request pls") == 0.0
    assert unknown("hw do i set a frobnicator per request") > 0.0  # a real unknown still counts


def test_typos_are_corrected_against_the_index_vocabulary(retriever: Retriever) -> None:
    right = ask(retriever, "How do I change the placeholder text of the question field?")
    typo = ask(retriever, "how do i change the plaeholder text of the questoin feild")
    shorthand = ask(retriever, "hw do i confgure the placholder text of the question box")
    assert not right["abstained"] and not typo["abstained"] and not shorthand["abstained"]
    assert "widget_placeholder" in text_of(shorthand)
    assert "widget_placeholder" in text_of(right)
    assert "widget_placeholder" in text_of(typo)


def test_the_embedder_reads_a_misspelt_question_in_the_docs_spelling(retriever: Retriever) -> None:
    # BM25 gets the corrected terms; the embedder gets the words the docs write for them,
    # closest to what was typed. Words of the language the docs never use are left alone,
    # and so is chat shorthand ("cant" is no typo of a word the docs hold).
    index = retriever.index
    prior = word_prior(index.model_dir)

    def spelt(text: str) -> str:
        return respelled(index.bm25, text, lambda row: str(index.chunks[row]["text"]), prior.holds)

    assert spelt("how do i set the plaeholder of the questoin and the timout") == (
        "how do i set the placeholder of the question and the timeout"
    )
    assert spelt("i cant use React for the placeholder") == "i cant use React for the placeholder"
    # A replaced letter as often makes another word ("cert" / "cent"): BM25 gets the
    # correction, the embedder the word as typed.
    assert spelt("set the timeoat") == "set the timeoat"
    assert "timeout" in corrected(index.bm25, ["set", "timeoat"])
    # "whats" stems to the stopword "what", which no index holds: no typo of anything.
    assert corrected(index.bm25, ["what", "timeoat"]) == ["what", "timeoat", "timeout"]
    assert not Speller(index.bm25).correctable("what")
    typo = retriever.rank(["hw do i set the plaeholder txt of the questoin"])
    right = retriever.rank(["hw do i set the placeholder txt of the question"])
    assert typo.best_similarity == pytest.approx(right.best_similarity, abs=1e-6)


def test_a_typo_is_mended_on_the_word_typed_not_on_its_stem(retriever: Retriever) -> None:
    index = retriever.index

    def text(row: int) -> str:
        return str(index.chunks[row]["text"])

    # "chnage" stems to itself, two edits from the docs' term "chang": its stem has no
    # correction, the word (a swap from "change", which the docs write) has.
    assert tokenize("chnage") == ["chnage"] and Speller(index.bm25).nearest("chnage") is None
    assert mended(index.bm25, "how do i chnage the limit", text) == {"chnage": "chang"}
    found = mended(index.bm25, "chnage the limit", text)
    assert "chang" in corrected(index.bm25, tokenize("chnage the limit"), found)
    assert known_terms(index.bm25, ["chnage"], found) == {"chnage"}
    assert respelled(index.bm25, "how do i chnage the limit", text) == "how do i change the limit"
    # A word whose term the docs hold but whose spelling they never write is read as the
    # docs' word of that term one slip away ("dialogs": the docs write "dialog").
    assert respelled(index.bm25, "the dialogs", text) == "the dialog"
    assert respelled(index.bm25, "the dialog opens", text) == "the dialog opens"
    # The mended word must be one the docs write: "changes" is a swap from "chnages" and
    # stems to "chang", but these docs write "change" only.
    assert mended(index.bm25, "chnages", text) == {}
    # A name is typed as meant: capitals or a digit glued to it ("TMEM16A", "CHEK2"); a
    # word of a snake_case identifier is a word.
    assert mended(index.bm25, "the CHNAGE flag", text) == {}
    assert mended(index.bm25, "the chnage2 flag", text) == {}
    assert mended(index.bm25, "set web_chnage", text) == {"chnage": "chang"}
    # A word of the language is no typo (the embedder's vocabulary holds it whole).
    assert mended(index.bm25, "chnage", text, lambda word: word == "chnage") == {}
    # Each misspelt word costs a lookup of some 300 candidates: eight a question at most.
    typos = "chnage setings quesiton defualt adress optoin foramt requset timoeut placehlder"
    assert all(mended(index.bm25, typo, text) for typo in typos.split())
    assert list(mended(index.bm25, typos, text)) == tokenize(" ".join(typos.split()[:8]))


def test_the_speller_remembers_what_it_looked_up_within_a_bound(
    retriever: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    speller = Speller(retriever.index.bm25)
    searches: list[str] = []
    search = speller._search
    monkeypatch.setattr(speller, "_search", lambda t: searches.append(t) or search(t))
    assert speller.nearest("timout") == speller.nearest("timout") == "timeout"
    assert speller.nearest("zzzzqx") is None and speller.nearest("zzzzqx") is None
    assert searches == ["timout", "zzzzqx"]  # a miss is remembered as well as a hit
    monkeypatch.setattr(spelling, "_KEPT", 2)
    speller.nearest("plaeholder")  # over the bound: the memory starts over
    assert set(speller._nearest) == {"plaeholder"}


def test_a_follow_up_is_answered_with_the_turn_before_it(retriever: Retriever) -> None:
    history = [
        Turn("user", "How many questions a minute may one client send?"),
        Turn("assistant", "Each client may send 30 questions a minute."),
    ]
    payload = ask(retriever, "And how do I lower that?", history)
    assert not payload["abstained"]
    assert first_url(payload) == "configuration/#rate-limits"
    assert "ANCHORED_RATE_LIMIT_PER_MIN" in text_of(payload)


def test_a_command_after_a_lead_in_is_a_bash_block(retriever: Retriever) -> None:
    payload = ask(retriever, "How do I publish the site to GitHub Pages?")
    assert not payload["abstained"]
    assert "```bash\nmkdocs gh-deploy --force\n```" in [i["text"] for i in payload["answer"]]


def test_bare_passages_without_an_index_are_quoted_with_their_table_header() -> None:
    text = "option | default\nstrict | false\nenabled | true"
    passage = Passage(
        n=1,
        chunk_ids=["configuration/#options~0"],
        section_id="configuration/#options",
        page="configuration/",
        anchor="options",
        title="Configuration",
        heading_path=["Configuration", "Options"],
        text=text,
        highlight=text,
        score=1.0,
    )
    result = answer_extractively("What is the default of strict?", [passage], min_confidence=0.0)
    assert not result.abstained
    items = [item for quote in result.quotes for item in quote.items]
    assert "| option | default |\n|---|---|\n| strict | false |" in items
    # Only the row asked about is quoted, and highlighted.
    assert result.quotes[0].passage.highlight == "strict | false"


def test_units_split_prose_from_code_merged_into_one_chunk() -> None:
    text = (
        "For example, using content=... to upload raw content:\n"
        "# Uploading text, bytes, or a bytes iterator.\n"
        'httpx.post(..., content=b"Hello, world")\n'
        "Using data= will raise a deprecation warning in the next release."
    )
    chunks = [{"type": "text", "offsets": (0, len(text))}]
    kinds = [(u.kind, u.text.split("\n")[0]) for u in section_units(text, chunks)]
    assert kinds == [
        ("prose", "For example, using content=... to upload raw content:"),
        ("code", "# Uploading text, bytes, or a bytes iterator."),
        ("prose", "Using data= will raise a deprecation warning in the next release."),
    ]


def test_a_label_line_alone_is_prose_but_yaml_next_to_code_is_code() -> None:
    text = "default: false\nplugins:\n  - search\n  - anchored"
    chunks = [{"type": "text", "offsets": (0, len(text))}]
    units = section_units(text, chunks)
    assert [u.kind for u in units] == ["code"]
    label = section_units("default: false", [{"type": "text", "offsets": (0, 14)}])
    assert [u.kind for u in label] == ["prose"]


def test_language_guess() -> None:
    assert guess_language("plugins:\n  - search") == "yaml"
    assert guess_language("pip install httpx[http2]") == "bash"
    assert guess_language("client = httpx.Client(http2=True)") == "python"
    assert guess_language('{"qid": "q1"}') == "json"
    code = "client = httpx.Client()  # a default 5s timeout\nclient = httpx.Client(timeout=None)"
    assert guess_language(code) == "python"  # not TOML: a comment after a call
    assert guess_language('name = "site"\n[theme]\nfont = "Inter"') == "toml"


def test_edit_distance_counts_a_swap_of_neighbours_as_one() -> None:
    assert edit_distance("plaeholder", "placeholder") == 1
    assert edit_distance("questoin", "question") == 1
    assert edit_distance("feild", "field") == 1
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("cert", "cent", substitution=2) == 2
    assert edit_distance("clas", "class", substitution=2) == 1


MODEL_DIR = Path(__file__).resolve().parents[1] / "build_index/models/all-MiniLM-L6-v2"


def test_the_word_prior_comes_from_the_embedders_vocabulary() -> None:
    prior = word_prior(MODEL_DIR)
    assert prior is word_prior(MODEL_DIR)  # read once
    assert len(prior.ranks) > 10_000
    # Common words weigh less than specific ones; words the vocabulary does not hold
    # whole (identifiers, product names, typos) count fully.
    assert prior.prior("want") < prior.prior("supported") < prior.prior("providers") < 1.0
    assert prior.prior("ReadTimeout") == prior.prior("ollama") == 1.0
    terms = term_priors("Which LLM providers are supported? (mkdocs.yml)", prior)
    assert terms["provid"] == prior.prior("providers") and terms["support"] < 0.6
    assert terms["llm"] == terms["mkdocs.yml"] == 1.0
    assert term_priors("anything", None) == {}


def test_a_unigram_vocabulary_gives_ranks_by_log_probability(tmp_path: Path) -> None:
    vocab = [["<s>", 0.0], ["\u2581zzz", -9.0], ["\u2581the", -2.0], ["ing", -1.0]]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"type": "Unigram", "vocab": vocab}}), "utf-8")
    assert WordPrior.from_tokenizer(path).ranks == {"the": 1, "zzz": 2}
    path.write_text("not json", "utf-8")
    assert WordPrior.from_tokenizer(path).ranks == {}


def test_unknown_common_words_say_less_than_unknown_specific_ones(
    retriever: Retriever, unknown: Unknown
) -> None:
    prior = word_prior(retriever.index.model_dir)
    assert prior.prior("week") < prior.prior("bandwidth")
    assert unknown("timeout every week", prior=prior) < unknown("timeout bandwidth", prior=prior)


def test_a_quote_that_repeats_an_earlier_one_is_dropped(retriever: Retriever) -> None:
    payload = ask(retriever, "How do I enable HTTP/2 in the client?")
    passage = retriever.passages(
        retriever.rank(["HTTP/2"]), token_budget=4000, max_passages=3, estimate_tokens=len
    )[0]
    code = "```bash\npip install httpx[http2]\n```"
    first = Quote(passage, ["Install the optional dependencies first:", code])
    same = Quote(passage, ["Install it with:", code])
    more = Quote(passage, [code, "Then pass http2=True when you create the client."])
    assert _without_repeats(same, [first]) is None  # only a lead-in would be left
    kept = _without_repeats(more, [first])
    assert kept is not None and kept.items == ["Then pass http2=True when you create the client."]
    assert _without_repeats(first, []) is first
    texts = [i["text"] for i in payload["answer"]]
    assert len(texts) == len({" ".join(t.split()) for t in texts})  # no item shown twice


def test_the_index_records_each_code_blocks_span_and_fence_language(
    retriever: Retriever,
) -> None:
    section = retriever.index.sections["timeouts/#setting-and-disabling-timeouts"]
    text, code = section["text"], section["meta"]["code"]
    assert [language for _, _, language in code] == ["python", "python"]
    start, end, _ = code[0]
    assert text[start:end].startswith("# Using the top-level API:")
    assert text[start:end].endswith("timeout=10.0)")


def test_recorded_code_blocks_are_the_code_units_with_their_language() -> None:
    line = "client = httpx.Client()  # a default 5s timeout"
    text = f"Set it on the client:\n{line}\nkey: value, written in prose."
    code = [[22, 22 + len(line), "python"]]
    units = section_units(text, [{"type": "text", "offsets": (0, len(text))}], code)
    assert [u.kind for u in units] == ["prose", "code", "prose"]
    assert units[1].text == line and units[1].language == "python"
    assert render(units)[1] == f"```python\n{line}\n```"
    # An index without the field: the language is guessed from the lines.
    guessed = section_units(text, [{"type": "text", "offsets": (0, len(text))}])
    assert [u.kind for u in guessed][:2] == ["prose", "code"]


def test_a_changelog_section_yields_to_the_reference_unless_a_version_is_asked(
    tmp_path: Path, retriever: Retriever
) -> None:
    pages = [
        _page(
            "configuration/",
            '<h1 id="configuration">Configuration</h1><h2 id="strict">strict</h2>'
            "<p>Set strict to true to make the build fail on warnings.</p>"
            "<p><strong>default</strong>: <code>false</code></p>",
        ),
        _page(
            "changelog/",
            '<h1 id="changelog">Changelog</h1><h2 id="version-150">Version 1.5.0 (2023-01-01)</h2>'
            '<h3 id="fail-on-warnings">Make the build fail on warnings</h3>'
            "<p>Set strict to true to make the build fail on warnings.</p>",
        ),
    ]
    build(pages, tmp_path / "index", BuildConfig(cache_dir=tmp_path / "cache"))
    index = read_index(tmp_path / "index")
    small = Retriever(index, retriever.embedder)
    payload = ask(small, "How do I make the build fail on warnings?")
    assert not payload["abstained"]
    assert first_url(payload) == "configuration/#strict"


TABS_PAGE = """
<h1 id="search">Search</h1>
<h2 id="lang">lang</h2>
<p>Use this setting to specify the language of the search index, enabling stemming for
languages other than English. It can be set to another language or even to several
languages with:</p>
<div class="tabbed-set tabbed-alternate" data-tabs="1:2">
<input checked="checked" id="__tabbed_1_1" name="__tabbed_1" type="radio">
<input id="__tabbed_1_2" name="__tabbed_1" type="radio">
<div class="tabbed-labels"><label for="__tabbed_1_1">Set language</label>
<label for="__tabbed_1_2">Add further languages</label></div>
<div class="tabbed-content">
<div class="tabbed-block"><pre><code class="language-yaml">plugins:
  - search:
      lang: en
</code></pre></div>
<div class="tabbed-block"><pre><code class="language-yaml">plugins:
  - search:
      lang:
        - en
        - de
</code></pre></div>
</div></div>
<p>Be aware that including support for further languages increases the base JavaScript
payload by around 20kb and by another 15-30kb per language, all before gzip.</p>
<p>Language support is provided by a collection of language-specific stemmers and stop
words maintained by the Open Source community.</p>
<p>If no stemmer supports the selected site language, the plugin falls back to the
language that yields the best stemming results.</p>
"""


def test_a_lead_in_before_content_tabs_brings_each_tabs_code(
    tmp_path: Path, retriever: Retriever
) -> None:
    build([_page("search/", TABS_PAGE)], tmp_path / "index", BuildConfig(cache_dir=tmp_path / "c"))
    small = Retriever(read_index(tmp_path / "index"), retriever.embedder)
    section = small.index.sections["search/#lang"]["text"]
    assert "Set language\nAdd further languages\nplugins:" in section  # labels, then panels
    # A one-page site: what is quoted, whatever the refusal says.
    result = quoted(small, "How do I set the search language, and can I use more than one?")
    texts = [item for quote in result.quotes for item in quote.items]
    code = [t for t in texts if t.startswith("```yaml")]
    assert len(code) == 2, texts  # one block per tab, after the lead-in and the labels
    assert "lang: en" in code[0] and "- de" in code[1]
    assert texts.index(code[0]) > texts.index("Add further languages")


def test_the_refusal_evidence_weighs_unknown_words_by_the_word_prior(
    retriever: Retriever, unknown: Unknown
) -> None:
    # The refusal model was fitted with the word prior in its evidence: an unknown
    # common word ("week") counts less than an unknown specific one would.
    question = "How do I set a timeout per request, it broke last week?"
    hits, passages = retrieved(retriever, [question])
    result = answer_extractively(
        question,
        passages,
        index=retriever.index,
        embedder=retriever.embedder,
        model=retriever.index.manifest["model"]["name"],
        question_vector=hits.query_vector,
        similarity=hits.best_similarity,
    )
    assert result.evidence is not None
    with_prior = unknown(question, prior=word_prior(retriever.index.model_dir))
    assert 0 < with_prior < unknown(question)
    assert result.evidence.unknown == with_prior
    assert not result.abstained


POINTER_PAGES = {
    "": """
<h1 id="home">Home</h1>
<h2 id="quick-start">Quick start</h2>
<p>Install the package and add the plugin to your configuration file.</p>
<p>See Getting started for the details, and Deploy to AWS to put the query function online.</p>
""",
    "deploy/": """
<h1 id="deploy-to-aws">Deploy to AWS</h1>
<p>The function is deployed once with the SAM command line, from the root of the
repository, with credentials for your account in the shell.</p>
<pre><code class="language-bash">sam build
sam deploy --guided
</code></pre>
""",
    # What the site is about: words the question shares with every page count little.
    "function/": """
<h1 id="the-query-function">The query function</h1>
<p>The query function loads the index and answers questions.</p>
<p>The query function keeps the index in memory between requests.</p>
<p>Each query function instance answers one request at a time.</p>
""",
    # A page without an h1: its first heading is a section's, not the page's title.
    "tips/": """
<h2 id="quick-tips">Quick tips</h2>
<p>Keep the index next to the site and rebuild it in CI.</p>
""",
}


def test_a_line_naming_another_page_points_to_it_rather_than_answering(
    tmp_path: Path, retriever: Retriever
) -> None:
    # The home page's line holds every word of the question, as names of other pages
    # ("Deploy to AWS"); the page it names answers.
    pages = [_page(url, body) for url, body in POINTER_PAGES.items()]
    build(pages, tmp_path / "index", BuildConfig(cache_dir=tmp_path / "c"))
    small = Retriever(read_index(tmp_path / "index"), retriever.embedder)
    result = quoted(small, "How do I deploy the query function to AWS?")
    first = result.quotes[0]
    assert first.passage.page == "deploy/", [q.items for q in result.quotes]
    assert any("sam deploy --guided" in item for item in first.items)
    # Naming its own page's heading, or at length, a line is not a pointer.
    index = small.index
    assert named_headings("See Deploy to AWS.", "", ("Home",), index) == {"deploy", "aw"}
    assert named_headings("See Deploy to AWS.", "deploy/", ("Deploy to AWS",), index) == set()
    assert named_headings("See Deploy to AWS, " + "and more " * 12, "", ("Home",), index) == set()
    assert named_headings("See Quick tips.", "", ("Home",), index) == set()
