#!/usr/bin/env bash
# Install Anchored and serve its own documentation (site/) with the ask box.
# Usage: bash scripts/demo.sh [--port 8000]
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
quiet_pip install --quiet -e '.[serve]'
exec anchored serve -f mkdocs.yml "$@"
