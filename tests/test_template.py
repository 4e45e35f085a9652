"""template.yaml: linted like `sam validate --lint`, and the invariants we rely on.

`sam validate --lint` runs cfn-lint, which validates SAM resources against SAM's
own schemas; cfn-lint is a dev dependency, so the same check runs here offline
without installing the SAM CLI. The other tests read the template with a YAML
loader that understands CloudFormation's short tags (``!Ref``, ``!Sub``...).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from anchored_query.settings import Settings

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
MAKEFILE = REPO / "lambda" / "Makefile"


class CfnLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type hints
    """A safe loader that reads ``!Ref x`` as ``{"Ref": x}``, ``!Sub s`` as ``{"Fn::Sub": s}``."""


def _tag(loader: CfnLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        assert isinstance(node, yaml.MappingNode)
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "Condition":
        return {"Condition": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _tag)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return cast(dict[str, Any], yaml.load(TEMPLATE.read_text(encoding="utf-8"), Loader=CfnLoader))


@pytest.fixture(scope="module")
def function(template: dict[str, Any]) -> dict[str, Any]:
    functions: list[dict[str, Any]] = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::Serverless::Function"
    ]
    assert len(functions) == 1
    return functions[0]


def walk(value: Any) -> Iterator[Any]:
    """Every node of a parsed template fragment, depth first."""
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def statements(template: dict[str, Any], function: dict[str, Any]) -> list[dict[str, Any]]:
    """Every IAM statement the template writes: the function's policies and bucket policies."""
    found = []
    for node in walk(function["Properties"]["Policies"]):
        if isinstance(node, dict) and "Statement" in node:
            found.extend(node["Statement"])
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::S3::BucketPolicy":
            found.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return found


def strings(value: Any) -> list[str]:
    """The literal strings of a fragment (a ``!Sub`` template counts as its text)."""
    out = []
    for node in walk(value):
        if isinstance(node, str):
            out.append(node)
    return out


def test_template_passes_cfn_lint() -> None:
    """What `sam validate --lint --region us-east-1` checks (informational notes aside)."""
    api = pytest.importorskip("cfnlint.api")
    matches = api.lint(
        TEMPLATE.read_text(encoding="utf-8"), config=api.ManualArgs(regions=["us-east-1"])
    )
    problems = [f"{m.rule.id} line {m.linenumber}: {m.message}" for m in matches]
    problems = [p for p in problems if not p.startswith("I")]
    assert problems == []


def test_runtime_and_build_match_the_makefile(function: dict[str, Any]) -> None:
    props = function["Properties"]
    match = re.fullmatch(r"python3\.(\d+)", props["Runtime"])
    assert match and int(match.group(1)) >= 12, props["Runtime"]
    assert props["Handler"] == {"Fn::If": ["StreamResponses", "run.sh", "handler.handler"]}
    assert props["CodeUri"] == "lambda/"
    assert function["Metadata"]["BuildMethod"] == "makefile"
    makefile = MAKEFILE.read_text(encoding="utf-8")
    assert "build-AnchoredFunction:" in makefile
    arch = re.search(r"^LAMBDA_ARCH \?= (\S+)", makefile, re.M)
    version = re.search(r"^LAMBDA_PYTHON \?= (\S+)", makefile, re.M)
    assert arch and version
    assert props["Architectures"] == [{"aarch64": "arm64"}.get(arch.group(1), arch.group(1))]
    assert props["Runtime"] == f"python{version.group(1)}"
    assert (REPO / "lambda" / "handler.py").is_file()


def settings_keys() -> set[str]:
    """The ANCHORED_* variables Settings.from_env reads (it is asked, and we listen)."""

    seen: set[str] = set()

    class Recording(dict[str, str]):
        def get(self, key: str, default: Any = None) -> Any:
            seen.add(key)
            return super().get(key, default)

    Settings.from_env(Recording(ANCHORED_INDEX="s3://bucket/prefix"))
    return {k for k in seen if k.startswith("ANCHORED_")}


