"""Request checks: every bad input is a clear 4xx, never a crash."""

import json

import pytest
from anchored_query.errors import QueryError
from anchored_query.question.validation import (
    parse_ask,
    parse_feedback,
    parse_json_body,
    parse_search,
)
from anchored_query.settings import Settings

SETTINGS = Settings(index="x", max_question_chars=200, max_history_turns=2, max_history_chars=50)


def status_of(fn, *args) -> int:  # type: ignore[no-untyped-def]
    with pytest.raises(QueryError) as info:
        fn(*args)
    return info.value.status


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"", 400),
        (b"   ", 400),
        (b"{not json", 400),
        (b"[1, 2]", 400),
        (b"\xff\xfe\x00garbage", 400),
        (b"[" * 100_000, 413),
    ],
)
def test_bad_bodies(body: bytes, status: int) -> None:
    assert status_of(parse_json_body, body, 1000) == status


def test_deep_nesting_within_limit_is_a_400() -> None:
    assert status_of(parse_json_body, b"[" * 900, 1000) == 400


@pytest.mark.parametrize(
    ("data", "status"),
    [
        ({}, 400),
        ({"question": ""}, 400),
        ({"question": "   \n\t "}, 400),
        ({"question": 42}, 400),
        ({"question": "x" * 201}, 413),
        ({"question": "ok", "mode": "magic"}, 400),
        ({"question": "ok", "scope": "docs/"}, 400),
        ({"question": "ok", "scope": {"include": "docs/"}}, 400),
        ({"question": "ok", "scope": {"only": ["docs/"]}}, 400),
        ({"question": "ok", "history": "earlier"}, 400),
        ({"question": "ok", "history": [{"role": "system", "content": "x"}]}, 400),
        ({"question": "ok", "history": [{"role": "user"}]}, 400),
        ({"question": "ok", "history": [{"role": "user", "content": "x"}] * 1001}, 413),
        ({"question": "ok", "extra": 1}, 400),
    ],
)
def test_bad_ask_requests(data: dict[str, object], status: int) -> None:
    assert status_of(parse_ask, data, SETTINGS) == status


def test_history_keeps_only_the_last_turns_within_budget() -> None:
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"t{i}"} for i in range(10)
    ]
    request = parse_ask({"question": "and then?", "history": history}, SETTINGS)
    assert [t.content for t in request.history] == ["t6", "t7", "t8", "t9"]


def test_control_characters_are_removed_and_scope_is_normalised() -> None:
    request = parse_ask(
        {"question": "what\x00 is\x1b this?", "scope": {"include": ["/guide/"]}}, SETTINGS
    )
    assert request.question == "what is this?"
    assert request.scope.include == ("guide/",)


def test_feedback_checks() -> None:
    ok = parse_feedback({"answer_id": "abc123", "rating": "up", "comment": "thanks"})
    assert ok.rating == "up"
    assert status_of(parse_feedback, {"answer_id": "../../etc", "rating": "up"}) == 400
    assert status_of(parse_feedback, {"answer_id": "a", "rating": "meh"}) == 400
    assert (
        status_of(parse_feedback, {"answer_id": "a", "rating": "up", "comment": "x" * 2001}) == 413
    )


def test_search_parameters() -> None:
    assert parse_search("hello", None, SETTINGS) == ("hello", 10)
    assert status_of(parse_search, "hello", "x", SETTINGS) == 400
    assert status_of(parse_search, "hello", "1000", SETTINGS) == 400
    assert status_of(parse_search, None, None, SETTINGS) == 400


def test_json_roundtrip_of_unicode_question() -> None:
    body = json.dumps({"question": "如何配置 mkdocs.yml？"}).encode()
    assert parse_ask(parse_json_body(body, 1000), SETTINGS).question == "如何配置 mkdocs.yml？"
