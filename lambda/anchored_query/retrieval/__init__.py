"""Ranking: dense + BM25 per phrasing fused across phrasings, the numbered passages an
answer reads, the retrieval evidence that decides when the quoted answer refuses, and
the pointers that count half. Imports ``question`` and the stages below it."""
