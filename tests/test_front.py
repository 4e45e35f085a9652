"""Behind CloudFront + WAF: only requests with the front's secret, limits per reader (front.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import appsettings
import httpx
import pytest
from anchored_query.serve.app import create_app
from anchored_query.serve.front import viewer_ip
from anchored_query.settings import Settings, SettingsError

SECRET = "f" * 12 + "front-secret-0123"
EDGE = "130.176.1.10"  # a CloudFront server: the peer the function sees


def settings_for(index: Path, tmp_path: Path, **extra: Any) -> Settings:
    """The app under test, with a rate limit of 3 a minute unless ``extra`` says otherwise."""
    return appsettings.settings_for(index, tmp_path, **{"rate_limit_per_min": 3, **extra})


def statuses(app: Any, requests: list[dict[str, str]]) -> list[int]:
    async def run() -> list[int]:
        transport = httpx.ASGITransport(app=app, client=(EDGE, 443))
        async with httpx.AsyncClient(transport=transport, base_url="http://fn") as c:
            return [
                (await c.get("/v1/search", params={"q": "port"}, headers=h)).status_code
                for h in requests
            ]

    return asyncio.run(run())


def test_viewer_address_forms() -> None:
    assert viewer_ip("198.51.100.10:46532") == "198.51.100.10"
    assert viewer_ip("2001:db8::1:46532") == "2001:db8::1"
    assert viewer_ip("[2001:db8::7]:443") == "2001:db8::7"
    assert viewer_ip("203.0.113.4, 130.176.1.10") == "203.0.113.4"
    assert viewer_ip("") is None and viewer_ip("nonsense") is None


@pytest.mark.parametrize(
    ("value", "address"),
    [
        # A compressed address whose port reads as one more group (issue 23, finding 6).
        ("2001:db8::a:b:c:d:443", "2001:db8::a:b:c:d"),
        ("2001:db8::a:b:c:d:80", "2001:db8::a:b:c:d"),
        ("2001:db8:0:a:b:c:d:1:443", "2001:db8:0:a:b:c:d:1"),
        ("2001:db8::1:1", "2001:db8::1"),
        ("::1:443", "::1"),
        ("::ffff:198.51.100.7:443", "::ffff:c633:6407"),
        ("[2001:db8::a:b:c:d]:443", "2001:db8::a:b:c:d"),
        ("[::1]:8080", "::1"),
        ("198.51.100.10:443", "198.51.100.10"),
        ("198.51.100.10", "198.51.100.10"),
        ("2001:DB8::A:443", "2001:db8::a"),
        ("[2001:db8::7", None),
        ("2001:db8::zz:443", None),
    ],
)
def test_cloudfront_viewer_address_has_its_port_taken_off_first(
    value: str, address: str | None
) -> None:
    assert viewer_ip(value, with_port=True) == address


@pytest.mark.parametrize(
    ("value", "address"),
    [
        # X-Forwarded-For and the like: an unbracketed IPv6 address is read whole.
        ("2001:db8::5", "2001:db8::5"),
        ("2001:db8::a:b:c:d", "2001:db8::a:b:c:d"),
        ("2001:db8::a:b:c:443", "2001:db8::a:b:c:443"),
        ("::1", "::1"),
        ("[2001:db8::7]:443", "2001:db8::7"),
        ("198.51.100.10:443, 130.176.1.10", "198.51.100.10"),
        (" 203.0.113.4 ", "203.0.113.4"),
        ("unknown", None),
    ],
)
def test_forwarded_for_reads_a_bare_address_whole(value: str, address: str | None) -> None:
    assert viewer_ip(value, with_port=False) == address


def test_one_ipv6_reader_keeps_one_key_whatever_the_host_part(
    qa_index: Path, tmp_path: Path
) -> None:
    # Compressed addresses of one /64 with a short port: one reader to the limit.
    app = create_app(settings_for(qa_index, tmp_path, front_secret=SECRET))
    hosts = ["2001:db8::a:b:c:d", "2001:db8::a:b:c:e", "2001:db8::1:2:3:4", "2001:db8::9:9:9:9"]
    sent = [{"x-anchored-front": SECRET, "cloudfront-viewer-address": f"{h}:443"} for h in hosts]
    assert statuses(app, sent) == [200, 200, 200, 429]


def test_without_the_secret_header_everything_is_refused(qa_index: Path, tmp_path: Path) -> None:
    app = create_app(settings_for(qa_index, tmp_path, front_secret=SECRET))
    wrong = {"x-anchored-front": SECRET[:-1] + "x"}
    assert statuses(app, [{}, wrong]) == [403, 403]
    assert statuses(app, [{"x-anchored-front": SECRET}]) == [200]


def test_readers_behind_one_edge_are_limited_apart(qa_index: Path, tmp_path: Path) -> None:
    app = create_app(settings_for(qa_index, tmp_path, front_secret=SECRET))

    def viewer(ip: str) -> dict[str, str]:
        return {"x-anchored-front": SECRET, "cloudfront-viewer-address": f"{ip}:50000"}

    assert statuses(app, [viewer("203.0.113.7")] * 4) == [200, 200, 200, 429]
    assert statuses(app, [viewer("198.51.100.8")]) == [200]
    # One IPv6 reader's /64, whatever address and edge it comes from.
    v6 = [viewer("2001:db8:5:6::1"), viewer("2001:db8:5:6::2"), viewer("2001:db8:5:6:ff::3")]
    assert statuses(app, [*v6, viewer("2001:db8:5:6::4")]) == [200, 200, 200, 429]


def test_without_a_front_secret_the_header_is_not_believed(qa_index: Path, tmp_path: Path) -> None:
    app = create_app(settings_for(qa_index, tmp_path))
    forged = [{"cloudfront-viewer-address": f"203.0.113.{i}:1"} for i in range(5)]
    assert statuses(app, forged) == [200, 200, 200, 429, 429]


def test_front_secret_must_be_long() -> None:
    with pytest.raises(SettingsError, match="16"):
        Settings.from_env({"ANCHORED_INDEX": "x", "ANCHORED_FRONT_SECRET": "short"})
