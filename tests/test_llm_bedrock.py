"""BedrockClient (boto3 Converse) against a fake Bedrock Runtime over real HTTP."""

from __future__ import annotations

import copy
import logging
import socket
import time
from collections.abc import Iterator

import botocore.retries.standard
import pytest
from anchored_query.errors import LLMError
from anchored_query.llm import BedrockClient, ChatMessage, Completion, LLMClient
from anchored_query.llm.base import reply_byte_bound
from anchored_query.llm.bedrock import _timeout_step, converse_messages
from fakes import (
    Disconnect,
    Empty,
    FakeBedrockServer,
    Malformed,
    Refuse,
    Reply,
    Sleep,
    Status,
    echo_prompt,
)

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
MESSAGES = [
    ChatMessage("system", "Answer only from the passages. Cite [n]."),
    ChatMessage("user", "How do I enable the plugin?"),
]
SECRETS = ("fake-secret-key", "fake-session-token")


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials from the environment only; no profile, no instance metadata."""
    for name in (
        "AWS_PROFILE",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
        "AWS_RETRY_MODE",
        "AWS_MAX_ATTEMPTS",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in FakeBedrockServer.aws_env().items():
        monkeypatch.setenv(name, value)


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore sleeps up to 1 s (jittered) before retrying a throttled call; not in tests."""
    monkeypatch.setattr(
        botocore.retries.standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.0
    )


@pytest.fixture
def srv() -> Iterator[FakeBedrockServer]:
    with FakeBedrockServer() as server:
        yield server


@pytest.fixture
def client(srv: FakeBedrockServer) -> Iterator[BedrockClient]:
    with BedrockClient(MODEL, "us-east-1", endpoint_url=srv.url, timeout_s=2.0) as llm:
        yield llm


def fail(llm: BedrockClient, messages: list[ChatMessage] = MESSAGES) -> LLMError:
    with pytest.raises(LLMError) as info:
        llm.complete(messages)
    return info.value


# ------------------------------------------------------------------ success


def test_reply_is_returned_and_request_is_a_converse_call(
    srv: FakeBedrockServer, client: BedrockClient
) -> None:
    srv.script(Reply(" Add `anchored` to plugins [1].\n"))

    answer = client.complete(MESSAGES, max_tokens=300, temperature=0.2).text

    assert answer == "Add `anchored` to plugins [1]."
    assert isinstance(client, LLMClient)
    assert client.name == f"bedrock:{MODEL}"
    [req] = srv.requests
    assert req.method == "POST"
    assert req.path == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    assert req.model == MODEL
    assert req.body == {
        "messages": [{"role": "user", "content": [{"text": "How do I enable the plugin?"}]}],
        "system": [{"text": "Answer only from the passages. Cite [n]."}],
        "inferenceConfig": {"maxTokens": 300, "temperature": 0.2},
    }
    assert req.headers["authorization"] == "[REDACTED]"
    assert req.headers["x-amz-security-token"] == "[REDACTED]"
    assert req.sent_credential(FakeBedrockServer.access_key_id)
    assert "x-amz-date" in req.headers


def test_history_becomes_alternating_turns(srv: FakeBedrockServer, client: BedrockClient) -> None:
    srv.script(Reply(echo_prompt))
    messages = [
        ChatMessage("assistant", "Hi! Ask me about the docs."),  # a greeting before the user
        ChatMessage("system", "Rules."),
        ChatMessage("user", "First question"),
        ChatMessage("assistant", "First answer [1]."),
        ChatMessage("user", "Context passages"),
        ChatMessage("user", "Follow-up question"),
        ChatMessage("user", "   "),
    ]
    assert client.complete(messages).text == "Context passages\n\nFollow-up question"
    assert [m["role"] for m in srv.last.body["messages"]] == ["user", "assistant", "user"]
    assert srv.last.system == "Rules."


def test_converse_messages_merges_and_drops() -> None:
    assert converse_messages([ChatMessage("user", "a"), ChatMessage("user", "b")]) == [
        {"role": "user", "content": [{"text": "a\n\nb"}]}
    ]
    assert converse_messages([ChatMessage("assistant", "x"), ChatMessage("system", "s")]) == []


# ------------------------------------------------------------------ retries


# A reply that comes this late: a call done sooner did not wait for it. The retried attempts
# below time out after 1 s, long enough for the retry's immediate reply from the in-process
# fake server on a busy machine (0.3 s was not always), and far below SLOW_S.
SLOW_S = 10.0


def test_timeout_then_retry_succeeds(srv: FakeBedrockServer) -> None:
    srv.script(Sleep(SLOW_S, Reply("too late")), Reply("second try"))
    with BedrockClient(MODEL, "us-east-1", srv.url, timeout_s=1.0) as llm:
        started = time.monotonic()
        assert llm.complete(MESSAGES).text == "second try"
    assert len(srv.requests) == 2
    assert time.monotonic() - started < SLOW_S / 2


