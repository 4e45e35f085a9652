"""AWS Lambda entry point: hand the event to the ASGI app."""

from anchored_query.settings import Settings
from anchored_query.store.prefetch import prefetch

settings = Settings.from_env()
# Cold start: the index downloads from S3 while the app's imports below run.
prefetch(settings.index, cache_dir=settings.cache_dir)

from anchored_query.serve.app import create_app  # noqa: E402
from mangum import Mangum  # noqa: E402

handler = Mangum(create_app(settings), lifespan="off")
