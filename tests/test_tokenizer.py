"""The BM25 tokenizer: one function for documents and queries."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from build_index.tokenizer import STOPWORDS, TOKENIZER_SETTINGS, tokenize, word_terms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the whole identifier first (exact, unstemmed), then its stemmed parts
        ("use_directory_urls", ["use_directory_urls", "use", "directori", "url"]),
        ("mkdocs.yml", ["mkdocs.yml", "mkdoc", "yml"]),
        ("gh-deploy", ["gh-deploy", "gh", "deploy"]),
        # leading sigils are not part of the identifier: --dev-addr == dev-addr
        ("--dev-addr", ["dev-addr", "dev", "addr"]),
        ("#anchor", ["anchor"]),
        ("snake_case", ["snake_case", "snake", "case"]),
        # CamelCase: the word itself (stemmed like any word), then its parts
        ("CamelCase", ["camelcas", "camel", "case"]),
        ("HTMLParser", ["htmlparser", "html", "parser"]),
        ("getHTTPResponse", ["gethttprespons", "get", "http", "respons"]),
        ("MkDocs", ["mkdoc", "mk", "doc"]),
        ("MkDocs.yml", ["mkdocs.yml", "mkdoc", "mk", "doc", "yml"]),
        ("v1.2.3", ["v1.2.3", "v1", "2", "3"]),
        ("C++ or C#", ["c++", "c", "c#", "c"]),
        ("__init__", ["init"]),
        # an acronym's plural is a word, not CamelCase
        ("URLs", ["url"]),
    ],
)
def test_identifiers_yield_the_whole_token_and_its_parts(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_a_sentence_keeps_identifiers_and_drops_punctuation() -> None:
    assert tokenize(
        "Set `use_directory_urls: false` in mkdocs.yml, then run mkdocs gh-deploy."
    ) == [
        "set",
        "use_directory_urls",
        "use",
        "directori",
        "url",
        "fals",
        "mkdocs.yml",
        "mkdoc",
        "yml",
        "run",
        "mkdoc",
        "gh-deploy",
        "gh",
        "deploy",
    ]


def test_trailing_sentence_punctuation_is_not_part_of_an_identifier() -> None:
    assert tokenize("Edit mkdocs.yml.") == tokenize("Edit mkdocs.yml")
    assert tokenize("see page/#anchor") == ["see", "page", "anchor"]


def test_a_camelcase_word_matches_its_lowercase_spelling() -> None:
    assert set(tokenize("mkdocs")) <= set(tokenize("MkDocs"))
    assert set(tokenize("MkDocs")) <= set(tokenize("MkDocs mk docs"))


def test_english_words_are_stemmed() -> None:
    assert tokenize("configure configuring configuration") == ["configur"] * 3
    assert tokenize("running runs") == ["run", "run"]
    assert tokenize("plugins plugin") == ["plugin", "plugin"]


def test_english_stopwords_are_dropped() -> None:
    assert tokenize("How do I change the theme of my site?") == ["chang", "theme", "site"]
    assert tokenize("the and of") == []
    assert 140 <= len(STOPWORDS) <= 200
    # "e.g." is a stopword as a whole; "don't" leaves no fragment behind
    assert tokenize("e.g. don't") == []


def test_unicode_is_normalised_and_casefolded() -> None:
    assert tokenize("ｍｋｄｏｃｓ") == tokenize("MKDOCS") == ["mkdoc"]
    assert tokenize("ﬁle") == ["file"]  # NFKC expands the ligature
    assert tokenize("STRASSE Straße") == ["strass", "strass"]


def test_chinese_runs_become_character_bigrams() -> None:
    assert tokenize("配置文件") == ["配置", "置文", "文件"]
    assert tokenize("书") == ["书"]  # a one-character run stays whole


def test_mixed_chinese_and_english() -> None:
    expected = ["使用", "mkdocs.yml", "mkdoc", "yml", "配置"]
    assert tokenize("使用 mkdocs.yml 配置") == expected
    assert tokenize("使用mkdocs.yml配置") == expected  # no spaces needed


def test_japanese_and_korean() -> None:
    assert tokenize("設定ファイル") == ["設定", "定フ", "ファ", "ァイ", "イル"]
    assert tokenize("한국어 문서") == ["한국", "국어", "문서"]
    assert tokenize("テキスト・ファイル") == ["テキ", "キス", "スト", "ファ", "ァイ", "イル"]


def test_other_scripts_keep_whole_words() -> None:
    assert tokenize("Привет мир") == ["привет", "мир"]
    # combining vowel signs do not cut Devanagari words apart
    assert tokenize("हिन्दी भाषा") == ["हिन्दी", "भाषा"]


@pytest.mark.parametrize("text", ["", "   \n\t ", "😀🎉👍", "\x00\x00", "...!?", "\ud800"])
def test_text_without_words_gives_no_tokens(text: str) -> None:
    assert tokenize(text) == []


def test_emoji_and_nul_separate_words() -> None:
    assert tokenize("deploy😀site\x00theme") == ["deploy", "site", "theme"]


def test_blobs_do_not_become_terms() -> None:
    blob = "a" * 65
    assert tokenize(blob) == []
    assert tokenize(f"{blob}.txt") == ["txt"]


def test_settings_survive_a_json_round_trip() -> None:
    # the reader compares the manifest's copy (read from JSON) with this dict
    assert json.loads(json.dumps(TOKENIZER_SETTINGS)) == TOKENIZER_SETTINGS
    assert TOKENIZER_SETTINGS["name"] == "anchored-v1"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=200))
def test_any_text_gives_non_empty_string_tokens(text: str) -> None:
    tokens = tokenize(text)
    assert all(isinstance(t, str) and t for t in tokens)
    assert all(not t.isspace() for t in tokens)
    assert tokenize(text) == tokens  # deterministic (and the cache changes nothing)


@given(st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=70)))
@settings(max_examples=200)
def test_word_terms_are_the_terms_tokenize_gives_each_word_alone(words: list[str]) -> None:
    words += ["the", "settings", "running", "down", "a" * 65]  # stopwords, stems, a blob
    assert word_terms(words) == [(tokenize(w) or [None])[0] for w in words]
