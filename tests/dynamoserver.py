"""Real-HTTP DynamoDB, Secrets Manager and SSM for tests: the moto server of ``s3server``.

Import the fixtures into a test module (``tests/`` is on ``sys.path``)::

    from dynamoserver import dynamo_table, aws_env  # noqa: F401
    from s3server import moto_s3  # noqa: F401

One ``ThreadedMotoServer`` (``moto_s3``, session-wide) speaks every service on
one port; ``dynamo_table`` gives each test its own table shaped like the one in
``template.yaml`` (partition key ``pk``, TTL on ``expires_at``). Requests go
over HTTP through botocore, as they would to AWS.

Moto evaluates a ``ConditionExpression`` and applies the update in Python
without a lock of its own, so two concurrent requests could interleave between
the check and the write. DynamoDB guarantees that a conditional write to one
item is atomic; :func:`serialise_item_writes` gives moto's backend that same
guarantee (a lock around ``update_item``), so the concurrency tests test our
use of the condition, not moto's thread safety.
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config
from s3server import CREDENTIALS, REGION, MotoS3

_serialised = False


def serialise_item_writes() -> None:
    """Make moto's DynamoDB ``update_item`` atomic, as DynamoDB's is (once per process)."""
    global _serialised
    if _serialised:
        return
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.Lock()
    original = DynamoDBBackend.update_item

    @functools.wraps(original)
    def update_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return original(self, *args, **kwargs)

    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]
    _serialised = True


def aws_client(server: MotoS3, service: str, **config: Any) -> Any:
    """A boto3 client for ``service`` on the moto server (own session: thread-safe)."""
    session = boto3.session.Session(region_name=REGION, **CREDENTIALS)
    settings: dict[str, Any] = {"retries": {"mode": "standard", "max_attempts": 2}}
    settings.update(config)
    return session.client(service, endpoint_url=server.endpoint_url, config=Config(**settings))


@dataclass
class DynamoTable:
    """One empty table on the moto server, like template.yaml's ``SharedStateTable``."""

    server: MotoS3
    name: str
    client: Any

    def new_client(self) -> Any:
        """Another DynamoDB client (what a second instance of the function would have)."""
        return aws_client(self.server, "dynamodb")

    def items(self) -> dict[str, dict[str, Any]]:
        """Every item, by ``pk``, with numbers as ints."""
        out: dict[str, dict[str, Any]] = {}
        for page in self.client.get_paginator("scan").paginate(TableName=self.name):
            for item in page["Items"]:
                out[item["pk"]["S"]] = {
                    k: int(v["N"]) if "N" in v else v.get("S") for k, v in item.items()
                }
        return out


def create_table(client: Any, name: str) -> None:
    """The table template.yaml declares: ``pk`` string key, on demand, TTL on ``expires_at``."""
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
    )


@pytest.fixture
def aws_env(moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch) -> MotoS3:
    """The AWS_* environment pointing every boto3 client at the moto server."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS["aws_secret_access_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_s3.endpoint_url)
    return moto_s3


@pytest.fixture
def dynamo_table(aws_env: MotoS3, monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoTable]:
    """A fresh table for one test, with item writes as atomic as DynamoDB's.

    The function's DynamoDB timeouts (1 s) are lengthened: moto on a loaded test
    machine can take longer than DynamoDB ever should, and a timed-out update that
    moto still applies is retried and counted twice.
    """
    serialise_item_writes()
    monkeypatch.setattr("anchored_query.guard.shared_state.DYNAMODB_READ_TIMEOUT_S", 20.0)
    monkeypatch.setattr("anchored_query.guard.shared_state.DYNAMODB_CONNECT_TIMEOUT_S", 10.0)
    client = aws_client(aws_env, "dynamodb")
    name = f"anchored-state-{uuid.uuid4().hex[:12]}"
    create_table(client, name)
    try:
        yield DynamoTable(server=aws_env, name=name, client=client)
    finally:
        client.delete_table(TableName=name)


def count_in_sqlite(path: str, tries: int, limit: int = 50) -> int:
    """Try ``tries`` increments of one SQLite counter limited to ``limit``; how many passed.

    Here (a light module) so that a spawned test process need not import the app.
    """
    from anchored_query.guard.shared_state import SQLiteCounters

    store = SQLiteCounters(path)
    return sum(
        store.add("k", {"n": 1}, limits={"n": limit}, expires_at=4e9) is not None
        for _ in range(tries)
    )
