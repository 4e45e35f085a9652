"""Checks on what a client sends; every rejection is a 4xx with a clear message."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from anchored_query.errors import QueryError
from anchored_query.settings import Settings
from anchored_query.types import Scope, Turn

if TYPE_CHECKING:
    from build_index.index_format import Index

Mode = Literal["auto", "llm", "extractive"]
MAX_SCOPE_PREFIXES = 50
MAX_PREFIX_CHARS = 300
MAX_NAMES = 10  # unknown keys named in an error message
MAX_NAME_CHARS = 60
_LANG_TAG = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{1,8}){0,3}")


@dataclass(frozen=True)
class AskRequest:
    """A checked ``POST /v1/ask`` body."""

    question: str
    history: tuple[Turn, ...] = ()
    scope: Scope = field(default_factory=Scope)
    mode: Mode = "auto"
    lang: str = ""  # the reader's language (languages.py); "": answer from every language
    other_languages: bool = False  # also cite pages in other languages than ``lang``
    version: str | None = None  # a version or alias of a versioned index; None: the default


@dataclass(frozen=True)
class FeedbackRequest:
    """A checked ``POST /v1/feedback`` body."""

    answer_id: str
    rating: Literal["up", "down"]
    reason: str = ""
    comment: str = ""


def bad(message: str, code: str = "bad_request") -> QueryError:
    return QueryError(400, code, message)


def parse_json_body(body: bytes, limit: int) -> dict[str, Any]:
    """Decode a JSON object body (UTF-8 only), or raise a 4xx QueryError."""
    if len(body) > limit:
        raise QueryError(413, "too_large", f"the request body is over {limit} bytes")
    if not body.strip():
        raise bad("the request body is empty; send a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("the request body is not UTF-8", "bad_encoding") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # ValueError: JSONDecodeError, int over 4300 digits
        raise bad("the request body is not valid JSON", "bad_json") from None
    if not isinstance(data, dict):
        raise bad("the request body must be a JSON object")
    return data


def clean_text(value: object, field: str, limit: int, *, required: bool = True) -> str:
    """A string field, control characters removed, length-checked."""
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise bad(f"'{field}' must be a string")
    text = _without_controls(value).strip()
    if required and not text:
        raise bad(f"'{field}' is empty", "empty")
    if len(text) > limit:
        raise QueryError(413, "too_large", f"'{field}' is longer than {limit} characters")
    return text


def _without_controls(value: str) -> str:
    """``value`` without control, lone surrogate and private-use characters (tab and
    newline kept). A lone surrogate (``"\\ud800"`` is valid JSON) cannot be encoded
    as UTF-8: left in, it breaks the embedder's tokenizer and the LLM request."""
    return "".join(
        ch for ch in value if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cs", "Co")
    )


def _names(keys: set[str]) -> str:
    """Client-sent key names for an error message: cleaned (a lone surrogate cannot
    be encoded into the JSON response), shortened, at most 10 of them."""
    names = sorted(_without_controls(key)[:MAX_NAME_CHARS] for key in keys)
    more = f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else ""
    return ", ".join(names[:MAX_NAMES]) + more


def parse_scope(value: object) -> Scope:
    if value is None:
        return Scope()
    if not isinstance(value, dict):
        raise bad("'scope' must be an object with 'include' and/or 'exclude' lists")
    unknown = set(value) - {"include", "exclude"}
    if unknown:
        raise bad(f"'scope' has unknown keys: {_names(unknown)}")
    parts: dict[str, tuple[str, ...]] = {}
    for key in ("include", "exclude"):
        items = value.get(key) or []
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise bad(f"'scope.{key}' must be a list of page prefixes (strings)")
        if len(items) > MAX_SCOPE_PREFIXES:
            raise bad(f"'scope.{key}' has more than {MAX_SCOPE_PREFIXES} prefixes")
        if any(len(i) > MAX_PREFIX_CHARS for i in items):
            raise bad(f"a 'scope.{key}' prefix is longer than {MAX_PREFIX_CHARS} characters")
        if any(_without_controls(i) != i or "\n" in i or "\t" in i for i in items):
            raise bad(f"a 'scope.{key}' prefix holds control characters; send page URLs")
        parts[key] = tuple(i.lstrip("/") for i in items)
    return Scope(include=parts["include"], exclude=parts["exclude"])


_section_cache: dict[str, frozenset[str]] = {}


def section_prefixes(pages: Iterable[str]) -> frozenset[str]:
    """Every prefix a scope may name: each page URL and each of its leading path
    segments, with and without the trailing slash (``guide/``, ``guide``)."""
    found: set[str] = set()
    for page in pages:
        parts = page.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            found.add(prefix)
            if i < len(parts):
                found.add(prefix + "/")
    found.discard("")
    return frozenset(found)


