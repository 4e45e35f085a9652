"""What retrieval searches for, without a model call: the question, a keyword form of
it, and a follow-up joined to the question before it.

A rewrite by the model used to add these (and invented options the docs do not have,
which then became queries); these forms cost a few milliseconds instead of a call.

>>> search_forms("How do I change the port of the dev server?")
['How do I change the port of the dev server?', 'change port dev server']
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from anchored_query.types import Turn

# Function words of questions (English): they carry no topic, and with them a
# question's embedding leans towards other questions rather than the passage.
_STOPWORDS = frozenset(
    """a an the and or but if then than so of to in on at by for from with without into onto
    about as is are was were be been being am do does did done doing have has had having
    i me my we our you your it its they them their he she his her this that these those
    there here what which who whom whose when where why how can could would should shall
    will may might must need want wants wanted please tell show explain know let get
    any some all each every other another such very just also only not no yes
    way ways possible thing things something anything""".split()  # noqa: SIM905
)
_WORD = re.compile(r"[\w][\w.\-/`]*[\w]|[\w]", re.UNICODE)
_MIN_KEYWORDS = 2


def keyword_form(question: str) -> str:
    """The question's content words in order, or "" when that says nothing new
    (too few words left, or no word dropped). Words with digits, dots, dashes,
    slashes or underscores (option names, paths, versions) are always kept."""
    words = _WORD.findall(question)
    kept = [w for w in words if w.casefold() not in _STOPWORDS or not w.isalpha()]
    if len(kept) < _MIN_KEYWORDS or len(kept) == len(words):
        return ""
    return " ".join(kept)


def search_forms(question: str, history: Sequence[Turn] = ()) -> list[str]:
    """The texts to search for ``question`` (asked after ``history``), best first."""
    forms = [question]
    keywords = keyword_form(question)
    if keywords:
        forms.append(keywords)
    # A follow-up ("and for S3?") needs the earlier question to be searchable.
    last_user = [t.content for t in history if t.role == "user"][-1:]
    forms += [f"{q} {question}" for q in last_user]
    return list(dict.fromkeys(forms))
