"""Why a check did not confirm a sentence, as data: the check's name and a readable detail.

Each check of :mod:`.checking` and :mod:`.verify` that fails says so with a
:class:`Failure`: ``check`` names it (``number_not_found``, ``weak_support``, …; which
ones are conclusive enough to remove a sentence is :data:`.verify.CONCLUSIVE`) and
``detail`` is the line the owner reads in the log and in ``anchored ask --json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Failure:
    """One check that did not confirm a sentence: its name and what it found."""

    check: str
    detail: str

    def __str__(self) -> str:
        return self.detail

    def attributed(self, group: Sequence[int]) -> Failure:
        """This failure, met while trying passages ``group`` for an uncited sentence."""
        return Failure(self.check, f"attributed to {list(group)}: {self.detail}")
