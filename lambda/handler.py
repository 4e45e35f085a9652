"""AWS Lambda entry point: hand the event to the ASGI app."""

from mangum import Mangum

from anchored_query.app import create_app

handler = Mangum(create_app(), lifespan="off")
