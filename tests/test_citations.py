"""Parsing, verifying and renumbering the citations of an answer."""

from __future__ import annotations

from anchored_query.citations import (
    PREVIEW_CHARS,
    VerifiedAnswer,
    parse_answer,
    renumber,
    verify,
)
from anchored_query.types import AnswerSentence, Passage

DEV_ADDR = (
    "Determines the address used when running mkdocs serve. Must be of the format IP:PORT. "
    "Allows a custom default to be set without the need to pass it through the --dev-addr "
    "option every time the mkdocs serve command is called. Default: '127.0.0.1:8000'."
)
DIRECTORY_URLS = (
    "This setting controls the style used for linking to pages within the documentation. "
    "Set use_directory_urls to false in mkdocs.yml when browsing from the file system. "
    "Default: true. Added in version 1.6."
)
DEPLOY = "Run mkdocs gh-deploy to push the built site to the gh-pages branch."
ZH = "开发服务器默认监听 8000 端口，可以使用 --dev-addr 选项修改。"


def passage(
    n: int, text: str, anchor: str, *, page: str = "user-guide/configuration/", **kw: object
) -> Passage:
    fields: dict[str, object] = {
        "n": n,
        "chunk_ids": [f"{page}#{anchor}~0", f"{page}#{anchor}~1"],
        "section_id": f"{page}#{anchor}",
        "page": page,
        "anchor": anchor,
        "title": "Configuration",
        "heading_path": ["Configuration", anchor],
        "text": text,
        "highlight": text,
    }
    fields.update(kw)
    return Passage(**fields)  # type: ignore[arg-type,unused-ignore]


CONTEXT = {
    3: passage(3, DEV_ADDR, "dev_addr"),
    7: passage(7, DIRECTORY_URLS, "use_directory_urls"),
    9: passage(9, DEPLOY, "github-pages", page="user-guide/deploying-your-docs/"),
    12: passage(12, ZH, "开发服务器", page="zh/"),
}


def cites(text: str) -> list[tuple[str, list[int]]]:
    return [(s.text, s.citations) for s in parse_answer(text)]


# -- parse_answer ----------------------------------------------------------


def test_markers_at_sentence_end_are_removed() -> None:
    assert cites("The default is 8000 [3]. Use gh-deploy [9].") == [
        ("The default is 8000.", [3]),
        ("Use gh-deploy.", [9]),
    ]


def test_marker_lists_ranges_and_adjacent_markers() -> None:
    assert cites("A [1, 2]. B [1][2]. C [4-6]. D [2,1,2].") == [
        ("A.", [1, 2]),
        ("B.", [1, 2]),
        ("C.", [4, 5, 6]),
        ("D.", [2, 1]),
    ]


def test_inline_markers() -> None:
    assert cites("Serve on 8000 [3] or deploy with gh-deploy [9] later.") == [
        ("Serve on 8000 or deploy with gh-deploy later.", [3, 9]),
    ]


def test_marker_only_fragment_attaches_to_previous_sentence() -> None:
    assert cites("The default is 8000. [3]\nIt can be changed.\n[7]") == [
        ("The default is 8000.", [3]),
        ("It can be changed.", [7]),
    ]


def test_missing_markers_give_an_uncited_sentence() -> None:
    assert cites("MkDocs is a static site generator.") == [
        ("MkDocs is a static site generator.", []),
    ]


def test_list_items_and_line_breaks_are_sentences() -> None:
    text = "To deploy:\n- Build the site [9]\n- Run `mkdocs gh-deploy` [9]\n\n## Notes\n---"
    assert cites(text) == [
        ("To deploy:", []),
        ("- Build the site", [9]),
        ("- Run `mkdocs gh-deploy`", [9]),
    ]


def test_attribution_brackets_go_with_their_markers() -> None:
    assert cites("Serve on 8000 (see [3]). Deploy (Source: [9], [3]). Call f() [3].") == [
        ("Serve on 8000.", [3]),
        ("Deploy.", [9, 3]),
        ("Call f().", [3]),
    ]


