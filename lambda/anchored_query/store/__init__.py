"""Where the index comes from: a local folder read through a verified snapshot, or an
S3 store (``current.json`` -> manifest -> verified files in a local build cache), the
cold start's prefetch, the refresher that looks for a newer build, and the catalog of
a versioned site. Imports only ``llm`` for its records, and the top-level records."""
