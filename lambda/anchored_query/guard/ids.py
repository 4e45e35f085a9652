"""Answer ids the function can recognise as its own: a random part and its HMAC.

``/v1/ask`` returns ``id = <24 hex random>-<32 hex HMAC-SHA256(key, random)>``
and ``/v1/feedback`` accepts only ids whose HMAC checks, so feedback cannot be
filed against answers that were never given (nor ids made up by the thousand).
Nothing is stored per answer.

The key comes from ``ANCHORED_ANSWER_ID_SECRET`` (at least 16 characters):
every instance of a deployment must share it, or feedback on an answer from
one instance is refused by another. Unset, a random key is made per process —
fine for ``anchored serve``, wrong behind a Lambda function URL, where the
template therefore sets the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from anchored_query.settings import SettingsError

MIN_SECRET_CHARS = 16
_RANDOM_HEX = 24
_MAC_HEX = 32
_ID = re.compile(rf"^([0-9a-f]{{{_RANDOM_HEX}}})-([0-9a-f]{{{_MAC_HEX}}})$")
_PROCESS_KEY = secrets.token_bytes(32)


def _key(secret: str) -> bytes:
    if not secret:
        return _PROCESS_KEY
    if len(secret) < MIN_SECRET_CHARS:
        raise SettingsError(
            f"ANCHORED_ANSWER_ID_SECRET must be at least {MIN_SECRET_CHARS} characters"
        )
    return hashlib.sha256(b"anchored answer id\0" + secret.encode("utf-8")).digest()


def _mac(key: bytes, random_part: str) -> str:
    return hmac.new(key, random_part.encode("ascii"), hashlib.sha256).hexdigest()[:_MAC_HEX]


def check_secret(secret: str) -> None:
    """Raise SettingsError for a secret that is set but too short (at start-up)."""
    _key(secret)


def new_answer_id(secret: str = "") -> str:
    """A fresh answer id signed with ``secret`` (or this process's random key)."""
    random_part = secrets.token_hex(_RANDOM_HEX // 2)
    return f"{random_part}-{_mac(_key(secret), random_part)}"


def is_issued(answer_id: str, secret: str = "") -> bool:
    """True when ``answer_id`` was made by :func:`new_answer_id` with the same key."""
    match = _ID.match(answer_id)
    if match is None:
        return False
    return hmac.compare_digest(match.group(2), _mac(_key(secret), match.group(1)))
