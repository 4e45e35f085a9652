"""Settings are read once from the environment and fail naming the key."""

import pytest
from anchored_query.settings import Settings, SettingsError


def test_defaults_need_only_the_index() -> None:
    s = Settings.from_env({"ANCHORED_INDEX": "/srv/index"})
    assert s.index == "/srv/index"
    assert s.llm_provider == "none"
    assert s.allowed_origins == ()


def test_missing_index_names_the_key() -> None:
    with pytest.raises(SettingsError, match="ANCHORED_INDEX"):
        Settings.from_env({})


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ({"ANCHORED_LLM_PROVIDER": "gpt"}, "ANCHORED_LLM_PROVIDER"),
        ({"ANCHORED_LLM_PROVIDER": "openai", "ANCHORED_LLM_MODEL": "m"}, "ANCHORED_LLM_BASE_URL"),
        ({"ANCHORED_LLM_PROVIDER": "bedrock"}, "ANCHORED_LLM_MODEL"),
        ({"ANCHORED_MAX_QUESTION_CHARS": "lots"}, "ANCHORED_MAX_QUESTION_CHARS"),
        ({"ANCHORED_RATE_LIMIT_PER_MIN": "-1"}, "ANCHORED_RATE_LIMIT_PER_MIN"),
        (
            {
                "ANCHORED_LLM_PROVIDER": "openai",
                "ANCHORED_LLM_MODEL": "m",
                "ANCHORED_LLM_BASE_URL": "ftp://x",
            },
            "ANCHORED_LLM_BASE_URL",
        ),
    ],
)
def test_bad_values_name_their_key(env: dict[str, str], key: str) -> None:
    with pytest.raises(SettingsError, match=key):
        Settings.from_env({"ANCHORED_INDEX": "x", **env})


def test_origins_are_split_and_key_is_hidden_from_repr() -> None:
    s = Settings.from_env(
        {
            "ANCHORED_INDEX": "x",
            "ANCHORED_ALLOWED_ORIGINS": "https://docs.example.com/, https://b.example.com",
            "ANCHORED_LLM_PROVIDER": "openai",
            "ANCHORED_LLM_MODEL": "gpt-4o-mini",
            "ANCHORED_LLM_BASE_URL": "https://api.example.com/v1",
            "ANCHORED_LLM_API_KEY": "sk-secret-value",
        }
    )
    assert s.allowed_origins == ("https://docs.example.com", "https://b.example.com")
    assert "sk-secret-value" not in repr(s)