def test_two_timeouts_raise_timeout(srv: FakeBedrockServer) -> None:
    srv.script(Sleep(3.0), Sleep(3.0), Reply("never asked"))
    with BedrockClient(MODEL, "us-east-1", srv.url, timeout_s=0.2) as llm:
        error = fail(llm)
    assert error.category == "timeout"
    assert error.http_status == 504
    assert len(srv.requests) == 2


def test_per_call_timeout_gets_its_own_client(srv: FakeBedrockServer) -> None:
    srv.script(Sleep(SLOW_S), Sleep(SLOW_S))
    # A default (30 s) longer than SLOW_S: had the call used it, it would have waited SLOW_S.
    with BedrockClient(MODEL, "us-east-1", endpoint_url=srv.url, timeout_s=30.0) as client:
        started = time.monotonic()
        with pytest.raises(LLMError) as info:
            client.complete(MESSAGES, timeout_s=0.2)
        assert info.value.category == "timeout"
        # 0.2 s attempts, and a client made for them: far below SLOW_S on a busy machine too.
        assert time.monotonic() - started < SLOW_S / 2
        assert (
            client.complete(MESSAGES).text == FakeBedrockServer.default_reply
        )  # default timeout again


def test_a_few_timeouts_share_a_few_clients(srv: FakeBedrockServer, client: BedrockClient) -> None:
    for timeout_s in (1.0, 1.01, 1.5, 2.0, 2.5, 3.0, 3.5):
        assert (
            client.complete(MESSAGES, timeout_s=timeout_s).text == FakeBedrockServer.default_reply
        )
    assert len(client._clients) == 4  # 1.0 and 1.01 share one, and 2.0 and 2.5, 3.0 and 3.5


def test_a_requests_remaining_time_is_rounded_down_to_a_few_clients(
    srv: FakeBedrockServer, client: BedrockClient
) -> None:
    # The engine passes what is left of the request's deadline: every value differs.
    left = [19.87, 19.2, 18.4, 17.9, 16.33, 15.01, 14.9, 12.7, 11.2]
    for timeout_s in left:
        client.complete(MESSAGES, timeout_s=timeout_s)
    assert set(client._clients) == {10.0, 12.0, 15.0}
    assert _timeout_step(7.9) == 6.0 and _timeout_step(0.3) == 0.3 and _timeout_step(601) == 600


@pytest.mark.parametrize("code", [500, 503])
def test_two_5xx_raise_http_5xx_after_exactly_two_requests(
    srv: FakeBedrockServer, client: BedrockClient, code: int
) -> None:
    srv.script(Status(code), Status(code), Reply("never asked"))
    error = fail(client)
    assert (error.category, error.status) == ("http_5xx", code)
    assert len(srv.requests) == 2
    assert srv.pending == 1


def test_5xx_then_success(srv: FakeBedrockServer, client: BedrockClient) -> None:
    srv.script(Status(503), Reply("fine now"))
    assert client.complete(MESSAGES).text == "fine now"
    assert len(srv.requests) == 2


def test_throttling_twice_raises_rate_limited(
    srv: FakeBedrockServer, client: BedrockClient
) -> None:
    srv.script(Status(429, "Too many requests, please wait before trying again."), Status(429))
    error = fail(client)
    assert (error.category, error.status) == ("rate_limited", 429)
    assert "ThrottlingException" in error.detail
    assert len(srv.requests) == 2


def test_throttling_then_success(srv: FakeBedrockServer, client: BedrockClient) -> None:
    srv.script(Status(429, retry_after=0.05), Reply("ok"))
    assert client.complete(MESSAGES).text == "ok"
    assert len(srv.requests) == 2


def test_no_retry_when_max_retries_is_zero(srv: FakeBedrockServer) -> None:
    srv.script(Status(500), Reply("never asked"))
    with BedrockClient(MODEL, "us-east-1", srv.url, max_retries=0) as llm:
        assert fail(llm).category == "http_5xx"
    assert len(srv.requests) == 1


def test_disconnect_is_retried(srv: FakeBedrockServer, client: BedrockClient) -> None:
    srv.script(Disconnect(), Reply("reconnected"))
    assert client.complete(MESSAGES).text == "reconnected"
    assert len(srv.requests) == 2


def test_connection_refused_raises_connection() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with BedrockClient(MODEL, "us-east-1", f"http://127.0.0.1:{port}", timeout_s=1.0) as llm:
        assert fail(llm).category == "connection"


# ------------------------------------------------------------------ errors and bad answers


@pytest.mark.parametrize(
    ("behaviour", "category"),
    [
        (Status(424, "The model failed."), "model_error"),
        (Status(400, "Input is too long for requested model."), "bad_request"),
        (Status(404, "The provided model identifier is invalid."), "bad_request"),
        (Status(403, "You don't have access to the model."), "auth"),
        (Status(408, "Model timed out.", error_type="ModelTimeoutException"), "timeout"),
        (Status(418, "I'm a teapot", error_type="TeapotException"), "bad_request"),
    ],
)
def test_service_errors_map_to_categories_without_retry(
    srv: FakeBedrockServer, client: BedrockClient, behaviour: Status, category: str
) -> None:
    srv.script(behaviour, Reply("never asked"))
    error = fail(client)
    assert error.category == category
    assert behaviour.message in error.detail
    assert len(srv.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        '{"output": {"message": {"content": [{"text": "cut o',
        "{}",
        '{"output": {"message": {"role": "assistant"}}, "stopReason": "end_turn"}',
        '{"output": {}, "stopReason": "malformed_model_output"}',
    ],
)
def test_malformed_answers_raise_malformed(
    srv: FakeBedrockServer, client: BedrockClient, body: str
) -> None:
    srv.script(Malformed(body))
    assert fail(client).category == "malformed"


