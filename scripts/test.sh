#!/usr/bin/env bash
# Install everything the tests need (Python venv, Chromium, Node packages) and run
# lint, type checks and the whole test suite. Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
. scripts/pip.sh
quiet_pip install --quiet --upgrade pip
quiet_pip install --quiet -e '.[dev]'

# A real headless Chromium for the ask-box tests (Debian's package; Playwright's
# own browser download is not used).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "Chromium is missing: run 'sudo apt-get install chromium' (the browser tests need it)" >&2
    exit 1
  fi
fi
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
