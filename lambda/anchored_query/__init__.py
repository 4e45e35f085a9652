"""Anchored's query function: an ASGI app that answers questions from an index.

The code is cut into stage packages, each importing only itself, the stages below it
and the top-level records (``types``, ``errors``, ``settings``); ``engine`` runs the
stages and only ``serve`` sits above it. From the bottom up: ``llm`` (model clients),
``store`` (where the index comes from), ``guard`` (limits, spend, secrets, log
safety), ``question`` (the question as asked and analysed once), ``retrieval``
(ranking and its evidence), ``citations`` (sentences, markers and their checks),
``answer`` (the quoted and the LLM answer, the response), ``owner`` (feedback, the
question log, the report), ``engine``, ``serve`` (HTTP, streaming, MCP).
``tests/test_layers.py`` holds the order.
"""

__version__ = "0.1.0"