def test_empty_answer_raises_empty(srv: FakeBedrockServer, client: BedrockClient) -> None:
    srv.script(Empty(), Reply("   "))
    assert fail(client).category == "empty"
    assert fail(client).category == "empty"


def test_guardrail_raises_refused(srv: FakeBedrockServer, client: BedrockClient) -> None:
    srv.script(Refuse())
    assert fail(client).category == "refused"


def test_request_the_service_would_reject_is_caught_by_the_fake(srv: FakeBedrockServer) -> None:
    # Converse takes temperature 0..1 for most models; the fake answers like Bedrock.
    with BedrockClient(MODEL, "us-east-1", srv.url) as llm, pytest.raises(LLMError) as info:
        llm.complete(MESSAGES, temperature=1.5)
    assert info.value.category == "bad_request"
    assert "temperature" in info.value.detail


def test_missing_credentials_raise_auth(
    srv: FakeBedrockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    with BedrockClient(MODEL, "us-east-1", srv.url) as llm:
        assert fail(llm).category == "auth"
    assert srv.requests == []


@pytest.mark.parametrize(
    "behaviours",
    [
        [Status(403, "The security token fake-session-token is invalid")],
        [Status(500, "secret fake-secret-key"), Status(500)],
        [Malformed("fake-secret-key")],
    ],
)
def test_credentials_never_appear_in_errors_or_logs(
    srv: FakeBedrockServer, caplog: pytest.LogCaptureFixture, behaviours: list[Status]
) -> None:
    caplog.set_level(logging.INFO, logger="anchored_query")
    srv.script(*behaviours)
    with BedrockClient(MODEL, "us-east-1", srv.url, timeout_s=0.3) as llm:
        error = fail(llm)
    for text in (str(error), repr(error), repr(copy.copy(error)), caplog.text):
        for secret in SECRETS:
            assert secret not in text


def test_region_defaults_to_the_functions_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    assert BedrockClient(MODEL, "").region == "eu-central-1"
    assert BedrockClient(MODEL, None).region == "eu-central-1"
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(ValueError, match="region"):
        BedrockClient(MODEL, "")


def test_constructor_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        BedrockClient(MODEL, "us-east-1", timeout_s=0)
    assert "secret" not in repr(BedrockClient(MODEL, "us-east-1"))


def test_usage_and_stop_reason_are_reported(srv: FakeBedrockServer, client: BedrockClient) -> None:
    srv.script(Reply("Cut off mid", finish_reason="length", usage=(1234, 56)))
    completion = client.complete(MESSAGES)
    assert completion == Completion("Cut off mid", 1234, 56, "length")
    assert completion.truncated
    srv.script(Reply("Done [1]."))
    done = client.complete(MESSAGES)
    assert done.finish_reason == "stop"
    assert done.input_tokens is not None and done.input_tokens > 0


def test_unclosed_reasoning_block_is_truncated(
    srv: FakeBedrockServer, client: BedrockClient
) -> None:
    srv.script(Reply("<think>still thinking when the tokens ran out", finish_reason="length"))
    with pytest.raises(LLMError) as caught:
        client.complete(MESSAGES)
    assert caught.value.category == "truncated"


# 3.9 MB of reply where 600 tokens were asked for (issue 23, finding 8).
HUGE = ("x" * 999 + " ") * 3900


def test_a_reply_longer_than_max_tokens_allows_is_cut_at_its_bound(
    srv: FakeBedrockServer, client: BedrockClient
) -> None:
    srv.script(Reply("Skylark " * 600))  # within the bound it is an answer
    assert client.complete(MESSAGES, max_tokens=600).text.startswith("Skylark")
    srv.script(Reply(HUGE))
    started = time.perf_counter()
    with pytest.raises(LLMError) as info:
        client.complete(MESSAGES, max_tokens=600)
    assert info.value.category == "malformed"
    assert f"{reply_byte_bound(600)} bytes" in info.value.detail  # read to 85 kB, not 3.9 MB
    assert len(srv.requests) == 2  # not retried
    assert time.perf_counter() - started < 1.5


def test_a_streamed_reply_is_cut_at_the_same_bound(
    srv: FakeBedrockServer, client: BedrockClient
) -> None:
    srv.script(Reply(HUGE))
    seen: list[str] = []
    with pytest.raises(LLMError) as info:
        for event in client.stream(MESSAGES, max_tokens=600, timeout_s=10):
            seen.append(event if isinstance(event, str) else "")
    assert info.value.category == "malformed"
    assert sum(len(piece) for piece in seen) <= reply_byte_bound(600)
