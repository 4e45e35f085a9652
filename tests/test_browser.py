"""The browser tests as part of the normal test run (deselect with ``-m "not browser"``).

- the widget suite (``tests/browser/run.sh``) against its harness;
- ``tests/browser/e2e.test.js`` against ``anchored serve`` on a copy of
  ``tests/fixtures/qa-site``: with the extractive answerer, and with an
  OpenAI-compatible LLM (``tests/browser/fake_llm.py``, the fake server in
  ``tests/fakes``) configured through ``ANCHORED_LLM_*`` as a user would.

They need Chromium (``/usr/bin/chromium`` or ``$CHROMIUM``) and Node; without
them the tests are skipped, or fail when ``CI=true``. Every process started here
runs in its own process group and the whole group is killed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
BROWSER = ROOT / "tests" / "browser"
QA_SITE = ROOT / "tests" / "fixtures" / "qa-site"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
INSTALL = "apt-get install -y chromium nodejs npm"
NODE_PACKAGES = ("playwright-core", "@highlightjs/cdn-assets")


def _require_browser() -> None:
    """Skip (or fail on CI) when Chromium or Node is missing."""
    missing = []
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"Chromium at {CHROMIUM} (set CHROMIUM= to use another)")
    if shutil.which("node") is None:
        missing.append("node")
    if not (BROWSER / "node_modules" / "playwright-core").is_dir() and shutil.which("npm") is None:
        missing.append("npm (to install tests/browser/node_modules)")
    if missing:
        message = f"browser tests need {', '.join(missing)}; install with: {INSTALL}"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End ``proc`` and everything it started (its own session / process group)."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            # The leader is gone; stragglers of the group (Chromium) get the same signal.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run ``cmd`` in its own process group; (exit code, stdout+stderr). Group killed after."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = -1
        finally:
            _kill_group(proc)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    if code == -1:
        text += f"\n[test_browser] {' '.join(cmd)} timed out after {timeout:.0f} s and was killed"
    return code, text


def _node_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORED_")}
    env["CHROMIUM"] = CHROMIUM
    env["NO_COLOR"] = "1"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def node_modules() -> None:
    """tests/browser/node_modules (``npm ci`` once when missing, as run.sh does)."""
    _require_browser()
    if all((BROWSER / "node_modules" / p).is_dir() for p in NODE_PACKAGES):
        return
    code, out = _run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=BROWSER,
        env=_node_env(),
        timeout=300,
    )
    if code != 0:
        pytest.fail(f"npm ci in tests/browser failed:\n{out}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _anchored() -> list[str]:
    script = Path(sys.executable).with_name("anchored")
    if script.exists():
        return [str(script)]
    return [
        sys.executable,
        "-c",
        "import sys; from mkdocs_anchored.cli import main; sys.exit(main())",
    ]


def _wait_for(
    proc: subprocess.Popen[bytes], log: Path, ready: Any, what: str, timeout: float
) -> Any:
    """Poll ``ready()`` until it returns a value; fail with the log if the process dies."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = ready()
        if value:
            return value
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
        time.sleep(0.1)
    pytest.fail(f"{what} not ready after {timeout:.0f} s:\n{log.read_text(errors='replace')}")


