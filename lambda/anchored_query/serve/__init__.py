"""The function's doors: the Starlette app and its routes, streamed answers, MCP, the
CloudFront front and the Lambda Web Adapter's client address. The only stage above
``engine``; imports everything below it."""