def test_markers_inside_code_are_code() -> None:
    assert cites("Index with `items[1]` here [3].") == [("Index with `items[1]` here.", [3])]


def test_fenced_block_shares_the_citations_of_its_lead_in() -> None:
    parsed = parse_answer("Set it in mkdocs.yml [3]:\n```yaml\ndev_addr: 127.0.0.1:8000\n```")
    assert [s.citations for s in parsed] == [[3], [3]]
    assert parsed[1].text.startswith("```yaml")


def test_chinese_answer() -> None:
    assert cites("开发服务器默认监听 8000 端口[12]。可以使用 --dev-addr 修改。【12】") == [
        ("开发服务器默认监听 8000 端口。", [12]),
        ("可以使用 --dev-addr 修改。", [12]),
    ]


def test_leading_marker_before_any_sentence() -> None:
    assert cites("[9] Run mkdocs gh-deploy.") == [("Run mkdocs gh-deploy.", [9])]


# -- verify ------------------------------------------------------------------


def check(text: str) -> VerifiedAnswer:
    return verify(parse_answer(text), CONTEXT)


def test_ids_not_in_context_are_dropped() -> None:
    result = check("The default is 127.0.0.1:8000 [3, 99].")
    assert result.sentences == [AnswerSentence("The default is 127.0.0.1:8000.", [3])]
    assert result.invalid_citations == [99]
    assert result.removed == 0 and not result.abstained


def test_sentence_citing_only_unknown_ids_is_removed() -> None:
    result = check("The default is 8000 [42]. Run mkdocs gh-deploy [9].")
    assert [s.text for s in result.sentences] == ["Run mkdocs gh-deploy."]
    assert result.removed == 1
    assert "no citation" in result.reasons[0]


def test_wrong_number_is_unsupported_and_right_one_kept() -> None:
    wrong = check("The dev server uses port 8080 [3].")
    assert wrong.sentences == [] and wrong.removed == 1 and wrong.abstained
    assert "'8080'" in wrong.reasons[0]
    right = check("The dev server uses port 8000 [3].")
    assert right.sentences == [AnswerSentence("The dev server uses port 8000.", [3])]
    assert not right.abstained


def test_numbers_compare_as_whole_tokens() -> None:
    assert check("It listens on port 80 [3].").removed == 1
    assert check("It listens on port 800 [3].").removed == 1
    assert check("Added in version 1.6 [7].").removed == 0
    assert check("Added in v1.6 [7].").removed == 0
    assert check("Added in version 1.7 [7].").removed == 1


def test_numbers_under_ten_are_checked() -> None:
    assert check("There are 2 ways to set the address [3].").removed == 1
    assert check("Set use_directory_urls to false; added in version 1.6 [7].").removed == 0
    assert check("Set use_directory_urls to false; added in version 2 [7].").removed == 1


def test_list_numbers_and_step_numbers_are_not_facts() -> None:
    assert check("1. Run mkdocs gh-deploy to push the site [9].").removed == 0
    assert check("In step 2, run mkdocs gh-deploy to push the built site [9].").removed == 0


def test_option_names_must_occur() -> None:
    assert check("Pass --dev-addr to mkdocs serve [3].").removed == 0
    assert check("Pass --dev-address to mkdocs serve [3].").removed == 1
    assert check("Pass --dev to mkdocs serve [3].").removed == 1


def test_identifiers_and_file_names_must_occur() -> None:
    assert check("Set use_directory_urls in mkdocs.yml [7].").removed == 0
    assert check("Set use_directory_url in mkdocs.yml [7].").removed == 1
    assert check("Set use_directory_urls in mkdocs.yaml [7].").removed == 1


def test_inline_code_must_occur_case_and_space_insensitively() -> None:
    assert check("Run `MKDOCS   gh-deploy` [9].").removed == 0
    assert check("Run `mkdocs deploy` [9].").removed == 1
    # a command composed of attested pieces passes; a changed number does not
    assert check("Run `mkdocs serve --dev-addr 127.0.0.1:8000` [3].").removed == 0
    assert check("Run `mkdocs serve --dev-addr 127.0.0.1:8001` [3].").removed == 1


