"""Anchored's index: HTML -> chunks, tokenizer + BM25, ONNX embedder, on-disk format, publish.

Both the build side (MkDocs plugin, ``anchored index``) and the query side
(``anchored_query``) import from here, so nothing is implemented twice.
"""

__version__ = "0.1.0"
