"""``anchored report``: a period of the question log as an owner's view.

Two streamed passes over the log (feedback first, then asks), one object in
memory at a time; what is kept is bounded: counts per day, per section and per
distinct refused or down-voted question (at most :data:`MAX_GAP_QUESTIONS`),
the slowest answers (a heap of :data:`SLOWEST`), and the ratings of at most
:data:`MAX_FEEDBACK` answer ids. Coverage gaps are those questions clustered by
meaning with the index's own embedder (greedy: each question, most asked first,
joins the closest cluster whose centroid is within the cosine threshold, else
starts one).
"""

from __future__ import annotations

import heapq
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from anchored_query.owner.querylog import ReadStats, read_records

MAX_GAP_QUESTIONS = 5000  # distinct refused / down-voted questions kept for clustering
MAX_FEEDBACK = 200_000  # answer ids whose rating is joined
MAX_SECTIONS = 50_000  # distinct sections counted
SLOWEST = 10
# Cosine at which two questions are the same gap, by embedder (e5 places everything close).
CLUSTER_THRESHOLDS = {"multilingual-e5-small": 0.88}
DEFAULT_THRESHOLD = 0.6


class _Embedder(Protocol):
    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


@dataclass
class Gap:
    question: str
    count: int = 0
    refused: int = 0
    down: int = 0
    closest: Counter[str] = field(default_factory=Counter)


