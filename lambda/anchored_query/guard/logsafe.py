"""Keep credentials out of the logs, whoever writes them.

At DEBUG, botocore logs every request it sends with its headers: the SigV4
``Authorization`` header names the access key id and ``X-Amz-Security-Token``
is a live session credential (on Lambda, always). A provider's error text may
echo the API key it was sent. :func:`protect` installs, once per process, a
log-record factory that masks the given secrets, the AWS credentials in the
environment and anything shaped like a credential in every record's message
and traceback before any handler sees it, whatever logger wrote it.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any

from anchored_query.errors import redact

_AWS_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
# Shorter values are not secrets but placeholders ("testing", "ollama") that would mask
# ordinary words everywhere; real keys, key ids and tokens are 20 characters or more.
_MIN_SECRET_CHARS = 12
_PATTERNS = (
    # botocore's request repr and canonical request: 'X-Amz-Security-Token': b'...'
    re.compile(r"(?i)(x-amz-security-token['\"]?\s*[:=]\s*b?['\"]?)[^'\"\s,}]+"),
    re.compile(r"(Credential=)[^/\s,'\"]+"),
    re.compile(r"(Signature=)[0-9a-fA-F]{16,}"),
)

_lock = threading.Lock()
_secrets: set[str] = set()
_previous: Any = None


def protect(*secrets: str) -> None:
    """Mask ``secrets`` and the environment's AWS credentials in every log record from now on."""
    global _previous
    found = [*secrets, *(os.environ.get(name, "") for name in _AWS_SECRETS)]
    with _lock:
        _secrets.update(s for s in found if len(s) >= _MIN_SECRET_CHARS)
        if _previous is None:
            _previous = logging.getLogRecordFactory()
            logging.setLogRecordFactory(_make_record)


def scrub(text: str) -> str:
    """``text`` with every protected secret and credential-shaped value masked."""
    for pattern in _PATTERNS:
        text = pattern.sub(r"\1[REDACTED]", text)
    return redact(text, *sorted(_secrets, key=len, reverse=True))


# What a reader may type that names them or opens something: e-mail addresses, phone
# numbers (9 to 15 digits, with + ( ) . - or spaces between, 10 when written as one run;
# not a date, not an IPv4 address) and long tokens (32 characters or more: of upper and
# lower case letters and digits, or hex) beside the credential shapes :func:`scrub` masks.
_EMAIL = re.compile(r"[\w.%+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?<![\w.+-])\+?\(?\d(?:[ ().-]{0,2}\d){8,18}(?![\w-])")
_DATE = re.compile(r"\d{4}-\d\d-\d\d")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_TOKEN = re.compile(
    r"(?<![\w-])(?:(?=[\w-]*\d)(?=[\w-]*[a-z])(?=[\w-]*[A-Z])[\w-]{32,}|[0-9a-fA-F]{32,})(?![\w-])"
)


def mask_personal(text: str) -> str:
    """``text`` with e-mail addresses as ``[email]``, phone numbers as ``[phone]`` and
    key-shaped strings as ``[REDACTED]`` (the question log's ``ANCHORED_QUESTION_LOG_MASK``)."""
    text = _EMAIL.sub("[email]", text)
    text = _TOKEN.sub("[REDACTED]", scrub(text))
    return _PHONE.sub(_phone, text)


def _phone(match: re.Match[str]) -> str:
    found = match.group(0)
    digits = sum(c.isdigit() for c in found)
    one_run = found.isdigit()
    if not (10 if one_run else 9) <= digits <= 15 or _DATE.match(found) or _IPV4.fullmatch(found):
        return found
    return "[phone]"


def without_secrets(text: str) -> str:
    """``text`` with the protected secrets themselves masked (no pattern guessing: for
    text shown to readers, where a documented ``token: abc`` must stay as it is)."""
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "[REDACTED]")
    return text


def _make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record: logging.LogRecord = _previous(*args, **kwargs)
    try:
        message = record.getMessage()
    except Exception:
        return record  # a broken format: let the handler report it as usual
    clean = scrub(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[1] is not None:
        record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)
    return record
