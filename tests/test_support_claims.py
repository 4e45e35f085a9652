"""The checks added for how a real model states things: polarity, a passage's own lines
as semantic evidence, YAML nesting as a dotted name, verbatim config lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from anchored_query.citations.checking import Checker, Item
from anchored_query.citations.facts import Claim, Haystack, yaml_key_paths
from anchored_query.citations.polarity import negated, passage_clauses, polarity_conflict
from anchored_query.citations.semantic import SemanticSupport, best_units, make_support
from anchored_query.citations.support import qualifier_conflicts
from anchored_query.citations.verify import ParsedSentence, parse_answer, verify
from anchored_query.types import Passage

from build_index.embedder import Embedder, get_model

FIXTURES = Path(__file__).parent / "fixtures" / "llm-replies"


def passage(text: str, n: int = 1, heading: str = "Section") -> Passage:
    return Passage(
        n=n,
        chunk_ids=[f"s{n}~0"],
        section_id=f"s{n}-{abs(hash(text))}",
        page="page/",
        anchor=f"s{n}",
        title="Docs",
        heading_path=["Docs", heading],
        text=text,
        highlight=text,
    )


@pytest.fixture(scope="module")
def support() -> SemanticSupport:
    made = make_support(Embedder(get_model("all-MiniLM-L6-v2")), "all-MiniLM-L6-v2")
    assert made is not None
    return made


TIMEOUTS = passage(
    "HTTPX defaults to including reasonable timeouts for all network operations, while "
    "Requests has no timeouts by default.\nTo get the same behavior as Requests, set the "
    "timeout parameter to None:\nhttpx.get('https://www.example.com', timeout=None)"
)


def test_negation_words() -> None:
    assert negated("HTTPX does not have a default timeout.")
    assert negated("Requests has no timeouts by default.")
    assert negated("It doesn't retry.") and negated("Nothing is downloaded from a model hub.")
    assert not negated("It works not only on Linux but also on macOS.")
    assert not negated("Set `provider: none` for quoted answers.")  # a value, not a denial
    assert not negated("Run `mkdocs build --no-directory-urls`.")  # code is not prose


def test_a_denial_of_what_the_context_states_conflicts() -> None:
    clauses = passage_clauses([TIMEOUTS])
    assert polarity_conflict("HTTPX does not have a default timeout.", clauses)
    # The contrast's other half is about Requests: saying it is no conflict.
    assert polarity_conflict("Requests has no timeouts by default.", clauses) is None
    assert polarity_conflict("HTTPX has reasonable timeouts by default.", clauses) is None
    # A paraphrase with other words ("disabled" for "not enabled") is left alone.
    other = passage_clauses([passage("Search highlighting is disabled by default.")])
    assert polarity_conflict("Search highlighting is not enabled by default.", other) is None
    hub = passage_clauses(
        [passage("The embedding model ships inside the package: nothing is downloaded.")]
    )
    assert polarity_conflict("The embedding model is downloaded with the package.", hub)


def test_the_recorded_denial_is_never_shown_as_verified_whatever_it_cites() -> None:
    # Recorded real reply (httpx-01b): "HTTPX does not have a default timeout. [3]" --
    # every word of it is in the passages, and the embedder puts it close to them. The
    # polarity check is inconclusive (it removed correct sentences of a capable model's):
    # the denial is shown, marked not verified, with its own marker.
    fixture = json.loads((FIXTURES / "httpx-01b.json").read_text("utf-8"))
    by_n = {p["n"]: Passage(**p) for p in fixture["passages"]}
    verified = verify(parse_answer(fixture["reply"], known=list(by_n)), by_n)
    denial = [s for s in verified.sentences if "does not have a default timeout" in s.text]
    assert [(s.supported, s.citations) for s in denial] == [(False, [3])]
    assert any("5 seconds" in s.text and s.supported for s in verified.sentences)  # stays
    assert [(d.check, d.action) for d in verified.decisions] == [
        ("contradicts_polarity", "unverified")
    ]
    assert any("context states" in r for r in verified.reasons)


def test_a_passage_line_restated_is_semantic_evidence(support: SemanticSupport) -> None:
    # MkDocs' inheritance section (recorded reply mkdocs-17): a sentence copied from one
    # line of a long passage scored 0.24 against the section's chunk vectors.
    text = (
        "Generally, a single file would hold the entire configuration for a site. However, "
        "some organizations may maintain multiple sites which all share a common "
        "configuration across them. Rather than maintaining separate configurations for "
        "each, the common configuration options can be defined in a parent configuration "
        "file which each site's primary configuration file inherits.\n"
        "To define the parent for a configuration file, set the INHERIT (all caps) key to "
        "the path of the parent file. The path must be relative to the location of the "
        "primary file.\nFor configuration options to be merged with a parent configuration, "
        "those options must be defined as key/value pairs. Specifically, the "
        "markdown_extensions and plugins options must use the alternative syntax which "
        "does not use list items (lines which start with -)."
    )
    sentence = "The path must be relative to the location of the primary file."
    assert best_units(sentence, text)[0].startswith("The path must be relative")
    p = passage(text)
    assert support(sentence, p) >= support.sections_only(sentence, p) + 0.2
    assert not verify([ParsedSentence(sentence, [1])], {1: p}, support=support).abstained


def test_a_dotted_name_spelled_as_yaml_nesting() -> None:
    p = passage(
        "Set the following value in mkdocs.yml to a valid color name:\n"
        "theme:\n  palette:\n    - media: x\n      primary: indigo\n"
    )
    assert yaml_key_paths(p.text) == [
        ("theme",),
        ("theme", "palette"),
        ("theme", "palette", "-", "media"),
        ("theme", "palette", "-", "primary"),
    ]
    hay = Haystack(p)
    assert hay.has(Claim("code", "theme.palette.primary"))
    assert hay.has(Claim("identifier", "palette.primary"))
    assert not hay.has(Claim("code", "theme.primary"))  # not nested so
    assert not hay.has(Claim("code", "palette.theme.primary"))


def test_number_qualifiers_are_read_in_written_order() -> None:
    # content_terms is a set: taking its "first two" picked random words per process.
    p = passage("The package is 171 MB unzipped, 58 MB zipped, under the 250 MB limit.")
    assert qualifier_conflicts("The package is 171 MB unzipped and 58 MB zipped.", [p]) == []
    assert qualifier_conflicts("It is 58 MB unzipped.", [p]) == ["58~unzip"]


def test_a_config_line_is_compared_verbatim_not_by_meaning() -> None:
    # "scheme: slate" is one line of the passage's YAML: no embedding says so better.
    p = passage("theme:\n  palette:\n    scheme: slate\n")

    def no_support(sentence: str, passage: Passage) -> float:
        return 0.0

    checker = Checker({1: p}, no_support)
    item = Item.of(
        0, ParsedSentence("scheme: slate", [1]), [1], paragraph=0, footer=(), no_coverage=False
    )
    assert checker.semantic(item, [1]) is None
    assert checker.check(item, [1], strict=False) is None


NETRC = passage(
    "HTTPX can be configured to use a .netrc config file for authentication.\n"
    "machine example.org\nlogin example-username\npassword example-password"
)


def test_a_lead_in_goes_with_what_it_introduced() -> None:
    # Recorded reply material-15: "… you would add:" was shown after the invented TOML
    # block it introduced had been removed. Removed here: what it introduces cites only
    # a passage the model was not shown.
    reply = (
        "HTTPX can be configured to use a .netrc config file for authentication [1]. "
        "The .netrc config file for authentication looks like this: [1]\n\n"
        "It lives in your home directory [7]."
    )
    verified = verify(parse_answer(reply), {1: NETRC})
    assert [s.text for s in verified.sentences] == [
        "HTTPX can be configured to use a .netrc config file for authentication."
    ]
    assert [(d.index, d.check) for d in verified.decisions] == [
        (2, "lead_in"),
        (3, "unknown_citation"),
    ]
    assert any("introduces what follows" in r for r in verified.reasons)


def test_a_lead_in_stays_when_what_it_introduced_is_shown_unverified() -> None:
    # The invented block (its own host name, not the passage's) is inconclusive: shown,
    # marked not verified, and the lead-in stays with it.
    reply = (
        "HTTPX can be configured to use a .netrc config file for authentication [1]. "
        "The .netrc config file for authentication looks like this: [1]\n\n"
        "```\nmachine intranet.local\nlogin me\n```"
    )
    verified = verify(parse_answer(reply), {1: NETRC})
    assert [(s.text.split("\n")[0], s.supported) for s in verified.sentences] == [
        ("HTTPX can be configured to use a .netrc config file for authentication.", True),
        ("The .netrc config file for authentication looks like this:", True),
        ("```", False),
    ]
    assert verified.removed == 0 and verified.unverified == 1
    assert not any("introduces what follows" in r for r in verified.reasons)


def test_code_whose_every_explanation_was_removed_is_no_answer() -> None:
    # Recorded reply httpx-41 (NTLM, unanswerable): every sentence was removed, the
    # .netrc example copied from a passage stayed and was shown as the answer.
    reply = (
        "To use NTLM with HTTPX against IIS, write a netrc file like this:\n\n"
        "```\nmachine example.org\nlogin example-username\npassword example-password\n```\n"
        "This sends your NTLM credentials to the server."
    )
    verified = verify(parse_answer(reply), {1: NETRC})
    assert verified.abstained and verified.sentences == []
    # A reply that is only the passage's code is left alone.
    only_code = verify(parse_answer("```\nmachine example.org\n```\n[1]"), {1: NETRC})
    assert not only_code.abstained


ZH_CONTEXT = {
    1: passage("Clients can be configured with a timeout.", 1),
    2: passage("Set the timeout to five seconds.", 2),
    3: passage("To get the same behavior as Requests: httpx.get(url, timeout=None)", 3),
    4: passage("Providers: OpenAI, Bedrock.", 4),
}


def test_a_chinese_sentence_names_what_it_is_about() -> None:
    # The Latin words of a Chinese sentence are facts: Ollama is not in passage 4, so it
    # is not verified (a name not found is inconclusive: shown, marked).
    verified = verify(parse_answer("支持的模型服务包括 OpenAI、Bedrock 和 Ollama。[4]"), ZH_CONTEXT)
    assert [(s.citations, s.supported) for s in verified.sentences] == [([4], False)]
    assert verified.decisions[0].check == "fact_not_found"
    assert "'Ollama' not in [4]" in verified.reasons[0]
    # Its facts all in passage 4: still not verified by facts alone (English page, no
    # test of a Chinese sentence's meaning), but not for a missing name.
    kept = verify(parse_answer("支持的模型服务包括 OpenAI 和 Bedrock。[4]"), ZH_CONTEXT)
    assert [s.citations for s in kept.sentences] == [[4]]
    assert kept.decisions[0].check == "no_test"
    # A multilingual model's support verifies it.
    meant = verify(
        parse_answer("支持的模型服务包括 OpenAI 和 Bedrock。[4]"),
        ZH_CONTEXT,
        support=lambda s, p: 0.9,
    )
    assert [(s.citations, s.supported) for s in meant.sentences] == [([4], True)]


def test_a_miscited_chinese_sentence_is_verified_only_where_its_code_and_meaning_are() -> None:
    # Recorded reply httpx-35: `timeout=None` cited [1]; only passage 3 holds it. Its code
    # alone no longer verifies a Chinese sentence on an English page: without a
    # multilingual model it is shown, marked not verified, with the marker it gave.
    reply = "可以使用 `timeout=None` 来不设超时。[1]"
    verified = verify(parse_answer(reply), ZH_CONTEXT)
    assert [(s.citations, s.supported) for s in verified.sentences] == [([1], False)]
    assert verified.attributed == 0 and verified.removed == 0
    # With one, it goes to the passage its code singles out, verified.
    meant = verify(parse_answer(reply), ZH_CONTEXT, support=lambda s, p: 0.9)
    assert [(s.citations, s.supported) for s in meant.sentences] == [([3], True)]
    assert meant.attributed == 1
    # Uncited, names alone never pick a passage; nor a value such as `true`.
    assert verify(parse_answer("可以使用 `timeout=None` 来不设超时。"), ZH_CONTEXT).abstained


def test_a_citation_shown_supports_its_sentence_not_only_its_group() -> None:
    # Recorded test-split reply httpx-26: one sentence shown with three passages, of
    # which one states it; the judge saw two unsupported citations.
    context = {
        1: passage("Let's take this Starlette application as an example.", 1),
        2: passage("You can configure an httpx client to call an ASGI application.", 2),
        3: passage(
            "Inspect 500 error responses rather than raise exceptions by "
            "setting raise_app_exceptions=False.",
            3,
        ),
    }
    reply = "You can inspect 500 error responses by setting `raise_app_exceptions=False` [1, 2, 3]."
    verified = verify(parse_answer(reply), context)
    assert [s.citations for s in verified.sentences] == [[3]]