@dataclass
class Report:
    since: str
    until: str
    read: ReadStats = field(default_factory=ReadStats)
    total: int = 0
    answered: int = 0
    refused: int = 0
    fallback: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    fallbacks: Counter[str] = field(default_factory=Counter)
    up: int = 0
    down: int = 0
    feedback_records: int = 0
    removed_sentences: int = 0
    checked_sentences: int = 0  # sentences of LLM replies the verifier read
    checks: dict[str, Counter[str]] = field(default_factory=dict)  # check -> removed/unverified
    pasted: int = 0  # LLM replies that only pasted their passages
    pasted_refused: int = 0  # of them, shown as the closest (the quote would refuse)
    days: dict[str, list[int]] = field(default_factory=dict)  # day -> answered, refused, fb
    cited: Counter[str] = field(default_factory=Counter)
    gaps: dict[str, Gap] = field(default_factory=dict)
    gaps_not_kept: int = 0
    slowest: list[tuple[float, str, str]] = field(default_factory=list)  # ms, t, question
    latencies: list[float] = field(default_factory=list)  # a bounded sample
    clusters: list[dict[str, Any]] = field(default_factory=list)
    clustered_by: str = ""
    pages: list[str] = field(default_factory=list)  # the index's pages, when known
    sections: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Everything the HTML and Markdown show, as plain data (``--json``)."""
        cited_pages = {ref.split("#", 1)[0] for ref in self.cited}
        latencies = sorted(self.latencies)
        return {
            "period": {"since": self.since, "until": self.until},
            "log": {
                "objects": self.read.objects,
                "records": self.read.records,
                "skipped_objects": self.read.skipped_objects,
                "skipped_records": self.read.skipped_records,
            },
            "questions": self.total,
            "answered": self.answered,
            "refused": self.refused,
            "fallen_back": self.fallback,
            "modes": dict(self.modes),
            "fallback_reasons": dict(self.fallbacks),
            "feedback": {"up": self.up, "down": self.down, "records": self.feedback_records},
            "removed_sentences": self.removed_sentences,
            "verification": {
                "sentences": self.checked_sentences,
                "pasted": self.pasted,
                "pasted_refused": self.pasted_refused,
                "checks": [
                    {
                        "check": name,
                        "removed": counts["removed"],
                        "unverified": counts["unverified"],
                        "removed_share": _share(counts["removed"], self.checked_sentences),
                        "unverified_share": _share(counts["unverified"], self.checked_sentences),
                    }
                    for name, counts in sorted(
                        self.checks.items(), key=lambda kv: -sum(kv[1].values())
                    )
                ],
            },
            "per_day": [
                {"day": d, "answered": v[0], "refused": v[1], "fallen_back": v[2]}
                for d, v in sorted(self.days.items())
            ],
            "latency_ms": {
                "p50": _pct(latencies, 0.5),
                "p90": _pct(latencies, 0.9),
                "max": latencies[-1] if latencies else 0.0,
            },
            "coverage_gaps": self.clusters,
            "clustered_by": self.clustered_by,
            "gap_questions_not_clustered": self.gaps_not_kept,
            "most_cited": self.cited.most_common(10),
            "least_cited": _least(self.cited, self.sections),
            "pages_never_cited": [p for p in self.pages if p not in cited_pages],
            "slowest": [
                {"latency_ms": ms, "t": t, "question": q} for ms, t, q in sorted(self.slowest)[::-1]
            ],
        }


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def _least(cited: Counter[str], sections: list[str]) -> list[tuple[str, int]]:
    """The sections cited least (0 for an index section never cited), ten of them."""
    counts = dict.fromkeys(sections, 0) if sections else {}
    counts.update(cited)
    return sorted(counts.items(), key=lambda kv: (kv[1], kv[0]))[:10]


def _key(question: str) -> str:
    return re.sub(r"\s+", " ", question).strip().casefold()


def collect(
    location: str,
    *,
    since: date | None = None,
    until: date | None = None,
    latency_sample: int = 10_000,
) -> Report:
    """Stream the period of the log into a :class:`Report` (without clusters)."""
    report = Report(since=str(since or ""), until=str(until or ""))
    ratings: dict[str, str] = {}
    for fb in read_records(location, "feedback", since=since, stats=report.read):
        report.feedback_records += 1
        answer_id = str(fb.get("answer_id", ""))
        if answer_id in ratings or len(ratings) < MAX_FEEDBACK:
            ratings[answer_id] = str(fb.get("rating", ""))
    seen = 0
    sampler = random.Random(0)  # a fixed seed: the same log gives the same report
    for ask in read_records(location, "asks", since=since, until=until, stats=report.read):
        report.total += 1
        abstained = bool(ask.get("abstained"))
        fell_back = bool(ask.get("fallback"))
        day = str(ask.get("t", ""))[:10]
        row = report.days.setdefault(day, [0, 0, 0])
        row[1 if abstained else 0] += 1
        row[2] += fell_back
        report.refused += abstained
        report.answered += not abstained
        report.fallback += fell_back
        report.modes[str(ask.get("mode", ""))] += 1
        if fell_back:
            report.fallbacks[str(ask["fallback"])] += 1
        report.removed_sentences += int(ask.get("removed_sentences", 0) or 0)
        verification = ask.get("verification") or {}
        if isinstance(verification, dict):
            report.checked_sentences += int(verification.get("sentences", 0) or 0)
            if verification.get("pasted"):
                report.pasted += 1
                report.pasted_refused += abstained
            for name, counts in (verification.get("checks") or {}).items():
                tally = report.checks.setdefault(str(name), Counter())
                for action in ("removed", "unverified"):
                    tally[action] += int((counts or {}).get(action, 0) or 0)
        for ref in ask.get("cited", [])[:10]:
            if ref in report.cited or len(report.cited) < MAX_SECTIONS:
                report.cited[str(ref)] += 1
        rating = ratings.get(str(ask.get("answer_id", "")), "")
        report.up += rating == "up"
        report.down += rating == "down"
        question = str(ask.get("question", ""))
        latency = float(ask.get("latency_ms", 0.0) or 0.0)
        item = (latency, str(ask.get("t", "")), question[:500])
        if len(report.slowest) < SLOWEST:
            heapq.heappush(report.slowest, item)
        elif item > report.slowest[0]:
            heapq.heapreplace(report.slowest, item)
        seen += 1  # a reservoir sample of the latencies
        if len(report.latencies) < latency_sample:
            report.latencies.append(latency)
        else:
            j = sampler.randrange(seen)
            if j < latency_sample:
                report.latencies[j] = latency
        if abstained or rating == "down":
            key = _key(question)
            gap = report.gaps.get(key)
            if gap is None:
                if len(report.gaps) >= MAX_GAP_QUESTIONS:
                    report.gaps_not_kept += 1
                    continue
                gap = report.gaps[key] = Gap(question=question[:500])
            gap.count += 1
            gap.refused += abstained
            gap.down += rating == "down"
            gap.closest.update(str(r) for r in ask.get("closest", [])[:5])
    return report


def cluster_gaps(
    report: Report, embedder: _Embedder | None, *, threshold: float = DEFAULT_THRESHOLD
) -> None:
    """Fill ``report.clusters``: by meaning with ``embedder``, else by identical text."""
    gaps = sorted(report.gaps.values(), key=lambda g: (-g.count, g.question))
    if not gaps:
        report.clusters = []
        return
    groups: list[list[Gap]] = []
    if embedder is None:
        groups = [[g] for g in gaps]
        report.clustered_by = "identical text (no index given: pass --index to group by meaning)"
    else:
        vectors = np.asarray(embedder.embed_passages([g.question for g in gaps]), np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        sums = np.zeros_like(vectors)  # at most one cluster per question
        centroids = np.zeros_like(vectors)  # the sums, unit length
        k = 0
        for gap, vec in zip(gaps, vectors, strict=True):
            cos = centroids[:k] @ vec
            best = int(np.argmax(cos)) if k else -1
            if best < 0 or cos[best] < threshold:
                groups.append([gap])
                sums[k] = centroids[k] = vec
                k += 1
            else:
                groups[best].append(gap)
                sums[best] += vec
                centroids[best] = sums[best] / max(float(np.linalg.norm(sums[best])), 1e-12)
        report.clustered_by = f"meaning (cosine >= {threshold:g})"
    clusters: list[dict[str, Any]] = []
    for group in groups:
        closest: Counter[str] = Counter()
        for g in group:
            closest.update(g.closest)
        clusters.append(
            {
                "count": sum(g.count for g in group),
                "refused": sum(g.refused for g in group),
                "down_voted": sum(g.down for g in group),
                "questions": [{"question": g.question, "count": g.count} for g in group[:10]],
                "distinct_questions": len(group),
                "closest_sections": closest.most_common(3),
            }
        )
    clusters.sort(key=lambda c: -c["count"])
    report.clusters = clusters[:50]


def index_outline(chunks: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The pages and sections (``page#anchor``) of an index, in order, each once."""
    pages: dict[str, None] = {}
    sections: dict[str, None] = {}
    for c in chunks:
        pages.setdefault(str(c["page"]), None)
        sections.setdefault(f"{c['page']}#{c['anchor']}" if c["anchor"] else str(c["page"]), None)
    return list(pages), list(sections)


def threshold_for(model: str) -> float:
    return CLUSTER_THRESHOLDS.get(model, DEFAULT_THRESHOLD)


def _share(part: int, whole: int) -> float:
    """``part`` of ``whole``, 0..1 (0 when there is no whole)."""
    return round(part / whole, 4) if whole else 0.0