def check_scope(scope: Scope, index: Index) -> None:
    """400 ``unknown_scope`` unless every scope prefix names a page or section of
    ``index`` (worked out once per build). Free text never reaches the prompt's site
    state this way."""
    if scope.is_whole_site():
        return
    build_id = index.build_id
    known = _section_cache.get(build_id)
    if known is None:
        known = section_prefixes(chunk["page"] for chunk in index.chunks)
        if len(_section_cache) >= 4:
            _section_cache.pop(next(iter(_section_cache)))
        _section_cache[build_id] = known
    for key, prefixes in (("include", scope.include), ("exclude", scope.exclude)):
        if any(prefix and prefix not in known for prefix in prefixes):
            raise bad(
                f"a 'scope.{key}' prefix is not a page or section of this site; "
                "send page URL prefixes such as 'guide/'",
                "unknown_scope",
            )


def parse_history(value: object, settings: Settings) -> tuple[Turn, ...]:
    """The last turns of the conversation; older turns are dropped, not refused."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad("'history' must be a list of {role, content} objects")
    if len(value) > 1000:
        raise QueryError(413, "too_large", "'history' has more than 1000 turns")
    turns: list[Turn] = []
    budget = settings.max_history_chars
    for item in reversed(
        value[-settings.max_history_turns * 2 :] if settings.max_history_turns else []
    ):
        if not isinstance(item, dict):
            raise bad("each 'history' item must be an object with 'role' and 'content'")
        role = item.get("role")
        if role not in ("user", "assistant"):
            raise bad("a 'history' role must be 'user' or 'assistant'")
        content = item.get("content")
        if not isinstance(content, str):
            raise bad("a 'history' content must be a string")
        content = _without_controls(content).strip()[:budget]
        if not content:
            continue
        budget -= len(content)
        turns.append(Turn(role=role, content=content))
        if budget <= 0:
            break
    return tuple(reversed(turns))


def parse_ask(data: dict[str, Any], settings: Settings) -> AskRequest:
    """Check a ``/v1/ask`` body."""
    unknown = set(data) - {"question", "history", "scope", "mode", "version"}
    unknown -= LANGUAGE_FIELDS
    if unknown:
        raise bad(f"unknown fields: {_names(unknown)}")
    question = clean_text(data.get("question"), "question", settings.max_question_chars)
    mode = data.get("mode", "auto")
    if mode not in ("auto", "llm", "extractive"):
        raise bad("'mode' must be auto, llm or extractive")
    return AskRequest(
        question=question,
        history=parse_history(data.get("history"), settings),
        scope=parse_scope(data.get("scope")),
        mode=mode,
        **parse_language(data),
        version=parse_version(data.get("version")),
    )


def parse_version(value: object) -> str | None:
    """The ``version`` field: a version or alias name (``1.2``, ``latest``), or None."""
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= 64:
        raise bad("'version' must be a version or alias name such as '1.2' or 'latest'")
    if not all(ch.isascii() and (ch.isalnum() or ch in "._+-") for ch in value):
        raise bad("'version' may hold only letters, digits and . _ + -", "unknown_version")
    return value


LANGUAGE_FIELDS = frozenset({"lang", "other_languages"})


def parse_language(data: dict[str, Any]) -> dict[str, Any]:
    """``lang`` (the reader's language tag, as ``<html lang>`` has it: ``zh``, ``pt-BR``;
    normalised to lower case) and ``other_languages`` (a boolean) of a request body."""
    lang = data.get("lang")
    if lang is None:
        lang = ""
    if not isinstance(lang, str) or len(lang) > 35:
        raise bad("'lang' must be a language tag such as 'en' or 'zh-CN'")
    tag = lang.strip().lower().replace("_", "-")
    if tag and not _LANG_TAG.fullmatch(tag):
        raise bad("'lang' must be a language tag such as 'en' or 'zh-CN'")
    other = data.get("other_languages", False)
    if not isinstance(other, bool):
        raise bad("'other_languages' must be true or false")
    return {"lang": tag, "other_languages": other}


def parse_feedback(data: dict[str, Any]) -> FeedbackRequest:
    """Check a ``/v1/feedback`` body."""
    unknown = set(data) - {"answer_id", "rating", "reason", "comment"}
    if unknown:
        raise bad(f"unknown fields: {_names(unknown)}")
    answer_id = clean_text(data.get("answer_id"), "answer_id", 64)
    if not all(ch.isalnum() or ch in "-_" for ch in answer_id):
        raise bad("'answer_id' must be the id returned by /v1/ask")
    rating = data.get("rating")
    if rating not in ("up", "down"):
        raise bad("'rating' must be 'up' or 'down'")
    return FeedbackRequest(
        answer_id=answer_id,
        rating=rating,
        reason=clean_text(data.get("reason"), "reason", 200, required=False),
        comment=clean_text(data.get("comment"), "comment", 2000, required=False),
    )


def parse_search(q: str | None, k: str | None, settings: Settings) -> tuple[str, int]:
    """Check ``/v1/search`` query parameters."""
    query = clean_text(q, "q", settings.max_question_chars)
    if k is None or k == "":
        return query, 10
    try:
        count = int(k)
    except ValueError:
        raise bad("'k' must be a whole number") from None
    if not 1 <= count <= 100:
        raise bad("'k' must be between 1 and 100")
    return query, count
