"""The streaming function as the AWS Lambda Web Adapter runs it, locally.

The adapter's binary is not on any registry this machine reaches, so this test
does what it does (its documented contract, template.yaml's settings): in a task
root laid out as lambda/Makefile lays out the artifact's entry files (``run.sh``,
``asgi.py``), run the handler script ``run.sh`` with the environment the
function gets (``AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap``,
``AWS_LWA_INVOKE_MODE=response_stream``, ``AWS_LWA_PORT``,
``AWS_LWA_READINESS_CHECK_PATH``, ``LAMBDA_TASK_ROOT``) and the index in S3
(moto over real HTTP); poll the readiness path until it answers below 500, as
the adapter does; then send the requests the adapter would forward, over real
HTTP, and read the stream as it comes. The packages are this environment's,
not the built artifact's (building that takes longer than this machine allows a
test when it is busy; tests/test_lambda_artifact.py imports the artifact).
Untested here: the adapter itself, Lambda's RESPONSE_STREAM transport and the
function URL in front of it (no AWS account).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import FakeOpenAIServer, Reply, StreamRate, quote_passages
from lambda_build import lambda_env
from liveserver import free_port
from s3server import MotoS3, moto_s3  # noqa: F401  # the session's S3 server

from build_index.publish import publish

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the artifact holds manylinux wheels"
)
QUESTION = "Which port does Skylark use?"
LAMBDA = Path(__file__).resolve().parents[1] / "lambda"


def three_paragraphs(request: Any) -> str:
    return "\n\n".join(quote_passages(k=k)(request) for k in (1, 2, 3))


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A task root with the artifact's entry files, copied as lambda/Makefile does."""
    root = tmp_path_factory.mktemp("task")
    for name in ("run.sh", "asgi.py", "handler.py"):
        shutil.copy2(LAMBDA / name, root / name)
    return root


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeOpenAIServer]:
    # 0.5 s to the first token, then 12 tokens a second: about 5 s of writing.
    with FakeOpenAIServer(default=Reply(three_paragraphs), rate=StreamRate(0.5, 12)) as srv:
        yield srv


@contextlib.contextmanager
def run_sh(
    artifact: Path, server: MotoS3, qa_index: Path, tmp: Path, **settings: str
) -> Iterator[str]:
    """run.sh's app on ``qa_index`` in S3, started as the adapter starts it: its base URL."""
    client = server.client()
    bucket = f"anchored-stream-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    target = f"s3://{bucket}/docs"
    publish(qa_index, target, client=client)
    # `python` on the runtime's PATH (here this environment's interpreter).
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "python"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -B "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    port = free_port()
    env = lambda_env(
        target,
        server.endpoint_url,
        tmp / "cache",
        ANCHORED_ANSWER_ID_SECRET="streaming-lambda-test-secret-0123456789",
        PATH=f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        LAMBDA_TASK_ROOT=str(artifact),
        # What template.yaml sets for the adapter (ResponseStreaming=true).
        AWS_LAMBDA_EXEC_WRAPPER="/opt/bootstrap",
        AWS_LWA_INVOKE_MODE="response_stream",
        AWS_LWA_PORT=str(port),
        AWS_LWA_READINESS_CHECK_PATH="/",
        _HANDLER="run.sh",
        **settings,
    )
    proc = subprocess.Popen(
        [str(artifact / "run.sh")],
        env=env,
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:  # the adapter's readiness check: any answer below 500 on the path
            if proc.poll() is not None:
                out = proc.stdout.read().decode() if proc.stdout else ""
                pytest.fail(f"run.sh exited with {proc.returncode}:\n{out[-3000:]}")
            try:
                if httpx.get(base + "/", timeout=1).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "run.sh's app never became ready"
            time.sleep(0.01)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # Lambda's shutdown
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


@pytest.fixture(scope="module")
def function(
    artifact: Path,
    moto_s3: MotoS3,  # noqa: F811
    qa_index: Path,
    llm: FakeOpenAIServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """The base URL of run.sh's app with an LLM, started as the adapter starts it."""
    with run_sh(
        artifact,
        moto_s3,
        qa_index,
        tmp_path_factory.mktemp("lwa"),
        ANCHORED_LLM_PROVIDER="openai",
        ANCHORED_LLM_MODEL="fake-model",
        ANCHORED_LLM_BASE_URL=llm.url,
        ANCHORED_LLM_TIMEOUT_S="15",
        ANCHORED_RATE_LIMIT_PER_MIN="0",
    ) as base:
        yield base


def test_run_sh_rate_limits_the_invocations_source_ip(
    artifact: Path,
    moto_s3: MotoS3,  # noqa: F811
    qa_index: Path,
    tmp_path: Path,
) -> None:
    """The adapter is the peer (127.0.0.1); the reader is the request context's sourceIp,
    as Mangum has it for the buffered handler. A client rotating X-Forwarded-For stays one
    client, and another source IP is another client."""

    def search(base: str, source_ip: str, forwarded_for: str) -> int:
        context = {"http": {"sourceIp": source_ip, "method": "GET", "path": "/v1/search"}}
        response = httpx.get(
            base + "/v1/search",
            params={"q": "port"},
            headers={
                "x-amzn-request-context": json.dumps(context),
                "x-forwarded-for": forwarded_for,
            },
            timeout=30,
        )
        return response.status_code

    with run_sh(artifact, moto_s3, qa_index, tmp_path, ANCHORED_RATE_LIMIT_PER_MIN="2") as base:
        codes = [search(base, "203.0.113.7", f"198.51.100.{i}") for i in range(3)]
        assert codes == [200, 200, 429], codes
        assert search(base, "203.0.113.8", "198.51.100.1") == 200


def test_run_sh_serves_the_buffered_json(function: str) -> None:
    response = httpx.post(function + "/v1/ask", json={"question": QUESTION}, timeout=60)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["mode"] == "llm"


def test_run_sh_streams_events_as_they_happen(function: str) -> None:
    got: list[tuple[float, str, Any]] = []
    t0 = time.monotonic()
    with httpx.stream(
        "POST",
        function + "/v1/ask",
        json={"question": QUESTION},
        headers={"Accept": "text/event-stream"},
        timeout=60,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                got.append((time.monotonic() - t0, event, json.loads(line[6:])))
    first = {}
    for t, event, _ in got:
        first.setdefault(event, t)
    assert got[-1][1] == "final" and got[-1][2]["mode"] == "llm"
    # The sources before the model has written its answer (~5 s), the first verified
    # sentence well before the end: nothing on the way holds the events back.
    assert first["sources"] < first["final"] - 3
    assert first["sentence"] < first["final"] - 1.5
