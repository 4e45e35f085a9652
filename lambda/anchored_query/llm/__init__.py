"""Language-model clients behind one contract: ``complete(messages) -> Completion``.

>>> client = make_client("openai", base_url="http://127.0.0.1:11434/v1", model="qwen3")
>>> client.name
'openai:qwen3'
>>> make_client("none") is None
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anchored_query.llm.base import ChatMessage, Completion, LLMClient

if TYPE_CHECKING:
    from anchored_query.llm.bedrock import BedrockClient
    from anchored_query.llm.openai_compat import OpenAICompatClient

__all__ = [
    "BedrockClient",
    "ChatMessage",
    "Completion",
    "LLMClient",
    "OpenAICompatClient",
    "make_client",
]


def __getattr__(name: str) -> Any:
    """The clients are imported on first use: boto3 or httpx cost a cold start ~0.1 s each."""
    if name == "BedrockClient":
        from anchored_query.llm.bedrock import BedrockClient

        return BedrockClient
    if name == "OpenAICompatClient":
        from anchored_query.llm.openai_compat import OpenAICompatClient

        return OpenAICompatClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PROVIDERS = ("none", "openai", "bedrock")

# Setting names each provider takes; aliases let one settings object feed either one.
_OPENAI_KEYS = {
    "base_url": "base_url",
    "api_key": "api_key",
    "model": "model",
    "timeout_s": "timeout_s",
    "max_retries": "max_retries",
}
_BEDROCK_KEYS = {
    "model": "model_id",
    "model_id": "model_id",
    "region": "region",
    "endpoint_url": "endpoint_url",
    "base_url": "endpoint_url",
    "timeout_s": "timeout_s",
    "max_retries": "max_retries",
}
_REQUIRED = {"openai": ("base_url", "model"), "bedrock": ("model_id",)}


def make_client(provider: str, **settings: Any) -> LLMClient | None:
    """Build the client for ``provider`` ("none" → ``None``, "openai", "bedrock").

    Settings that are ``None`` or ``""`` count as unset, so one settings object
    can be passed whatever the provider; a set one the provider does not use,
    or a missing required one, raises ValueError naming it. Numbers may be
    strings (read from the environment).
    """
    kind = (provider or "none").strip().lower()
    if kind == "none":
        return None
    if kind not in ("openai", "bedrock"):
        raise ValueError(f"unknown LLM provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    names = _OPENAI_KEYS if kind == "openai" else _BEDROCK_KEYS
    given = {k: v for k, v in settings.items() if v is not None and v != ""}
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ValueError(f"{kind} provider does not use setting(s): {', '.join(unknown)}")
    args: dict[str, Any] = {}
    for key, value in given.items():
        target = names[key]
        if target in args:
            raise ValueError(f"{kind} provider got {target} twice (via {key})")
        args[target] = value
    missing = [key for key in _REQUIRED[kind] if key not in args]
    if missing:
        raise ValueError(f"{kind} provider needs setting(s): {', '.join(missing)}")
    try:
        if "timeout_s" in args:
            args["timeout_s"] = float(args["timeout_s"])
        if "max_retries" in args:
            args["max_retries"] = int(args["max_retries"])
    except ValueError:
        raise ValueError(f"{kind} provider: timeout_s / max_retries must be numbers") from None
    if kind == "openai":
        from anchored_query.llm.openai_compat import OpenAICompatClient

        return OpenAICompatClient(
            base_url=str(args["base_url"]),
            api_key=str(args.get("api_key", "")),
            model=str(args["model"]),
            **{k: args[k] for k in ("timeout_s", "max_retries") if k in args},
        )
    from anchored_query.llm.bedrock import BedrockClient

    return BedrockClient(
        model_id=str(args["model_id"]),
        region=args.get("region"),
        endpoint_url=args.get("endpoint_url"),
        **{k: args[k] for k in ("timeout_s", "max_retries") if k in args},
    )
