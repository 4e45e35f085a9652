"""Anchored's query function: an ASGI app that answers questions from an index."""

__version__ = "0.1.0"
