"""The question as the reader asked it and as every later stage reads it: request
checks, the forms retrieval searches for, spelling corrected against the index, the
word prior, the question's weighted terms, the Chinese gloss and its dictionary —
analysed once into a :class:`~anchored_query.question.analysis.Question`. Imports
``llm``, ``store``, ``guard`` and the top-level records."""