@contextlib.contextmanager
def _process(
    cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        _kill_group(proc)


@contextlib.contextmanager
def _fake_llm(tmp: Path) -> Iterator[str]:
    """tests/browser/fake_llm.py running; yields its base URL."""
    log = tmp / "fake_llm.log"
    cmd = [sys.executable, str(BROWSER / "fake_llm.py")]
    with _process(cmd, cwd=ROOT, env=_node_env(), log=log) as proc:

        def ready() -> str | None:
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith("READY "):
                    return line[6:].strip()
            return None

        yield _wait_for(proc, log, ready, "fake_llm.py", 30)


@contextlib.contextmanager
def _serve(tmp: Path, llm_env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """``anchored serve`` on a copy of the qa-site; yields (base URL, project folder)."""
    project = tmp / "qa-site"
    shutil.copytree(QA_SITE, project)
    port = _free_port()
    env = _node_env(**llm_env)
    env["NO_MKDOCS_2_WARNING"] = "1"
    env["ANCHORED_CACHE_DIR"] = str(tmp / "query-cache")
    log = tmp / "serve.log"
    cmd = [*_anchored(), "serve", "-f", "mkdocs.yml", "--host", "127.0.0.1", "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    with _process(cmd, cwd=project, env=env, log=log) as proc:

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(base + "/v1/health", timeout=2) as r:
                    return bool(r.status == 200)
            except OSError:
                return False

        _wait_for(proc, log, healthy, "anchored serve", 120)
        yield base, project
        if proc.poll() is not None:
            pytest.fail(f"anchored serve died during the tests:\n{log.read_text(errors='replace')}")


def _e2e(base: str, project: Path, mode: str) -> None:
    env = _node_env(
        ANCHORED_TEST_URL=base,
        ANCHORED_TEST_SITE="/",
        ANCHORED_E2E=mode,
        # `anchored serve` keeps feedback beside the index (.anchored/index).
        ANCHORED_E2E_FEEDBACK=str(project / ".anchored" / "feedback"),
    )
    cmd = ["node", "--test", "--test-concurrency=1", "--test-reporter=tap", "e2e.test.js"]
    code, out = _run(cmd, cwd=BROWSER, env=env, timeout=600)
    assert code == 0, f"e2e.test.js ({mode}) against {base} failed (exit {code}):\n{out}"
    passed = re.search(r"^# pass (\d+)$", out, re.M)
    assert passed and int(passed.group(1)) >= 6, f"e2e.test.js ({mode}) ran too few tests:\n{out}"


# streaming.test.js builds its own sites and servers: a test of its own, with its own time.
STREAMING = "streaming.test.js"
# The page menu, ?ask= links and the privacy check: its own test, to run alone (-k page_menu).
PAGE_MENU = "pagemenu.test.js"


def test_widget_suite_against_the_harness(node_modules: None) -> None:
    """tests/browser/run.sh: widget, highlight, search, look, budget and the other harness
    tests (4-8 minutes); every *.test.js but the streaming and page menu ones."""
    env = _node_env()
    env["PYTHON"] = sys.executable
    own = (STREAMING, PAGE_MENU)
    files = sorted(p.name for p in BROWSER.glob("*.test.js") if p.name not in own)
    code, out = _run(["bash", str(BROWSER / "run.sh"), *files], cwd=BROWSER, env=env, timeout=900)
    assert code == 0, f"tests/browser/run.sh failed (exit {code}):\n{out}"


def test_page_menu_suite(node_modules: None) -> None:
    """tests/browser/pagemenu.test.js against the harness: the page menu's entries (the
    harness writes the Markdown twins), ?ask= and "Copy link", keyboard, 375 px, both
    palettes, and that a whole session asks nothing of any host but the site, no cookie."""
    env = _node_env()
    env["PYTHON"] = sys.executable
    cmd = ["bash", str(BROWSER / "run.sh"), PAGE_MENU]
    code, out = _run(cmd, cwd=BROWSER, env=env, timeout=900)
    assert code == 0, f"tests/browser/run.sh {PAGE_MENU} failed (exit {code}):\n{out}"
    passed = re.search(r"^# pass (\d+)$", out, re.M)
    assert passed and int(passed.group(1)) >= 24, f"{PAGE_MENU} ran too few tests:\n{out}"


def test_streaming_suite(node_modules: None) -> None:
    """tests/browser/streaming.test.js: the ask box on the real app's event stream (it
    builds two qa-site copies and runs anchored serve with a streaming fake LLM)."""
    env = _node_env()
    env["PYTHON"] = sys.executable
    cmd = ["bash", str(BROWSER / "run.sh"), STREAMING]
    code, out = _run(cmd, cwd=BROWSER, env=env, timeout=1800)
    assert code == 0, f"tests/browser/run.sh {STREAMING} failed (exit {code}):\n{out}"
    passed = re.search(r"^# pass (\d+)$", out, re.M)
    assert passed and int(passed.group(1)) >= 10, f"{STREAMING} ran too few tests:\n{out}"


def test_e2e_extractive(node_modules: None, tmp_path: Path) -> None:
    """anchored serve with no LLM: real extractive answers in Chromium."""
    with _serve(tmp_path, {}) as (base, project):
        _e2e(base, project, "extractive")


def test_e2e_with_an_openai_compatible_llm(node_modules: None, tmp_path: Path) -> None:
    """anchored serve with ANCHORED_LLM_* pointing at a fake OpenAI-compatible server."""
    with _fake_llm(tmp_path) as url:
        llm = {
            "ANCHORED_LLM_PROVIDER": "openai",
            "ANCHORED_LLM_MODEL": "fake-model",
            "ANCHORED_LLM_BASE_URL": url,
            "ANCHORED_LLM_API_KEY": "sk-e2e-test",
        }
        with _serve(tmp_path, llm) as (base, project):
            _e2e(base, project, "llm")
