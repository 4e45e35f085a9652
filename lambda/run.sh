#!/bin/sh
# The streaming function's entry point (template.yaml, ResponseStreaming=true).
#
# The AWS Lambda Web Adapter layer runs this script (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap,
# Handler: run.sh), waits until the app answers on AWS_LWA_PORT, then turns each invocation
# of the function URL into an HTTP request to it and streams the response back
# (AWS_LWA_INVOKE_MODE=response_stream). The app is asgi.py's: the one handler.py serves
# through Mangum. One worker: Lambda sends an instance one request at a time. No proxy
# headers: the reader is the adapter's request context (anchored_query/serve/web_adapter.py),
# never the X-Forwarded-For a client writes.
cd "${LAMBDA_TASK_ROOT:-$(dirname "$0")}" || exit 1
PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}" exec python -m uvicorn asgi:app \
    --host 127.0.0.1 --port "${AWS_LWA_PORT:-8080}" \
    --workers 1 --lifespan on --no-proxy-headers --no-access-log --no-server-header \
    --log-level warning
