"""The LLM API key from AWS Secrets Manager or SSM Parameter Store, read once.

``ANCHORED_LLM_API_KEY_SECRET`` names where the key is, instead of the key
itself sitting in the function's environment (readable by anyone who may read
the function's configuration):

- ``arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-AbCdEf`` (or
  ``secretsmanager:NAME``): the secret's ``SecretString``; if that is a JSON
  object, its ``"api_key"`` field;
- ``arn:aws:ssm:REGION:ACCOUNT:parameter/NAME`` (or ``ssm:/NAME``): a
  ``SecureString`` (or ``String``) parameter, decrypted.

It is read at cold start (when the engine makes its LLM client), kept in memory
for the life of the instance and masked in every log record from then on; a key
rotated in the store reaches new instances (and redeploys), not warm ones. A
key that cannot be read stops the start with a message naming the ARN and the
AWS error code, never the value, like any other bad setting.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from anchored_query.guard import logsafe

_cache: dict[str, str] = {}
_lock = threading.Lock()


class SecretError(RuntimeError):
    """The key could not be read; the message says where and why, not what."""


def _locate(ref: str) -> tuple[str, str, str | None]:
    """(service, id to ask for, region or None) of a secret reference."""
    if ref.startswith("arn:"):
        parts = ref.split(":", 5)
        if len(parts) == 6 and parts[2] in ("secretsmanager", "ssm") and parts[3]:
            return parts[2], ref, parts[3]
        raise SecretError(
            f"ANCHORED_LLM_API_KEY_SECRET: {ref!r} is not a Secrets Manager secret or "
            "SSM parameter ARN"
        )
    service, _, name = ref.partition(":")
    if service in ("secretsmanager", "ssm") and name:
        return service, name, None
    raise SecretError(f"ANCHORED_LLM_API_KEY_SECRET: cannot read {ref!r}")


def _fetch(service: str, ident: str, region: str | None, client: Any) -> str:
    own = client is None
    if client is None:
        import boto3

        client = boto3.session.Session().client(service, region_name=region)
    try:
        return _ask(service, ident, client)
    finally:
        if own:
            client.close()  # read once: no connection to keep


def _ask(service: str, ident: str, client: Any) -> str:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        if service == "secretsmanager":
            response = client.get_secret_value(SecretId=ident)
            value = response.get("SecretString")
            if value is None:
                raise SecretError(f"{ident} holds binary data, not the key as text")
            return _from_json(ident, value)
        response = client.get_parameter(Name=ident, WithDecryption=True)
        return str(response["Parameter"]["Value"])
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "error")
        raise SecretError(f"cannot read the LLM API key from {ident}: {code}") from None
    except BotoCoreError as exc:
        raise SecretError(
            f"cannot reach {service} to read the LLM API key from {ident}: {type(exc).__name__}"
        ) from None


def _from_json(ident: str, value: str) -> str:
    if not value.lstrip().startswith("{"):
        return value
    try:
        data = json.loads(value)
    except ValueError:
        return value
    key = data.get("api_key") if isinstance(data, dict) else None
    if not isinstance(key, str):
        raise SecretError(f"{ident} is a JSON object without a string 'api_key' field")
    return key


def resolve_api_key(ref: str, *, client: Any = None) -> str:
    """The key ``ref`` points at, read once per process and then served from memory."""
    with _lock:
        if ref in _cache:
            return _cache[ref]
        service, ident, region = _locate(ref)
        value = _fetch(service, ident, region, client).strip()
        if not value:
            raise SecretError(f"the LLM API key in {ident} is empty")
        logsafe.protect(value)
        _cache[ref] = value
        return value
