"""The ASGI app for uvicorn under the AWS Lambda Web Adapter (run.sh; template.yaml with
ResponseStreaming=true): the same app as handler.py's, which Mangum serves buffered."""

from anchored_query.settings import Settings
from anchored_query.store.prefetch import prefetch

settings = Settings.from_env()
# Cold start: the index downloads from S3 while the app's imports below run.
prefetch(settings.index, cache_dir=settings.cache_dir)

from anchored_query.serve.app import create_app  # noqa: E402
from anchored_query.serve.web_adapter import RequestContextClient  # noqa: E402

# The adapter is the peer; the reader is the invocation's source IP (web_adapter.py).
app = RequestContextClient(create_app(settings))
