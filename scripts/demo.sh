#!/usr/bin/env bash
# Install Anchored and serve its own documentation (site/) with the ask box.
# Usage: bash scripts/demo.sh [--port 8000]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
# setuptools announces every editable install of a package-dir layout with a notice
# ("Editable installation … be careful with folders …"); nothing is wrong, so hide it.
PYTHONWARNINGS="ignore:Editable installation" python -m pip install --quiet -e '.[serve]'
exec anchored serve -f mkdocs.yml "$@"
