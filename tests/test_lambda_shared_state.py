"""The artifact with template.yaml's shared-state environment: rate limit and spend cap in DynamoDB.

As ``test_lambda_artifact.py``: ``handler.handler`` imported from the built
artifact in an isolated interpreter, fed function URL events; the index on
moto's S3 and the counters in a table on moto's DynamoDB, both over HTTP.
"""

from __future__ import annotations

import copy
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from dynamoserver import aws_client, create_table, serialise_item_writes
from lambda_build import build_artifact, invoke, lambda_env
from s3server import MotoS3, moto_s3

from build_index.publish import publish

__all__ = ["moto_s3"]  # fixtures used by name

EVENTS = Path(__file__).parent / "events"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the artifact holds manylinux wheels"
)


def _event(name: str, source_ip: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    event = copy.deepcopy(event)
    event["requestContext"]["http"]["sourceIp"] = source_ip
    event["headers"]["x-forwarded-for"] = source_ip
    return event


def test_the_artifact_counts_requests_per_64_in_dynamodb(
    moto_s3: MotoS3, qa_index: Path, tmp_path: Path
) -> None:
    serialise_item_writes()
    client = moto_s3.client()
    bucket = f"anchored-lambda-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    target = f"s3://{bucket}/docs"
    publish(qa_index, target, client=client)
    table = f"anchored-state-{uuid.uuid4().hex[:12]}"
    dynamodb = aws_client(moto_s3, "dynamodb")
    create_table(dynamodb, table)
    env = lambda_env(
        target,
        moto_s3.endpoint_url,
        tmp_path / "lambda-tmp",
        AWS_ENDPOINT_URL_DYNAMODB=moto_s3.endpoint_url,
        ANCHORED_SHARED_STATE=f"dynamodb:{table}",
        ANCHORED_RATE_LIMIT_PER_MIN="3",
        ANCHORED_BUDGET_TOKENS_PER_DAY="2000000",
        ANCHORED_BUDGET_TOKENS_PER_HOUR="500000",
    )
    # Four addresses of one IPv6 /64 and one other network: the fourth of the /64 is refused.
    ips = ["2001:db8:9:1::a", "2001:db8:9:1::b", "2001:db8:9:1:ffff::c", "2001:db8:9:1::d"]
    events = [_event("function-url-search.json", ip) for ip in ips]
    events.append(_event("function-url-search.json", "2001:db8:9:2::a"))
    artifact, _ = build_artifact()
    run = invoke(artifact, events, env)
    statuses = [r["statusCode"] for r in run["responses"]]
    assert statuses == [200, 200, 200, 429, 200], run["stderr"][-4000:]
    items = dynamodb.scan(TableName=table)["Items"]
    # Summed over minute windows: the requests may straddle a minute's end on a slow run.
    counted: dict[str, int] = {}
    for i in items:
        key = i["pk"]["S"].rsplit("#", 1)[0]
        counted[key] = counted.get(key, 0) + int(i["n"]["N"])
    assert counted == {"rate#2001:db8:9:1::/64": 3, "rate#2001:db8:9:2::/64": 1}


def test_the_artifact_reads_the_key_secret_and_counts_spend(
    moto_s3: MotoS3, qa_index: Path, tmp_path: Path
) -> None:
    """template.yaml's LLM settings: key from Secrets Manager, spend counted in DynamoDB."""
    from fakes import FakeOpenAIServer, Reply, quote_passages

    serialise_item_writes()
    client = moto_s3.client()
    bucket = f"anchored-lambda-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    target = f"s3://{bucket}/docs"
    publish(qa_index, target, client=client)
    table = f"anchored-state-{uuid.uuid4().hex[:12]}"
    dynamodb = aws_client(moto_s3, "dynamodb")
    create_table(dynamodb, table)
    key = "sk-lambda-secret-0123456789abcdef"
    arn = aws_client(moto_s3, "secretsmanager").create_secret(
        Name=f"anchored/{uuid.uuid4().hex[:8]}", SecretString=key
    )["ARN"]
    # A usage above the prompt's words (a report below them is not believed: budget.py).
    with FakeOpenAIServer(default=Reply(quote_passages(k=1), usage=(2000, 40))) as srv:
        env = lambda_env(
            target,
            moto_s3.endpoint_url,
            tmp_path / "lambda-tmp",
            AWS_ENDPOINT_URL_DYNAMODB=moto_s3.endpoint_url,
            AWS_ENDPOINT_URL_SECRETS_MANAGER=moto_s3.endpoint_url,
            ANCHORED_SHARED_STATE=f"dynamodb:{table}",
            ANCHORED_LLM_PROVIDER="openai",
            ANCHORED_LLM_MODEL="fake-model",
            ANCHORED_LLM_BASE_URL=srv.url,
            ANCHORED_LLM_API_KEY_SECRET=arn,
            ANCHORED_BUDGET_TOKENS_PER_DAY="2000000",
            ANCHORED_BUDGET_TOKENS_PER_HOUR="500000",
        )
        artifact, _ = build_artifact()
        run = invoke(artifact, [_event("function-url-ask.json", "198.51.100.23")], env)
        (response,) = run["responses"]
        assert response["statusCode"] == 200, run["stderr"][-4000:]
        body = json.loads(response["body"])
        assert body["mode"] == "llm", body
        assert srv.requests and all(r.sent_credential(key) for r in srv.requests)
    assert key not in run["stderr"]
    items = {i["pk"]["S"]: i for i in dynamodb.scan(TableName=table)["Items"]}
    (day,) = [v for k, v in items.items() if k.startswith("budget#")]
    assert int(day["tokens"]["N"]) == len(srv.requests) * 2040, "settled to the reported usage"
