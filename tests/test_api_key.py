"""The LLM API key from Secrets Manager or SSM (moto over real HTTP), read once, never logged."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import anchored_query.guard.api_key as api_key
import pytest
from anchored_query.engine import make_client_from
from anchored_query.guard.api_key import SecretError, resolve_api_key
from anchored_query.settings import Settings, SettingsError
from dynamoserver import aws_client, aws_env
from fakes import FakeOpenAIServer
from s3server import MotoS3, moto_s3

__all__ = ["aws_env", "moto_s3"]  # fixtures used by name

KEY = "sk-from-the-secret-store-0123456789abcdef"


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    api_key._cache.clear()
    yield
    api_key._cache.clear()


def _secret(server: MotoS3, value: str) -> str:
    client = aws_client(server, "secretsmanager")
    arn: str = client.create_secret(
        Name=f"anchored/llm-{uuid.uuid4().hex[:8]}", SecretString=value
    )["ARN"]
    return arn


def _parameter(server: MotoS3, value: str) -> str:
    client = aws_client(server, "ssm")
    name = f"/anchored/llm-key-{uuid.uuid4().hex[:8]}"
    client.put_parameter(Name=name, Value=value, Type="SecureString")
    return name


def test_key_from_a_secrets_manager_arn_is_read_once(aws_env: MotoS3) -> None:
    arn = _secret(aws_env, KEY)
    assert arn.startswith("arn:aws:secretsmanager:us-east-1:")
    assert resolve_api_key(arn) == KEY
    # Cached: changing the secret does not reach a warm instance.
    aws_client(aws_env, "secretsmanager").put_secret_value(SecretId=arn, SecretString="sk-new")
    assert resolve_api_key(arn) == KEY


def test_key_from_a_json_secret_takes_its_api_key_field(aws_env: MotoS3) -> None:
    arn = _secret(aws_env, json.dumps({"api_key": KEY, "note": "rotated monthly"}))
    assert resolve_api_key(arn) == KEY
    api_key._cache.clear()
    bad = _secret(aws_env, json.dumps({"token": KEY}))
    with pytest.raises(SecretError, match="api_key"):
        resolve_api_key(bad)


def test_key_from_an_ssm_securestring(aws_env: MotoS3) -> None:
    name = _parameter(aws_env, KEY)
    assert resolve_api_key(f"ssm:{name}") == KEY
    api_key._cache.clear()
    arn = f"arn:aws:ssm:us-east-1:123456789012:parameter{name}"
    assert resolve_api_key(arn) == KEY


def test_a_missing_secret_names_the_arn_and_the_code_not_a_value(aws_env: MotoS3) -> None:
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:anchored/nope-AbCdEf"
    with pytest.raises(SecretError) as caught:
        resolve_api_key(arn)
    assert "anchored/nope" in str(caught.value)
    assert "ResourceNotFoundException" in str(caught.value)


def test_engine_client_uses_the_secret_and_logs_mask_it(
    aws_env: MotoS3, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    arn = _secret(aws_env, KEY)
    env = {
        "ANCHORED_INDEX": str(tmp_path / "index"),
        "ANCHORED_LLM_PROVIDER": "openai",
        "ANCHORED_LLM_MODEL": "fake-model",
        "ANCHORED_LLM_API_KEY_SECRET": arn,
    }
    with FakeOpenAIServer() as srv:
        env["ANCHORED_LLM_BASE_URL"] = srv.url
        client = make_client_from(Settings.from_env(env))
        assert client is not None
        client.complete([_user("hello")], max_tokens=20)
        assert srv.requests[0].sent_credential(KEY)
        getattr(client, "close", lambda: None)()
    with caplog.at_level(logging.INFO, logger="anchored.test"):
        logging.getLogger("anchored.test").info("the key is %s", KEY)
    assert KEY not in caplog.text


def test_key_and_secret_together_are_refused() -> None:
    with pytest.raises(SettingsError, match="not both"):
        Settings.from_env(
            {
                "ANCHORED_INDEX": "x",
                "ANCHORED_LLM_API_KEY": "sk-1",
                "ANCHORED_LLM_API_KEY_SECRET": "ssm:/k",
            }
        )
    with pytest.raises(SettingsError, match="ARN"):
        Settings.from_env({"ANCHORED_INDEX": "x", "ANCHORED_LLM_API_KEY_SECRET": "my-key"})


def _user(text: str) -> object:
    from anchored_query.llm import ChatMessage

    return ChatMessage("user", text)
