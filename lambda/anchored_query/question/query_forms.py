"""What retrieval searches for, without a model call: the question as asked and,
for a follow-up, the previous question joined to it.

A rewrite by the model used to add more forms (and invented options the docs do
not have, which then became queries); it is now off by default
(``ANCHORED_LLM_REWRITE``). A keyword form of the question (stopwords dropped)
was measured as a third form and left out: on the development sets of
``tests/bench/data/realdocs`` it lowered the mean reciprocal rank of the first
gold section on three sites of four (mkdocs 0.817 → 0.752, httpx 0.796 → 0.771,
Material 0.659 → 0.599; this project's docs 0.780 → 0.826) — BM25 already drops
stopwords, and the bare keyword list embeds worse than the question.

>>> search_forms("And for S3?", [Turn("user", "How do I publish the index?")])
['And for S3?', 'How do I publish the index? And for S3?']
"""

from __future__ import annotations

from collections.abc import Sequence

from anchored_query.types import Turn


def search_forms(question: str, history: Sequence[Turn] = ()) -> list[str]:
    """The texts to search for ``question`` (asked after ``history``), best first."""
    forms = [question]
    # A follow-up ("and for S3?") needs the earlier question to be searchable.
    last_user = [t.content for t in history if t.role == "user"][-1:]
    forms += [f"{q} {question}" for q in last_user]
    return list(dict.fromkeys(forms))
