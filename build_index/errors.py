"""The errors the index code raises; every message tells the user what to do."""


class AnchoredError(Exception):
    """Base class of every error Anchored raises on purpose."""


class PageError(AnchoredError):
    """A page could not be turned into chunks (broken, binary, ...)."""


class ModelError(AnchoredError):
    """The embedding model is missing, unknown or does not match the index."""


class IndexFormatError(AnchoredError):
    """An index directory is missing, corrupt, or of another version or model."""


class PublishError(AnchoredError):
    """Publishing an index to its store failed; the previous build stays live."""
