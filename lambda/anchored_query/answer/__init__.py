"""The answer: the quoted (extractive) answer and its windows, the LLM answer and its
prompt, the step that prepares a request's passages, the reader's languages, and the
response assembled from either. Imports ``citations`` and the stages below it."""