def test_environment_names_are_settings(function: dict[str, Any]) -> None:
    variables = function["Properties"]["Environment"]["Variables"]
    known = settings_keys()
    assert "ANCHORED_INDEX" in known and "ANCHORED_ALLOWED_ORIGINS" in known
    adapter = {k for k in variables if k.startswith("AWS_LWA_") or k == "AWS_LAMBDA_EXEC_WRAPPER"}
    unknown = sorted(set(variables) - known - adapter)
    assert unknown == [], f"Settings.from_env does not read {unknown}"
    assert {"ANCHORED_INDEX", "ANCHORED_FEEDBACK", "ANCHORED_CACHE_DIR"} <= set(variables)
    cache = variables["ANCHORED_CACHE_DIR"]
    assert cache.startswith("/tmp/"), "only /tmp is writable on Lambda"


def test_cors_belongs_to_the_function_url(
    function: dict[str, Any], template: dict[str, Any]
) -> None:
    """One layer emits CORS: the URL config, with the site origin as a parameter."""
    props = function["Properties"]
    cors = props["FunctionUrlConfig"]["Cors"]
    assert "ANCHORED_ALLOWED_ORIGINS" not in props["Environment"]["Variables"]
    origins = cors["AllowOrigins"]
    assert {"Ref": "SiteOrigin"} in list(walk(origins)) or any(
        "${SiteOrigin}" in s for s in strings(origins)
    )
    assert "*" not in strings(origins)
    assert "SiteOrigin" in template["Parameters"]
    assert "Default" not in template["Parameters"]["SiteOrigin"], "the origin must be chosen"
    assert sorted(cors["AllowMethods"]) == ["GET", "POST"]
    assert [h.lower() for h in cors["AllowHeaders"]] == ["content-type"]
    assert "retry-after" in [h.lower() for h in cors.get("ExposeHeaders", [])]
    assert cors.get("AllowCredentials", False) is False