def test_quoted_strings_must_occur() -> None:
    assert check('The format is "IP:PORT" [3].').removed == 0
    assert check('The format is "HOST:PORT" [3].').removed == 1


def test_facts_may_come_from_any_cited_passage() -> None:
    result = check("Serve on 8000 and deploy with mkdocs gh-deploy [3, 9].")
    assert result.removed == 0
    assert check("Serve on 8000 and deploy with mkdocs gh-deploy [9].").removed == 1


def test_fact_in_a_passage_not_cited_does_not_count() -> None:
    assert check("Set use_directory_urls to false [3].").removed == 1


def test_excluded_passage_counts_as_absent() -> None:
    context = {1: passage(1, DEPLOY, "github-pages", excluded=True)}
    result = verify(parse_answer("Run mkdocs gh-deploy [1]."), context)
    assert result.sentences == [] and result.abstained and result.invalid_citations == [1]


def test_chinese_sentence_is_checked() -> None:
    assert check("开发服务器默认监听 8000 端口[12]。").removed == 0
    assert check("开发服务器默认监听 8080 端口[12]。").removed == 1


def test_no_coverage_statement_opens_an_abstention() -> None:
    result = check(
        "The documentation does not cover baking bread. "
        "It covers deploying with mkdocs gh-deploy [9]."
    )
    assert result.abstained
    assert [s.citations for s in result.sentences] == [[], [9]]
    assert result.removed == 0


def test_no_coverage_statement_may_not_assert_numbers() -> None:
    result = check("The docs don't mention it, but the port is 8080.")
    assert result.sentences == [] and result.abstained


def test_nothing_supported_abstains() -> None:
    result = check("MkDocs is great. Everyone loves it.")
    assert result.abstained and result.removed == 2 and len(result.reasons) == 2


# -- renumber ----------------------------------------------------------------


def test_renumber_in_order_of_first_appearance() -> None:
    verified = check(
        "Deploy with mkdocs gh-deploy [9]. Serve on 8000 [3]. Serve on 8000, deploy with "
        "gh-deploy [3, 9]. Set use_directory_urls [7]."
    )
    answer, citations = renumber(verified, CONTEXT)
    assert answer == [
        {"text": "Deploy with mkdocs gh-deploy.", "citations": [1]},
        {"text": "Serve on 8000.", "citations": [2]},
        {"text": "Serve on 8000, deploy with gh-deploy.", "citations": [1, 2]},
        {"text": "Set use_directory_urls.", "citations": [3]},
    ]
    assert [c["n"] for c in citations] == [1, 2, 3]
    first = citations[0]
    assert first == {
        "n": 1,
        "chunk_id": "user-guide/deploying-your-docs/#github-pages~0",
        "url": "user-guide/deploying-your-docs/#github-pages",
        "title": "Configuration",
        "heading_path": ["Configuration", "github-pages"],
        "passage": DEPLOY,
        "highlight": DEPLOY,
    }


def test_one_citation_per_passage_and_long_previews_trimmed() -> None:
    long_text = "word " * 400
    context = {5: passage(5, long_text + " 8000", "long", highlight=long_text.strip())}
    verified = verify(parse_answer("A word [5]. Word 8000 [5]."), context)
    answer, citations = renumber(verified, context)
    assert [a["citations"] for a in answer] == [[1], [1]]
    assert len(citations) == 1
    assert len(citations[0]["passage"]) <= PREVIEW_CHARS + 1
    assert citations[0]["passage"].endswith("…")
    assert citations[0]["highlight"] == long_text.strip()


def test_empty_anchor_url_and_missing_highlight() -> None:
    context = {1: passage(1, "Welcome to MkDocs.", "", page="", highlight="")}
    verified = verify(parse_answer("Welcome to MkDocs [1]."), context)
    _, citations = renumber(verified, context)
    assert citations[0]["url"] == ""
    assert citations[0]["highlight"] == "Welcome to MkDocs."
