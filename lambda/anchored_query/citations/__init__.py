"""What an answer's sentences cite and whether the cited passages back them: the
sentence splitter, citation markers, checkable facts, lexical and semantic support,
polarity, the verifier, a passage's quotable units, the cited spans and their links.
Imports ``retrieval`` and the stages below it."""
