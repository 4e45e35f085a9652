"""Run the Lambda handler from a built artifact, the way the Lambda runtime would.

Run as ``python -I -S -B lambda_invoke.py ARTIFACT_DIR REQUEST.json RESULT.json``:
``-I`` ignores every ``PYTHON*`` variable and the user's site-packages, ``-S``
leaves out the interpreter's own site-packages, so the artifact (first on
``sys.path``, like ``/var/task`` on Lambda) and the standard library are all
that can be imported; ``-B`` writes no bytecode into the artifact, which is
read-only on Lambda. Standard library only: this file must not need anything
the artifact does not ship.

REQUEST.json: ``{"events": [event, ...], "forbidden": ["mkdocs", ...]}``.
RESULT.json gets the responses, which forbidden modules were importable, where
the handler's packages were loaded from, max RSS, and a split of the time to
the first response: ``import`` (handler module: imports, settings, app) and,
inside the first request, ``fetch`` (index from S3 into the cache),
``index_load`` (manifest check + arrays), ``model_load`` (model descriptor +
ONNX session + tokenizer), ``retriever`` and ``first_query`` (the rest of the
first request: retrieval and the answer).
"""

from __future__ import annotations

import importlib.util
import json
import resource
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

STARTED = time.perf_counter()


class FakeContext:
    """The attributes of the Lambda context object that handlers read."""

    function_name = "anchored-AnchoredFunction-Q1w2E3r4T5y6"
    function_version = "$LATEST"
    invoked_function_arn = (
        "arn:aws:lambda:us-east-1:123456789012:function:anchored-AnchoredFunction-Q1w2E3r4T5y6"
    )
    memory_limit_in_mb = 1536
    client_context: Any = None
    identity: Any = None
    log_group_name = "/aws/lambda/anchored-AnchoredFunction-Q1w2E3r4T5y6"
    log_stream_name = "2024/12/06/[$LATEST]4f1c2b7a9e8d4c3b2a1f0e9d8c7b6a5f"

    def __init__(self, deadline_s: float = 30.0) -> None:
        self.aws_request_id = str(uuid.uuid4())
        self._deadline = time.monotonic() + deadline_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def timed(name: str, fn: Callable[..., Any], spent: dict[str, float]) -> Callable[..., Any]:
    """``fn`` wrapped to add its wall time to ``spent[name]``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0

    return wrapper


def peak_rss_mb() -> float:
    """This process's peak resident memory since exec (VmHWM).

    Not ``ru_maxrss``: Linux carries that over from before exec, so it would
    report the parent that forked us.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    artifact, request_path, result_path = sys.argv[1:4]
    sys.path.insert(0, artifact)
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    importable = {
        name: importlib.util.find_spec(name) is not None for name in request.get("forbidden", [])
    }

    t0 = time.perf_counter()
    import handler  # the module the Lambda runtime loads: handler.handler

    t_import = time.perf_counter() - t0

    import anchored_query.engine as engine_module

    spent: dict[str, float] = {}
    app: Any = handler.handler.app
    engine = app.state.engine
    engine.source.fetch = timed("fetch", engine.source.fetch, spent)
    # The names engine._load looks up when it loads the index, wrapped with timers.
    names = vars(engine_module)
    model_spec = names["ModelSpec"]
    timed_spec = {"from_dir": staticmethod(timed("model_load", model_spec.from_dir, spent))}
    replacements = {
        "read_index": timed("index_load", names["read_index"], spent),
        "ModelSpec": type("TimedModelSpec", (), timed_spec),
        "CachingEmbedder": timed("model_load", names["CachingEmbedder"], spent),
        "Retriever": timed("retriever", names["Retriever"], spent),
    }
    for name, value in replacements.items():
        setattr(engine_module, name, value)

    responses = []
    event_s = []
    first_answer_epoch = first_answer_cpu = 0.0
    for event in request["events"]:
        t1 = time.perf_counter()
        responses.append(handler.handler(event, FakeContext()))
        event_s.append(time.perf_counter() - t1)
        if not first_answer_epoch:
            first_answer_epoch, first_answer_cpu = time.time(), time.process_time()
    first_request_s = event_s[0] if event_s else 0.0

    load = sum(spent.get(k, 0.0) for k in ("fetch", "index_load", "model_load", "retriever"))
    timings = {
        "interpreter_to_main": t0 - STARTED,
        "import": t_import,
        "fetch": spent.get("fetch", 0.0),
        "index_load": spent.get("index_load", 0.0),
        "model_load": spent.get("model_load", 0.0),
        "retriever": spent.get("retriever", 0.0),
        "first_query": first_request_s - load,
        "main_to_first_answer": t_import + first_request_s,
    }
    result = {
        "responses": responses,
        "importable": importable,
        "loaded_from": {
            name: str(getattr(sys.modules[name], "__file__", ""))
            for name in ("handler", "anchored_query", "build_index", "mangum", "onnxruntime")
            if name in sys.modules
        },
        "timings_s": timings,
        "event_s": event_s,
        "first_answer_epoch": first_answer_epoch,
        "cpu_to_first_answer_s": first_answer_cpu,  # every thread, since the process began
        "max_rss_mb": peak_rss_mb(),
    }
    Path(result_path).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
