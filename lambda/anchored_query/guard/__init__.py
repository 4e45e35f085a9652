"""What keeps the function inside its limits: counters every instance shares, rate
limits, the spend cap on LLM calls, the LLM key read from a secret store, signed
answer ids and a log that never carries a secret. Imports ``llm``, ``store`` and the
top-level records."""
