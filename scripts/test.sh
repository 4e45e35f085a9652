#!/usr/bin/env bash
# Install everything the tests need (Python venv, Chromium, Node packages) and run
# lint, type checks and the whole test suite. Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
. scripts/system.sh
if [ ! -x .venv/bin/python ]; then
  need_venv "$PY"
  "$PY" -m venv .venv
fi
. .venv/bin/activate
. scripts/pip.sh
quiet_pip install --quiet --upgrade pip
quiet_pip install --quiet -e '.[dev]'

# A real headless Chromium for the ask-box tests (Debian's package; Playwright's
# own browser download is not used), and Node to drive it.
need_system_package chromium chromium "the browser tests need it"
need_system_package npm npm "the browser tests run on Node"
# valgrind runs the embedder as on a CPU without AVX-512 (tests/test_embedder.py).
need_system_package valgrind valgrind "the embedder's cross-CPU test needs it"
if [ -f tests/browser/package.json ]; then
  (cd tests/browser && npm ci --silent --no-audit --no-fund)
fi

echo "== ruff"
ruff check .
ruff format --check .
echo "== mypy"
mypy
echo "== pytest"
python -m pytest -q "$@"
