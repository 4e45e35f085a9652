"""AWS Lambda entry point: hand the event to the ASGI app."""

from anchored_query.app import create_app
from mangum import Mangum

handler = Mangum(create_app(), lifespan="off")
