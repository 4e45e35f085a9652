"""Build the Lambda artifact with ``lambda/Makefile`` for this machine, and run it.

Used by ``tests/test_lambda_artifact.py`` and ``tests/bench/bench_cold_start.py``.
The artifact is what ``sam build`` packages, except that pip fetches wheels for
the local interpreter and CPU (``LAMBDA_PYTHON``, ``LAMBDA_ARCH``) instead of
python3.12 on arm64, so that it can be imported here.

Builds are cached under ``.anchored-test-cache/lambda-artifact/<key>/``
(git-ignored), keyed by a hash of everything that goes into the artifact:
``pyproject.toml``, the Makefile, the sources of ``build_index`` and
``anchored_query``, ``handler.py``, and the target interpreter and CPU. Delete
the folder to force a rebuild (e.g. to pick up newer releases of the
dependencies). A cache miss needs the package index (or pip's local cache).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".anchored-test-cache" / "lambda-artifact"
DRIVER = Path(__file__).resolve().parent / "lambda_invoke.py"
KEEP_BUILDS = 2
# The query function must not drag in the build side or anything heavy.
FORBIDDEN = ("mkdocs", "mkdocs_anchored", "material", "selectolax", "torch", "pytest", "moto")


def lambda_arch() -> str:
    """This CPU as the Makefile's LAMBDA_ARCH (a manylinux platform suffix)."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def _inputs() -> list[Path]:
    files = [REPO / "pyproject.toml", REPO / "lambda" / "Makefile", REPO / "lambda" / "handler.py"]
    files += [REPO / "lambda" / "asgi.py", REPO / "lambda" / "run.sh"]  # the streaming entry
    for package in (REPO / "build_index", REPO / "lambda" / "anchored_query"):
        for path in sorted(package.rglob("*")):
            rel = path.relative_to(package).parts
            if path.is_file() and "__pycache__" not in rel and rel[0] != "models":
                files.append(path)
    return files


def artifact_key(python_version: str, arch: str) -> str:
    """A hash of the artifact's inputs and target (interpreter version, CPU)."""
    digest = hashlib.sha256(f"{python_version}|{arch}\n".encode())
    for path in _inputs():
        digest.update(str(path.relative_to(REPO)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:20]


def build_artifact(cache: Path = CACHE) -> tuple[Path, bool]:
    """The artifact directory for this interpreter and CPU; ``(path, reused)``.

    Runs ``make -C lambda build-AnchoredFunction`` into a temporary folder next
    to the cache and renames it into place, so a half-built artifact is never
    reused and two test runs building at once do not clash.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    arch = lambda_arch()
    key = artifact_key(version, arch)
    final = cache / key
    if (final / "handler.py").is_file():
        os.utime(final)  # most recently used: kept by the pruning below
        return final, True
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache))
    try:
        result = subprocess.run(
            [
                "make",
                "--no-print-directory",
                "-C",
                str(REPO / "lambda"),
                "build-AnchoredFunction",
                f"ARTIFACTS_DIR={tmp}",
                f"PYTHON={sys.executable}",
                f"LAMBDA_PYTHON={version}",
                f"LAMBDA_ARCH={arch}",
                f"PYC_PYTHON={sys.executable}",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                "building the Lambda artifact failed "
                f"(make exited {result.returncode}):\n{result.stderr[-4000:]}"
            )
        try:
            tmp.rename(final)
        except OSError:
            if not (final / "handler.py").is_file():  # not a concurrent build that won
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune(cache, keep=final)
    return final, False


def _prune(cache: Path, keep: Path) -> None:
    builds = sorted(
        (p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in [b for b in builds if b != keep][KEEP_BUILDS - 1 :]:
        shutil.rmtree(old, ignore_errors=True)


def artifact_sizes(artifact: Path) -> dict[str, int]:
    """Bytes unzipped and as the deployment zip (deflated, like ``sam package``)."""
    files = sorted(p for p in artifact.rglob("*") if p.is_file())
    unzipped = sum(p.stat().st_size for p in files)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "function.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for path in files:
                zf.write(path, path.relative_to(artifact))
        zipped = archive.stat().st_size
    return {"unzipped": unzipped, "zipped": zipped}


def lambda_env(index: str, endpoint_url: str, cache_dir: Path, **extra: str) -> dict[str, str]:
    """The environment template.yaml gives the function, pointed at a local S3."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TZ": ":UTC",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ENDPOINT_URL_S3": endpoint_url,
        "AWS_LAMBDA_FUNCTION_NAME": "anchored-AnchoredFunction-Q1w2E3r4T5y6",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1536",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        "ANCHORED_INDEX": index,
        "ANCHORED_FEEDBACK": index.rstrip("/") + "/feedback/",
        "ANCHORED_CACHE_DIR": str(cache_dir),
        "ANCHORED_REFRESH_S": "60",
        "ANCHORED_LLM_PROVIDER": "none",
    }
    env.update(extra)
    return env


def invoke(
    artifact: Path,
    events: list[dict[str, Any]],
    env: dict[str, str],
    *,
    timeout: float = 300,
) -> dict[str, Any]:
    """Run ``lambda_invoke.py`` in a fresh isolated interpreter; its result plus ``wall_s``.

    ``wall_s`` is from spawning the process to its exit (the cold start, every
    event, interpreter shutdown); ``spawn_to_first_answer_s`` is from spawning it
    to the first event's response (a cold start as a caller sees it).
    """
    with tempfile.TemporaryDirectory() as tmp:
        request = Path(tmp) / "request.json"
        result_path = Path(tmp) / "result.json"
        request.write_text(json.dumps({"events": events, "forbidden": list(FORBIDDEN)}), "utf-8")
        spawned = time.time()
        t0 = time.perf_counter()
        done = subprocess.run(
            [  # -B: no .pyc written into the artifact; /var/task is read-only on Lambda
                sys.executable,
                "-I",
                "-S",
                "-B",
                str(DRIVER),
                str(artifact),
                str(request),
                str(result_path),
            ],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(
                f"the handler process failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
            )
        result: dict[str, Any] = json.loads(result_path.read_text("utf-8"))
    result["wall_s"] = wall
    result["spawn_to_first_answer_s"] = result["first_answer_epoch"] - spawned
    result["stderr"] = done.stderr
    return result