def test_iam_statements_are_scoped(template: dict[str, Any], function: dict[str, Any]) -> None:
    found = statements(template, function)
    assert found
    for statement in found:
        if statement["Effect"] == "Deny":
            continue
        actions = (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
        assert all("*" not in a for a in actions), statement
        resources = strings(statement["Resource"])
        assert resources, statement
        for resource in resources:
            assert resource != "*", statement
            if "*" in resource.replace("/*", ""):
                # Only a service-wide ARN pinned down by a condition (Bedrock's cross-region
                # inference profiles route to the foundation model in other regions).
                assert statement.get("Condition"), statement
    by_sid = {s.get("Sid"): s for s in found}
    assert by_sid["WriteFeedbackOnly"]["Action"] == "s3:PutObject"
    assert any("/feedback/*" in s for s in strings(by_sid["WriteFeedbackOnly"]["Resource"]))
    assert not any("ManagedPolicyArns" in str(node) for node in walk(function["Properties"]))


def _function_statements(function: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for node in walk(function["Properties"]["Policies"]):
        if isinstance(node, dict) and "Statement" in node:
            found.extend(node["Statement"])
    return found


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def test_function_reads_the_index_and_nothing_else_of_the_bucket(function: dict[str, Any]) -> None:
    """Not feedback/ (readers' comments) nor anything else under the prefix; never lists."""
    found = _function_statements(function)
    reads = [s for s in found if "s3:GetObject" in _actions(s)]
    assert {s["Sid"] for s in reads} == {"ReadIndexPointer", "ReadIndexBuilds", "ReadIndexVersions"}
    resources = [r for s in reads for r in strings(s["Resource"]) if r.startswith("arn:")]
    # Versioned docs: the catalog, and each version's pointer and builds (site/versions.md).
    assert sorted(r.rsplit("${IndexPrefix}/", 1)[-1] for r in resources) == [
        "builds/*",
        "current.json",
        "versions.json",
        "versions/*/builds/*",
        "versions/*/current.json",
    ], resources
    assert not any("feedback" in r for r in resources)
    assert not [a for s in found for a in _actions(s) if a.startswith("s3:List")]
    # The index store never lists (which is why no s3:ListBucket is granted).
    store = sorted((REPO / "lambda" / "anchored_query" / "store").glob("*.py"))
    assert {"s3_source.py", "build_cache.py", "prefetch.py", "versions.py"} <= {
        m.name for m in store
    }
    for module in store:
        source = module.read_text(encoding="utf-8")
        assert "list_objects" not in source and "get_paginator" not in source, module.name


def test_shared_state_table_is_on_demand_with_ttl_and_update_only(
    template: dict[str, Any], function: dict[str, Any]
) -> None:
    table = template["Resources"]["SharedStateTable"]
    assert table["Type"] == "AWS::DynamoDB::Table"
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["ANCHORED_SHARED_STATE"] == {"Fn::Sub": "dynamodb:${SharedStateTable}"}
    dynamo = [
        s for s in _function_statements(function) if any("dynamodb:" in a for a in _actions(s))
    ]
    assert len(dynamo) == 1
    assert _actions(dynamo[0]) == ["dynamodb:UpdateItem"]
    assert dynamo[0]["Resource"] == {"Fn::GetAtt": ["SharedStateTable", "Arn"]}


def test_a_spend_cap_is_on_by_default_and_fits_an_ask(template: dict[str, Any]) -> None:
    """The default caps are set (a public URL), and an hour holds a worst-case ask many times."""
    params = template["Parameters"]
    per_day = int(params["BudgetTokensPerDay"]["Default"])
    per_hour = int(params["BudgetTokensPerHour"]["Default"])
    assert 0 < per_hour <= per_day
    # The reservation of one answer call: the prompt's bytes (context tokens ~4 bytes each,
    # plus question and history) and the output; the rewrite call is small.
    worst_reservation = 4 * Settings.context_tokens + 2 * Settings.max_history_chars + 4096
    assert per_hour >= 5 * worst_reservation
    description = " ".join(params["ReservedConcurrency"]["Description"].split())
    assert "not a cap on spend" in description


def test_alerts_and_cost_budget_are_off_by_default(template: dict[str, Any]) -> None:
    params, resources, conditions = (
        template["Parameters"],
        template["Resources"],
        template["Conditions"],
    )
    assert params["AlertEmail"]["Default"] == ""
    assert int(params["MonthlyCostBudgetUsd"]["Default"]) == 0
    kinds = {"AWS::Budgets::Budget", "AWS::CloudWatch::Alarm", "AWS::SNS::Topic"}
    optional = [r for r in resources.values() if r["Type"] in kinds]
    assert {r["Type"] for r in optional} == kinds
    for resource in optional:
        condition = resource["Condition"]
        assert {"Ref": "AlertEmail"} in list(walk(conditions[condition])) or any(
            n == {"Condition": "HasAlertEmail"} for n in walk(conditions[condition])
        )


def test_the_key_secret_is_readable_and_only_it(
    template: dict[str, Any], function: dict[str, Any]
) -> None:
    by_sid = {s.get("Sid"): s for s in _function_statements(function)}
    assert by_sid["ReadLlmKeySecret"]["Action"] == "secretsmanager:GetSecretValue"
    assert by_sid["ReadLlmKeyParameter"]["Action"] == "ssm:GetParameter"
    for sid in ("ReadLlmKeySecret", "ReadLlmKeyParameter"):
        assert by_sid[sid]["Resource"] == {"Ref": "LlmApiKeySecret"}
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["ANCHORED_LLM_API_KEY_SECRET"] == {"Ref": "LlmApiKeySecret"}
    pattern = re.compile(template["Parameters"]["LlmApiKeySecret"]["AllowedPattern"])
    assert pattern.match("")
    assert pattern.match("arn:aws:secretsmanager:eu-west-1:123456789012:secret:llm-AbCdEf")
    assert pattern.match("arn:aws:ssm:eu-west-1:123456789012:parameter/anchored/llm-key")
    assert not pattern.match("sk-live-key-pasted-here")


def test_tls_only_policy_can_cover_an_existing_bucket(template: dict[str, Any]) -> None:
    policy = template["Resources"]["IndexBucketPolicy"]
    condition = template["Conditions"][policy["Condition"]]
    assert {"Condition": "CreateIndexBucket"} in list(walk(condition))
    assert {"Condition": "PolicyOnExistingBucket"} in list(walk(condition))
    assert template["Parameters"]["ExistingBucketPolicy"]["Default"] == "false"
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Sid"] == "DenyInsecureTransport" and statement["Effect"] == "Deny"


def test_function_timeout_covers_the_llm_timeout(function: dict[str, Any]) -> None:
    assert Settings.llm_timeout_s < function["Properties"]["Timeout"] <= 900


def test_outputs_name_the_url_and_the_index(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]
    assert outputs["QueryUrl"]["Value"] == {"Fn::GetAtt": ["AnchoredFunctionUrl", "FunctionUrl"]}
    assert "IndexLocation" in outputs


EDGE = REPO / "template-edge.yaml"


def test_edge_template_passes_cfn_lint_and_matches_the_function() -> None:
    """The optional CloudFront + WAF front: linted, and speaking the function's header names."""
    api = pytest.importorskip("cfnlint.api")
    text = EDGE.read_text(encoding="utf-8")
    matches = api.lint(text, config=api.ManualArgs(regions=["us-east-1"]))
    assert [
        f"{m.rule.id} line {m.linenumber}: {m.message}" for m in matches if m.rule.id[0] != "I"
    ] == []
    edge = cast(dict[str, Any], yaml.load(text, Loader=CfnLoader))
    resources = edge["Resources"]
    (rule,) = resources["RateLimitAcl"]["Properties"]["Rules"]
    assert rule["Statement"]["RateBasedStatement"]["AggregateKeyType"] == "IP"
    assert resources["RateLimitAcl"]["Properties"]["Scope"] == "CLOUDFRONT"
    config = resources["Front"]["Properties"]["DistributionConfig"]
    (origin,) = config["Origins"]
    from anchored_query.serve.front import FRONT_HEADER

    assert origin["OriginCustomHeaders"] == [
        {"HeaderName": "X-Anchored-Front", "HeaderValue": {"Ref": "FrontSecret"}}
    ]
    assert FRONT_HEADER.decode() == "x-anchored-front"
    headers = resources["ToFunction"]["Properties"]["OriginRequestPolicyConfig"]["HeadersConfig"]
    assert Settings.client_ip_header in [h.lower() for h in headers["Headers"]]
    assert "host" not in [h.lower() for h in headers["Headers"]]
    assert "POST" in config["DefaultCacheBehavior"]["AllowedMethods"]


def test_function_takes_the_front_secret(
    template: dict[str, Any], function: dict[str, Any]
) -> None:
    assert template["Parameters"]["FrontSecret"]["NoEcho"] is True
    assert template["Parameters"]["FrontSecret"]["Default"] == ""
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["ANCHORED_FRONT_SECRET"] == {"Ref": "FrontSecret"}


def test_answer_ids_are_signed_with_a_generated_shared_key(
    template: dict[str, Any], function: dict[str, Any]
) -> None:
    secret = template["Resources"]["AnswerIdSecret"]
    assert secret["Type"] == "AWS::SecretsManager::Secret"
    generated = secret["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] >= 32
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["ANCHORED_ANSWER_ID_SECRET"] == {
        "Fn::Sub": "{{resolve:secretsmanager:${AnswerIdSecret}:SecretString}}"
    }


def test_every_setting_is_documented() -> None:
    """What Settings.from_env reads, site/reference/settings.md names."""
    doc = (REPO / "site" / "reference" / "settings.md").read_text(encoding="utf-8")
    missing = sorted(key for key in settings_keys() if f"`{key}`" not in doc)
    assert missing == []


def test_the_question_log_is_off_by_default_beside_the_index_and_expires(
    template: dict[str, Any], function: dict[str, Any]
) -> None:
    param = template["Parameters"]["QuestionLogDays"]
    assert param["Default"] == 0 and param["MinValue"] == 0
    env = function["Properties"]["Environment"]["Variables"]
    on, off = env["ANCHORED_QUESTION_LOG"]["Fn::If"][1:]
    assert off == "" and env["ANCHORED_QUESTION_LOG"]["Fn::If"][0] == "LogQuestions"
    location = on["Fn::Sub"][0]
    assert location == "s3://${Bucket}/${IndexPrefix}-question-log/"  # not under the index
    rules = template["Resources"]["IndexBucketResource"]["Properties"]["LifecycleConfiguration"]
    rule = next(r["Fn::If"][1] for r in rules["Rules"] if isinstance(r, dict) and "Fn::If" in r)
    assert rule["Prefix"] == {"Fn::Sub": "${IndexPrefix}-question-log/"}
    assert rule["ExpirationInDays"] == {"Ref": "QuestionLogDays"}
    assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] == 1
    writes = {s["Sid"]: s for s in _function_statements(function) if s.get("Sid")}
    log_write = writes["WriteQuestionLogOnly"]
    assert log_write["Action"] == "s3:PutObject"
    assert strings(log_write["Resource"])[0].endswith("${IndexPrefix}-question-log/*")


def test_streaming_runs_the_same_app_behind_the_web_adapter(
    template: dict[str, Any], function: dict[str, Any]
) -> None:
    """ResponseStreaming (default true): the function URL streams, through the AWS Lambda
    Web Adapter layer running lambda/run.sh; false keeps the buffered Mangum handler."""
    assert template["Parameters"]["ResponseStreaming"]["Default"] == "true"
    assert template["Conditions"]["StreamResponses"] == {
        "Fn::Equals": [{"Ref": "ResponseStreaming"}, "true"]
    }
    props = function["Properties"]
    assert props["FunctionUrlConfig"]["InvokeMode"] == {
        "Fn::If": ["StreamResponses", "RESPONSE_STREAM", "BUFFERED"]
    }
    layers = props["Layers"]["Fn::If"]
    assert layers[0] == "StreamResponses" and layers[2] == {"Ref": "AWS::NoValue"}
    (arn,) = layers[1]
    # The layer for the function's architecture (arm64), from AWS's own account.
    assert props["Architectures"] == ["arm64"]
    assert ":753240598075:layer:LambdaAdapterLayerArm64:" in arn["Fn::Sub"]
    variables = props["Environment"]["Variables"]
    adapter = {
        "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
        "AWS_LWA_INVOKE_MODE": "response_stream",
        "AWS_LWA_PORT": "8080",
        "AWS_LWA_READINESS_CHECK_PATH": "/",
    }
    for name, value in adapter.items():
        assert variables[name] == {"Fn::If": ["StreamResponses", value, {"Ref": "AWS::NoValue"}]}
    run_sh = REPO / "lambda" / "run.sh"
    assert run_sh.is_file() and run_sh.stat().st_mode & 0o111, "run.sh must be executable"
    text = run_sh.read_text(encoding="utf-8")
    assert "uvicorn" in text and "AWS_LWA_PORT" in text
    makefile = MAKEFILE.read_text(encoding="utf-8")
    assert '"/lambda/run.sh"' in makefile and '"/lambda/asgi.py"' in makefile
