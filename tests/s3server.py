"""A real-HTTP S3 for tests: moto in server mode on 127.0.0.1, on a free port.

Import the fixtures into a test module (``tests/`` is on ``sys.path``)::

    from s3server import MotoS3, moto_s3, s3  # noqa: F401

``moto_s3`` is one server for the whole session; ``s3`` gives each test its own
empty bucket on it (an :class:`S3Bucket`). Requests travel over HTTP through
botocore exactly as they would to AWS, so conditional PUTs, checksums and ETags
go through moto's real request handling.

What moto 5.x honours in server mode (checked by ``tests/test_publish.py``):
``If-None-Match: *`` and ``If-Match`` on PutObject (412 PreconditionFailed),
``If-None-Match`` on GetObject (304), stored ``ChecksumSHA256`` returned by
HeadObject/GetObject with ``ChecksumMode=ENABLED``, and CopyObject computing the
SHA-256 of the copy. What it does not: it stores a ``ChecksumSHA256`` header
without checking it against the body (real S3 answers 400 BadDigest), and its
conditional PUT is check-then-write without a lock, so unlike S3 two racing
conditional PUTs can in rare cases both succeed.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


class MotoS3:
    """A moto S3 server in a background thread; ``endpoint_url`` is where it listens."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint_url = ""

    def start(self) -> MotoS3:
        """Start listening and return self."""
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        """Shut the server down."""
        self._server.stop()

    def client(self, **config: Any) -> Any:
        """A fresh boto3 S3 client for this server (own session: thread-safe to create)."""
        session = boto3.session.Session(region_name=REGION, **CREDENTIALS)
        settings: dict[str, Any] = {"retries": {"mode": "standard", "max_attempts": 2}}
        settings.update(config)
        return session.client("s3", endpoint_url=self.endpoint_url, config=Config(**settings))


@dataclass
class S3Bucket:
    """One empty bucket on the moto server, with a client that counts the calls it makes."""

    server: MotoS3
    name: str
    client: Any
    calls: Counter[str] = field(default_factory=Counter)

    @property
    def url(self) -> str:
        """``s3://<bucket>/site`` - the location tests publish to."""
        return f"s3://{self.name}/site"

    def counting_client(self) -> tuple[Any, Counter[str]]:
        """Another client whose operations (``PutObject``, ``CopyObject``...) are counted."""
        client = self.server.client()
        calls: Counter[str] = Counter()
        client.meta.events.register(
            "before-call.s3.*",
            lambda model, **_: calls.update([model.name]),
        )
        return client, calls

    def keys(self, prefix: str = "") -> list[str]:
        """Every key in the bucket below ``prefix``, sorted."""
        keys: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.name, Prefix=prefix
        ):
            keys.extend(obj["Key"] for obj in page.get("Contents", []))
        return sorted(keys)

    def get(self, key: str) -> bytes:
        """The bytes of one object."""
        body: bytes = self.client.get_object(Bucket=self.name, Key=key)["Body"].read()
        return body


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    """One moto S3 server for the test session, on 127.0.0.1 and a free port."""
    server = MotoS3().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3(moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch) -> S3Bucket:
    """A fresh, empty bucket for one test; the AWS_* environment points at the server."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS["aws_secret_access_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    client = moto_s3.client()
    name = f"anchored-test-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    return S3Bucket(server=moto_s3, name=name, client=client)


def write_fake_index(
    directory: Path, files: dict[str, bytes], *, created: str = "2026-01-01T00:00:00+00:00"
) -> str:
    """Write a minimal index directory (files + manifest.json) and return its build id.

    Only what publishing and fetching rely on: ``build_id`` (a hash of the
    files), ``created`` and ``files`` with each file's sha256 and size.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.iterdir():
        stale.unlink()
    entries = {}
    for name, data in files.items():
        (directory / name).write_bytes(data)
        entries[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    build_id = hashlib.sha256(
        json.dumps(entries, sort_keys=True).encode() + created.encode()
    ).hexdigest()[:16]
    manifest = {
        "format": "anchored-index",
        "version": 1,
        "build_id": build_id,
        "created": created,
        "files": entries,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return build_id
