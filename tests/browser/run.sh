#!/usr/bin/env bash
# Browser tests for the widget (plugin/assets). Installs the node deps if missing, starts
# the harness on a free port unless ANCHORED_TEST_URL names a running server (e.g.
# `anchored serve`), runs `node --test`, and exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"
ROOT="$(cd ../.. && pwd)"

if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "run.sh: Chromium not found at ${CHROMIUM:-/usr/bin/chromium} (apt-get install -y chromium)" >&2
  exit 2
fi
if [ ! -d node_modules/playwright-core ] || [ ! -d node_modules/@highlightjs/cdn-assets ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi

HARNESS_PID=""
cleanup() { if [ -n "$HARNESS_PID" ]; then kill "$HARNESS_PID" 2>/dev/null || true; wait "$HARNESS_PID" 2>/dev/null || true; fi; }
trap cleanup EXIT

if [ -z "${ANCHORED_TEST_URL:-}" ]; then
  LOG="$(mktemp)"
  "$PY" harness.py --port 0 >"$LOG" 2>&1 &
  HARNESS_PID=$!
  # The harness builds three MkDocs sites first: seconds on a quiet machine, over 30 s on a
  # busy one. A harness that dies is reported at once; the wait only bounds a hung one.
  for _ in $(seq 1 1800); do
    if grep -q '^READY ' "$LOG"; then break; fi
    if ! kill -0 "$HARNESS_PID" 2>/dev/null; then cat "$LOG" >&2; echo "run.sh: harness failed to start" >&2; exit 2; fi
    sleep 0.1
  done
  grep -q '^READY ' "$LOG" || { cat "$LOG" >&2; echo "run.sh: harness not ready after 180 s" >&2; exit 2; }
  ANCHORED_TEST_URL="$(sed -n 's/^READY //p' "$LOG" | head -1)"
  export ANCHORED_TEST_URL
fi
echo "run.sh: testing against $ANCHORED_TEST_URL"

# One test file at a time: each drives its own Chromium and the machine has two cores.
# `run.sh foo.test.js bar.test.js` runs only those files; other arguments go to node.
FILES=(); ARGS=()
for a in "$@"; do case "$a" in *.test.js) FILES+=("./$(basename "$a")");; *) ARGS+=("$a");; esac; done
if [ ${#FILES[@]} -eq 0 ]; then FILES=(./*.test.js); fi
node --test --test-concurrency=1 "${ARGS[@]}" "${FILES[@]}"
