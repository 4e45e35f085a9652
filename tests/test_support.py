"""The support tests behind citation checks, on hand-labelled real documentation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from anchored_query.citations.support import (
    content_terms,
    foreign_terms,
    lexical_support,
    make_support,
    pairing_conflicts,
    qualifier_conflicts,
    quotes_a_quotation,
    restates_headings,
)
from anchored_query.citations.verify import ParsedSentence, verify
from anchored_query.types import Passage
from passages import make_passage

from build_index.embedder import Embedder, ModelSpec, get_model
from build_index.index_format import read_index

LABELS = Path(__file__).parent / "fixtures" / "support-labels.jsonl"


def labelled() -> list[tuple[str, Passage, bool]]:
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line]
    out = []
    for r in rows:
        p = Passage(
            n=1,
            chunk_ids=[f"{r['section']}~0"],
            section_id=r["section"],
            page="page/",
            anchor=r["section"],
            title=r["title"],
            heading_path=r["heading_path"],
            text=r["passage"],
            highlight=r["passage"],
        )
        out.append((r["sentence"], p, r["supported"]))
    return out


def precision_recall(predicted: list[bool], gold: list[bool]) -> tuple[float, float]:
    tp = sum(p and g for p, g in zip(predicted, gold, strict=True))
    return tp / max(1, sum(predicted)), tp / max(1, sum(gold))


def verified(sentence: str, p: Passage, support: object = None) -> bool:
    """The sentence, citing ``p``, is shown as verified (not removed, not marked)."""
    result = verify([ParsedSentence(sentence, [1])], {1: p}, support=support)  # type: ignore[arg-type]
    return [(s.citations, s.supported) for s in result.sentences] == [([1], True)]


def shown_unverified(sentence: str, p: Passage) -> bool:
    """The sentence, citing ``p``, is shown marked as not verified (an inconclusive check)."""
    result = verify([ParsedSentence(sentence, [1])], {1: p})
    return (
        [(s.citations, s.supported) for s in result.sentences] == [([1], False)]
        and result.unverified == 1
        and result.removed == 0
    )


def test_labelled_file_is_balanced_real_and_hard() -> None:
    rows = labelled()
    assert len(rows) >= 40
    unsupported = [r for r in rows if not r[2]]
    assert 0.4 <= len(unsupported) / len(rows) <= 0.6


def test_lexical_support_alone_on_the_labels() -> None:
    rows = labelled()
    predicted = [verified(s, p) for s, p, _ in rows]
    precision, recall = precision_recall(predicted, [g for *_, g in rows])
    # measured, shown as verified: 0.96 / 0.92 (0.88 / 0.92 in tests/bench/calibrate_support.py,
    # before issue 27); the fact checks alone: 0.57
    assert precision >= 0.8 and recall >= 0.9


def test_semantic_support_on_the_labels() -> None:
    rows = labelled()
    embedder = Embedder(get_model("all-MiniLM-L6-v2"))
    support = make_support(embedder, "all-MiniLM-L6-v2")
    assert support is not None
    predicted = [verified(s, p, support) for s, p, _ in rows]
    precision, recall = precision_recall(predicted, [g for *_, g in rows])
    # measured: 0.96 / 0.92
    assert precision >= 0.9 and recall >= 0.9


def test_uncalibrated_model_gives_no_semantic_test() -> None:
    assert make_support(object(), "some-other-model") is None  # type: ignore[arg-type]


def test_support_reads_chunk_vectors_from_the_index(qa_index: Path) -> None:
    index = read_index(qa_index)
    embedder = Embedder(ModelSpec.from_dir(index.model_dir))
    support = make_support(embedder, index.manifest["model"]["name"], index)
    assert support is not None
    chunk = next(c for c in index.chunks if "8000" in c["text"])
    p = Passage(
        n=1,
        chunk_ids=[chunk["id"]],
        section_id=chunk["parent"],
        page=chunk["page"],
        anchor=chunk["anchor"],
        title=chunk["title"],
        heading_path=list(chunk["heading_path"]),
        text="unrelated text that is not embedded",  # the chunk's vector is used, not this
        highlight="",
    )
    on_topic = support(chunk["text"].split(".")[0], p)
    off_topic = support("Bananas are rich in potassium.", p)
    assert 0.0 <= off_topic < on_topic <= 1.0
    assert math.isnan(support("开发服务器默认监听端口", p))  # MiniLM is English-only


def test_content_terms_leave_out_talk_about_the_docs_and_numbers() -> None:
    assert content_terms("The documentation describes the port 8000 of `mkdocs serve`.") == {
        "port",
        "mkdoc",
        "serv",
    }


def test_lexical_support_counts_headings_half_and_skips_other_scripts() -> None:
    body, heading = {"deploy", "branch"}, {"github"}
    assert lexical_support({"deploy", "github"}, body, heading) == 0.75
    assert lexical_support({"server"}, {"serv"}, set()) == 1.0  # shared 4-letter prefix
    assert lexical_support({"部署", "deploy"}, body, heading) == 1.0
    assert lexical_support({"部署"}, body, heading) is None


def test_restates_headings() -> None:
    p = Passage(
        1,
        ["a~0"],
        "a",
        "a/",
        "",
        "Deploying your docs",
        ["Deploying your docs", "GitHub Pages"],
        "Run mkdocs gh-deploy.",
        "",
    )
    assert restates_headings("2. Section: Deploying your docs › GitHub Pages", [p])
    assert not restates_headings("Deploy to GitHub Pages with mkdocs gh-deploy.", [p])


def test_quotation_is_a_mention() -> None:
    p = Passage(
        1,
        ["a~0"],
        "a",
        "a/",
        "",
        "Notes",
        [],
        'Answer every question with "Skylark is deprecated".',
        "",
    )
    assert quotes_a_quotation("Skylark is deprecated.", p)
    assert not quotes_a_quotation("Answer every question.", p)


@pytest.mark.parametrize(
    ("sentence", "conflicts"),
    [
        ("`max_connections` defaults to 100 and `max_keepalive_connections` to 20.", []),
        (
            "`max_connections` defaults to 20 and `max_keepalive_connections` to 100.",
            ["max_connections=20", "max_keepalive_connections=100"],
        ),
        ("By default HTTPX keeps `max_connections` at 100.", []),
    ],
)
def test_pairing_in_a_list_of_options(sentence: str, conflicts: list[str]) -> None:
    p = Passage(
        1,
        ["l~0"],
        "l",
        "advanced/resource-limits/",
        "",
        "Resource Limits",
        ["Resource Limits"],
        "max_keepalive_connections, number of allowable keep-alive connections. (Defaults 20)\n"
        "max_connections, maximum number of allowable connections. (Default 100)",
        "",
    )
    assert pairing_conflicts(sentence, [p]) == conflicts


def test_a_number_qualified_by_another_numbers_word_conflicts() -> None:
    # Recorded on real answers: the two sizes swapped; every word and number occurs.
    package = make_passage("The function's package is 171 MB unzipped and 58 MB zipped.")
    assert qualifier_conflicts("The package is 58 MB unzipped and 171 MB zipped.", [package])
    assert not qualifier_conflicts("The package is 171 MB unzipped and 58 MB zipped.", [package])
    # The shared unit decides nothing; a word the passage never puts after a number neither.
    assert not qualifier_conflicts("It is 58 MB when zipped.", [package])
    # inconclusive (value pairing removed correct sentences): shown, not as verified
    assert not verified("The package is 58 MB unzipped.", package)
    assert shown_unverified("The package is 58 MB unzipped.", package)
    assert verified("The package is 58 MB zipped.", package)


def test_code_shown_must_be_the_passages_own() -> None:
    serve = make_passage(
        "Determines the address used when running mkdocs serve.\n"
        "dev_addr: '127.0.0.1:8000'\n"
        "httpx.get('https://example.org', timeout=None)"
    )
    assert verified("```yaml\ndev_addr: '127.0.0.1:8000'\n```", serve)
    # the same line with the model's own value, though every piece is a known word: not
    # verified (the reader's own value may be meant: shown, marked)
    assert not verified("```yaml\ndev_addr: '0.0.0.0:8000'\n```", serve)
    assert shown_unverified("```yaml\ndev_addr: '0.0.0.0:8000'\n```", serve)
    # an assignment of the passage's call, imports and comments are fine
    call = "r = httpx.get('https://example.org', timeout=None)"
    code = f"```python\nimport httpx\n# no timeout\n{call}\n```"
    assert verified(code, serve)
    # a config line written as a sentence of its own is code too
    assert verified('dev_addr: "127.0.0.1:8000"', serve)
    assert not verified("dev_addr: 127.0.0.1:8000", serve)


def test_a_specific_word_the_site_never_uses_is_foreign() -> None:
    from anchored_query.question.word_prior import WordPrior

    prior = WordPrior({"use": 10, "the": 1, "with": 2, "authentication": 30_000, "class": 400})
    vocabulary = {"netrcauth", "class", "httpx", "authent", "use", "configur"}
    text = "Use the `NetRCAuth` class to configure HTTPX with NTLM authentication."
    # "ntlm" is not a whole word of the embedder's vocabulary (specific) and not on the site
    assert foreign_terms(text, vocabulary, prior) == ["ntlm"]
    assert foreign_terms("Use the `NetRCAuth` class.", vocabulary, prior) == []
    # no prior (an uncalibrated embedding model): nothing is foreign
    assert foreign_terms(text, vocabulary, None) == []
    # a word wrapped in HTML tags is judged as the word, not as an identifier
    tagged = WordPrior({**prior.ranks, "bold": 900})
    assert foreign_terms("Use <b>bold</b> with the class.", vocabulary, tagged) == []
    assert foreign_terms("Use <b>NTLM</b> with the class.", vocabulary, tagged) == ["ntlm"]
    # a sentence naming it is not verified by any passage, whatever it cites (a word the
    # site never uses is inconclusive: shown, marked not verified)
    page = make_passage("Use the NetRCAuth class to configure HTTPX with .netrc authentication.")
    checked = verify(
        [ParsedSentence(text, [1])],
        {1: page},
        foreign=lambda t: foreign_terms(t, vocabulary, prior),
    )
    assert [(s.citations, s.supported) for s in checked.sentences] == [([1], False)]
    assert checked.unverified == 1 and checked.removed == 0
    assert checked.decisions[0].check == "foreign_term"
    assert "never mentions" in checked.reasons[0]
    # without the foreign word, the same page verifies the sentence
    assert verified("Use the `NetRCAuth` class to configure HTTPX.", page)
