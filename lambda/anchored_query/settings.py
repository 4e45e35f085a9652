"""Settings of the query function, read once from the environment.

Every key is ``ANCHORED_*``. A bad value fails at start-up with the key's name,
not on the first request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

LLMProvider = Literal["none", "openai", "bedrock"]


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the key."""


def _get(env: Mapping[str, str], key: str, default: str | None = None) -> str:
    value = env.get(key)
    if value is None or value.strip() == "":
        if default is None:
            raise SettingsError(f"{key} is not set; it is required")
        return default
    return value.strip()


def _int(env: Mapping[str, str], key: str, default: int, low: int, high: int) -> int:
    raw = _get(env, key, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{key} must be a whole number, got {raw!r}") from None
    if not low <= value <= high:
        raise SettingsError(f"{key} must be between {low} and {high}, got {value}")
    return value


def _float(env: Mapping[str, str], key: str, default: float, low: float, high: float) -> float:
    raw = _get(env, key, str(default))
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{key} must be a number, got {raw!r}") from None
    if not low <= value <= high:
        raise SettingsError(f"{key} must be between {low} and {high}, got {value}")
    return value


def _bool(env: Mapping[str, str], key: str, default: bool) -> bool:
    raw = _get(env, key, "1" if default else "0").lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{key} must be on or off (1/0, true/false), got {raw!r}")


@dataclass(frozen=True)
class Settings:
    """Everything the function reads from its environment."""

    index: str
    cache_dir: str = "/tmp/anchored"
    refresh_s: float = 60.0
    feedback: str = ""
    llm_provider: LLMProvider = "none"
    llm_model: str = ""
    llm_base_url: str = ""
    llm_api_key: str = field(default="", repr=False)
    llm_region: str = ""
    llm_timeout_s: float = 12.0
    # The whole request, LLM calls and retries included, ends within deadline_s.
    deadline_s: float = 20.0
    llm_context_tokens: int = 8192  # the model's real window: the whole prompt fits in it
    llm_max_output_tokens: int = 600  # reserved for the reply inside llm_context_tokens
    llm_retries: int = 1
    llm_rewrite: bool = False
    llm_rewrite_timeout_s: float = 4.0
    allowed_origins: tuple[str, ...] = ()
    # Host names answered (serve/hosts.py); () answers any: `anchored serve` sets its own.
    allowed_hosts: tuple[str, ...] = ()
    # `anchored serve`: the proxies whose X-Forwarded-For / -Proto uvicorn believes; none.
    forwarded_allow_ips: str = ""
    max_question_chars: int = 2000
    max_history_turns: int = 6
    max_history_chars: int = 8000
    max_body_bytes: int = 65536
    rate_limit_per_min: int = 30
    context_tokens: int = 6000  # cap on the passages (cost), within llm_context_tokens
    max_passages: int = 200
    site_name: str = ""
    worker_threads: int = 0  # requests worked on at once; 0: 100 with an LLM, else 40
    answer_id_secret: str = field(default="", repr=False)  # signs answer ids (ids.py)
    # Spend cap, rate limits across instances, the key from a secret (budget.py,
    # ratelimit.py, shared_state.py, secrets.py). 0 = no cap.
    shared_state: str = ""  # "" / memory, dynamodb:TABLE, file:PATH
    rate_limit_ipv6_prefix: int = 64
    budget_tokens_per_day: int = 0
    budget_tokens_per_hour: int = 0
    budget_usd_per_day: float = 0.0
    budget_usd_per_hour: float = 0.0
    budget_client_share: float = 0.25  # of each cap, for one client (budget.py; 1: no share)
    llm_price_input_per_mtok: float = 0.0  # USD per million input tokens
    llm_price_output_per_mtok: float = 0.0
    llm_api_key_secret: str = ""  # a Secrets Manager secret or SSM parameter ARN
    front_secret: str = field(default="", repr=False)  # behind CloudFront: front.py
    client_ip_header: str = "cloudfront-viewer-address"  # trusted only with front_secret
    question_log: str = ""  # off; a folder or s3://bucket/prefix (querylog.py)
    question_log_days: int = 90  # records older than this are deleted
    question_log_mask: bool = False  # e-mail-, phone- and key-shaped strings masked in it
    max_versions_loaded: int = 3  # versioned index: versions kept in memory (versions.py)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read and check every setting; raises SettingsError naming the bad key."""
        env = os.environ if env is None else env
        provider = _get(env, "ANCHORED_LLM_PROVIDER", "none").lower()
        if provider not in ("none", "openai", "bedrock"):
            raise SettingsError(
                f"ANCHORED_LLM_PROVIDER must be none, openai or bedrock, got {provider!r}"
            )
        model = _get(env, "ANCHORED_LLM_MODEL", "")
        base_url = _get(env, "ANCHORED_LLM_BASE_URL", "")
        if provider != "none" and not model:
            raise SettingsError(f"ANCHORED_LLM_MODEL is required with provider {provider}")
        if provider == "openai":
            if not base_url:
                raise SettingsError("ANCHORED_LLM_BASE_URL is required with provider openai")
            if not base_url.startswith(("http://", "https://")):
                raise SettingsError(
                    f"ANCHORED_LLM_BASE_URL must be an http(s) URL, got {base_url!r}"
                )
        origins = tuple(
            o.strip().rstrip("/")
            for o in _get(env, "ANCHORED_ALLOWED_ORIGINS", "").split(",")
            if o.strip()
        )
        return cls(
            index=_get(env, "ANCHORED_INDEX"),
            cache_dir=_get(env, "ANCHORED_CACHE_DIR", "/tmp/anchored"),
            refresh_s=_float(env, "ANCHORED_REFRESH_S", 60.0, 0.0, 86400.0),
            feedback=_get(env, "ANCHORED_FEEDBACK", ""),
            llm_provider=provider,  # type: ignore[arg-type]  # checked above
            llm_model=model,
            llm_base_url=base_url,
            llm_api_key=_get(env, "ANCHORED_LLM_API_KEY", ""),
            llm_region=_get(env, "ANCHORED_LLM_REGION", env.get("AWS_REGION", "us-east-1")),
            llm_timeout_s=_float(env, "ANCHORED_LLM_TIMEOUT_S", 12.0, 1.0, 3600.0),
            deadline_s=_float(env, "ANCHORED_DEADLINE_S", 20.0, 2.0, 3600.0),
            llm_context_tokens=_int(env, "ANCHORED_LLM_CONTEXT_TOKENS", 8192, 1024, 10_000_000),
            llm_max_output_tokens=_int(env, "ANCHORED_LLM_MAX_OUTPUT_TOKENS", 600, 64, 100_000),
            llm_retries=_int(env, "ANCHORED_LLM_RETRIES", 1, 0, 5),
            llm_rewrite=_bool(env, "ANCHORED_LLM_REWRITE", False),
            llm_rewrite_timeout_s=_float(env, "ANCHORED_LLM_REWRITE_TIMEOUT_S", 4.0, 0.5, 600.0),
            allowed_origins=origins,
            allowed_hosts=tuple(
                h.strip() for h in _get(env, "ANCHORED_ALLOWED_HOSTS", "").split(",") if h.strip()
            ),
            forwarded_allow_ips=_get(env, "ANCHORED_FORWARDED_ALLOW_IPS", ""),
            max_question_chars=_int(env, "ANCHORED_MAX_QUESTION_CHARS", 2000, 10, 100_000),
            max_history_turns=_int(env, "ANCHORED_MAX_HISTORY_TURNS", 6, 0, 50),
            max_history_chars=_int(env, "ANCHORED_MAX_HISTORY_CHARS", 8000, 0, 200_000),
            max_body_bytes=_int(env, "ANCHORED_MAX_BODY_BYTES", 65536, 1024, 10_000_000),
            rate_limit_per_min=_int(env, "ANCHORED_RATE_LIMIT_PER_MIN", 30, 0, 100_000),
            context_tokens=_int(env, "ANCHORED_CONTEXT_TOKENS", 6000, 500, 1_000_000),
            max_passages=_int(env, "ANCHORED_MAX_PASSAGES", 200, 5, 1000),
            site_name=_get(env, "ANCHORED_SITE_NAME", ""),
            worker_threads=_int(env, "ANCHORED_WORKER_THREADS", 0, 0, 1000),
            answer_id_secret=_get(env, "ANCHORED_ANSWER_ID_SECRET", ""),
            **_spend_and_limits(env),
        )


def _spend_and_limits(env: Mapping[str, str]) -> dict[str, Any]:
    """The spend cap, shared state, client networks and API key secret settings."""
    state = _get(env, "ANCHORED_SHARED_STATE", "")
    kind, _, rest = state.partition(":")
    if state not in ("", "memory") and not (kind in ("dynamodb", "file") and rest):
        raise SettingsError(
            f"ANCHORED_SHARED_STATE must be memory, dynamodb:TABLE or file:PATH, got {state!r}"
        )
    big = 10**12
    values: dict[str, Any] = {
        "shared_state": state,
        "rate_limit_ipv6_prefix": _int(env, "ANCHORED_RATE_LIMIT_IPV6_PREFIX", 64, 32, 128),
        "budget_tokens_per_day": _int(env, "ANCHORED_BUDGET_TOKENS_PER_DAY", 0, 0, big),
        "budget_tokens_per_hour": _int(env, "ANCHORED_BUDGET_TOKENS_PER_HOUR", 0, 0, big),
        "budget_usd_per_day": _float(env, "ANCHORED_BUDGET_USD_PER_DAY", 0.0, 0.0, 1e9),
        "budget_usd_per_hour": _float(env, "ANCHORED_BUDGET_USD_PER_HOUR", 0.0, 0.0, 1e9),
        "budget_client_share": _float(env, "ANCHORED_BUDGET_CLIENT_SHARE", 0.25, 0.001, 1.0),
        "llm_price_input_per_mtok": _float(env, "ANCHORED_LLM_PRICE_INPUT_PER_MTOK", 0.0, 0.0, 1e6),
        "llm_price_output_per_mtok": _float(
            env, "ANCHORED_LLM_PRICE_OUTPUT_PER_MTOK", 0.0, 0.0, 1e6
        ),
        "llm_api_key_secret": _get(env, "ANCHORED_LLM_API_KEY_SECRET", ""),
        "front_secret": _get(env, "ANCHORED_FRONT_SECRET", ""),
        "client_ip_header": _get(
            env, "ANCHORED_CLIENT_IP_HEADER", "cloudfront-viewer-address"
        ).lower(),
        "question_log": _get(env, "ANCHORED_QUESTION_LOG", ""),
        "question_log_days": _int(env, "ANCHORED_QUESTION_LOG_DAYS", 90, 1, 3650),
        "question_log_mask": _bool(env, "ANCHORED_QUESTION_LOG_MASK", False),
        "max_versions_loaded": _int(env, "ANCHORED_MAX_VERSIONS_LOADED", 3, 1, 100),
    }
    _check_question_log(str(values["question_log"]), env)
    if values["front_secret"] and len(values["front_secret"]) < 16:
        raise SettingsError("ANCHORED_FRONT_SECRET must be at least 16 characters")
    money = values["budget_usd_per_day"] or values["budget_usd_per_hour"]
    priced = values["llm_price_input_per_mtok"] or values["llm_price_output_per_mtok"]
    if money and not priced:
        raise SettingsError(
            "ANCHORED_BUDGET_USD_PER_DAY/_PER_HOUR need the model's prices: set "
            "ANCHORED_LLM_PRICE_INPUT_PER_MTOK and ANCHORED_LLM_PRICE_OUTPUT_PER_MTOK"
        )
    secret = str(values["llm_api_key_secret"])
    if secret and not secret.startswith(("arn:", "ssm:", "secretsmanager:")):
        raise SettingsError(
            "ANCHORED_LLM_API_KEY_SECRET must be a Secrets Manager secret or SSM parameter "
            f"ARN (or secretsmanager:NAME / ssm:NAME), got {secret!r}"
        )
    if secret and _get(env, "ANCHORED_LLM_API_KEY", ""):
        raise SettingsError("set ANCHORED_LLM_API_KEY or ANCHORED_LLM_API_KEY_SECRET, not both")
    return values


def _check_question_log(location: str, env: Mapping[str, str]) -> None:
    """The log lives apart from the index and the cache, where no publish or eviction goes."""
    if not location:
        return
    for key in ("ANCHORED_INDEX", "ANCHORED_CACHE_DIR"):
        other = _get(env, key, "/tmp/anchored" if key == "ANCHORED_CACHE_DIR" else "").rstrip("/")
        if other and (location.rstrip("/") == other or location.startswith(other + "/")):
            raise SettingsError(f"ANCHORED_QUESTION_LOG must not be inside {key} ({other})")
