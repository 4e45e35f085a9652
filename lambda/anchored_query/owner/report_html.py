"""The report as one self-contained HTML page (inline CSS and SVG, no script, nothing
fetched) and as Markdown for a CI job or a pull-request comment.

Every value from the log is escaped: a question is reader input.
"""

from __future__ import annotations

from html import escape
from typing import Any

CSS = """
body{font:15px/1.5 system-ui,sans-serif;margin:2rem auto;max-width:64rem;padding:0 1rem;
color:#1b1f24;background:#fff}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.3rem .5rem;
border-bottom:1px solid #eaeef2;vertical-align:top}td.n,th.n{text-align:right}
.cards{display:flex;gap:1rem;flex-wrap:wrap}.card{border:1px solid #d0d7de;border-radius:6px;
padding:.6rem 1rem;min-width:8rem}.card b{display:block;font-size:1.4rem}
.gap{border:1px solid #d0d7de;border-radius:6px;padding:.5rem 1rem;margin:.8rem 0}
.muted{color:#57606a}code{background:#f6f8fa;padding:0 .2rem}
"""
ONE = frozenset({1})
COLOURS = {"answered": "#2da44e", "refused": "#cf222e", "fallen_back": "#bf8700"}


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "–"


def _days_svg(per_day: list[dict[str, Any]]) -> str:
    """Questions per day: stacked bars, answered under refused."""
    if not per_day:
        return '<p class="muted">No questions in this period.</p>'
    width, height, pad = 720, 180, 24
    top = max(d["answered"] + d["refused"] for d in per_day) or 1
    bar = min((width - 2 * pad) / len(per_day), 48.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height + 30}" '
        f'width="100%" role="img" aria-label="Questions per day">'
    ]
    for i, d in enumerate(per_day):
        x = pad + i * bar
        y = height
        for key in ("answered", "refused"):
            h = (height - pad) * d[key] / top
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(bar - 2, 1):.1f}" height="{h:.1f}" '
                f'fill="{COLOURS[key]}"><title>{_e(d["day"])}: {int(d[key])} {key}</title></rect>'
            )
    parts.append(f'<text x="{pad}" y="{height + 20}" font-size="12">{_e(per_day[0]["day"])}</text>')
    parts.append(
        f'<text x="{width - pad}" y="{height + 20}" font-size="12" text-anchor="end">'
        f"{_e(per_day[-1]['day'])}</text>"
    )
    parts.append(f'<text x="{pad}" y="14" font-size="12">max {top}/day</text></svg>')
    return "".join(parts)


def _share_svg(data: dict[str, Any]) -> str:
    """One bar: answered / refused, the fallen-back share marked in the answered part."""
    total = data["questions"] or 1
    width = 720
    answered = width * data["answered"] / total
    fell = width * data["fallen_back"] / total
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} 24" width="100%" '
        'role="img" aria-label="Answered and refused">'
        f'<rect x="0" y="0" width="{answered:.1f}" height="24" fill="{COLOURS["answered"]}"/>'
        f'<rect x="{answered - fell:.1f}" y="0" width="{fell:.1f}" height="24" '
        f'fill="{COLOURS["fallen_back"]}"/>'
        f'<rect x="{answered:.1f}" y="0" width="{width - answered:.1f}" height="24" '
        f'fill="{COLOURS["refused"]}"/></svg>'
    )


def _table(head: list[str], rows: list[list[Any]], numeric: frozenset[int] = frozenset()) -> str:
    if not rows:
        return '<p class="muted">None.</p>'
    th = "".join(
        f"<th{' class=n' if i in numeric else ''}>{_e(h)}</th>" for i, h in enumerate(head)
    )
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=n' if i in numeric else ''}>{_e(v)}</td>" for i, v in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def render_html(data: dict[str, Any], *, title: str = "Anchored: what readers asked") -> str:
    """The report (``Report.to_json()``) as a self-contained HTML page."""
    q = data["questions"]
    period = f"{data['period']['since'] or 'start'} – {data['period']['until'] or 'now'}"
    log = data["log"]
    cards = [
        ("questions", q),
        ("answered", _pct(data["answered"], q)),
        ("refused", _pct(data["refused"], q)),
        ("fell back to quotes", _pct(data["fallen_back"], q)),
        ("helpful / not", f"{data['feedback']['up']} / {data['feedback']['down']}"),
        ("p50 latency", f"{data['latency_ms']['p50']:.0f} ms"),
    ]
    out = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; img-src data:\">",
        f"<meta name=viewport content='width=device-width'><title>{_e(title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1><p class=muted>{_e(period)} · {log['records']} records from "
        f"{log['objects']} objects",
    ]
    if log["skipped_objects"] or log["skipped_records"]:
        out.append(
            f" · skipped {log['skipped_objects']} unreadable objects and "
            f"{log['skipped_records']} foreign records"
        )
    out.append("</p><div class=cards>")
    out += [f"<div class=card><b>{_e(v)}</b>{_e(k)}</div>" for k, v in cards]
    out.append("</div><h2>Questions over time</h2>" + _days_svg(data["per_day"]))
    out.append("<h2>Answered, fallen back, refused</h2>" + _share_svg(data) if q else "")
    out.append("<h2 id=gaps>Coverage gaps</h2>")
    out.append(
        f"<p class=muted>Refused or down-voted questions, grouped by {_e(data['clustered_by'])}; "
        "the sections that came closest are where to extend the docs.</p>"
    )
    if not data["coverage_gaps"]:
        out.append("<p class=muted>No refused or down-voted questions in this period.</p>")
    for n, c in enumerate(data["coverage_gaps"][:20], start=1):
        questions = "".join(
            f"<li>{_e(x['question'])} <span class=muted>×{x['count']}</span></li>"
            for x in c["questions"]
        )
        closest = ", ".join(f"<code>{_e(ref)}</code> ({k})" for ref, k in c["closest_sections"])
        out.append(
            f"<div class=gap><b>Gap {n}: {c['count']} question{'s' * (c['count'] != 1)}</b> "
            f"<span class=muted>({c['refused']} refused, {c['down_voted']} down-voted, "
            f"{c['distinct_questions']} distinct)</span><ul>{questions}</ul>"
            f"<p>Closest sections: {closest or '–'}</p></div>"
        )
    out.append("<h2>Most cited sections</h2>")
    out.append(_table(["section", "citations"], [list(x) for x in data["most_cited"]], ONE))
    out.append("<h2>Least cited sections</h2>")
    out.append(_table(["section", "citations"], [list(x) for x in data["least_cited"]], ONE))
    out.append("<h2>Pages never cited</h2>")
    never = data["pages_never_cited"]
    out.append(
        "<ul>" + "".join(f"<li><code>{_e(p)}</code></li>" for p in never[:200]) + "</ul>"
        if never
        else "<p class=muted>None (or no index given).</p>"
    )
    out.append("<h2>What verification decided</h2>")
    verification = data.get("verification") or {"sentences": 0, "checks": []}
    checked = verification["sentences"]
    out.append(
        f"<p class=muted>Of {checked} sentences the LLM wrote, per check: the share it removed "
        "(conclusive) and the share shown marked as not verified (inconclusive).</p>"
    )
    rows = [
        [c["check"], f"{c['removed_share']:.1%}", f"{c['unverified_share']:.1%}"]
        for c in verification["checks"]
    ]
    out.append(_table(["check", "removed", "not verified"], rows, frozenset({1, 2})))
    if verification.get("pasted"):
        out.append(f"<p>{_e(_pasted_line(verification))}</p>")
    out.append("<h2>Slowest answers</h2>")
    rows = [[f"{s['latency_ms']:.0f} ms", s["t"][:19], s["question"]] for s in data["slowest"]]
    out.append(_table(["latency", "time", "question"], rows, frozenset({0})))
    out.append("</body></html>\n")
    return "".join(out)


def _pasted_line(verification: dict[str, Any]) -> str:
    return (
        f"LLM replies that only pasted passage text: {verification['pasted']}; "
        f"shown as the closest passages (the quoted answer would refuse the question): "
        f"{verification['pasted_refused']}."
    )


def _md(value: Any) -> str:
    """Text safe in a Markdown table cell (GitHub renders inline HTML: escape it too)."""
    text = escape(" ".join(str(value).split()), quote=False)
    for ch in "\\`*_[]|":
        text = text.replace(ch, "\\" + ch)
    return text


def render_markdown(data: dict[str, Any]) -> str:
    """A short summary for a CI job log or a pull-request comment."""
    q = data["questions"]
    lines = [
        f"## Anchored: {q} questions ({data['period']['since'] or 'start'} – "
        f"{data['period']['until'] or 'now'})",
        "",
        f"- answered {_pct(data['answered'], q)}, refused {_pct(data['refused'], q)}, "
        f"fell back to quotes {_pct(data['fallen_back'], q)}",
        f"- feedback: {data['feedback']['up']} helpful, {data['feedback']['down']} not",
        f"- latency p50 {data['latency_ms']['p50']:.0f} ms, p90 {data['latency_ms']['p90']:.0f} ms",
    ]
    if data["log"]["skipped_objects"] or data["log"]["skipped_records"]:
        lines.append(
            f"- skipped {data['log']['skipped_objects']} unreadable objects, "
            f"{data['log']['skipped_records']} foreign records"
        )
    lines += ["", "### Coverage gaps", ""]
    if data["coverage_gaps"]:
        lines += ["| # | questions | example | closest section |", "|---|---|---|---|"]
        for n, c in enumerate(data["coverage_gaps"][:10], start=1):
            closest = c["closest_sections"][0][0] if c["closest_sections"] else "–"
            example = c["questions"][0]["question"]
            lines.append(f"| {n} | {c['count']} | {_md(example)} | {_md(closest)} |")
    else:
        lines.append("None in this period.")
    verification = data.get("verification") or {"sentences": 0, "checks": []}
    if verification["checks"]:
        lines += ["", f"### Verification ({verification['sentences']} sentences)", ""]
        lines += ["| check | removed | not verified |", "|---|---|---|"]
        for c in verification["checks"]:
            lines.append(
                f"| {_md(c['check'])} | {c['removed_share']:.1%} | {c['unverified_share']:.1%} |"
            )
    if verification.get("pasted"):
        lines += ["", _pasted_line(verification)]
    never = data["pages_never_cited"]
    if never:
        lines += ["", f"Pages never cited: {len(never)}"]
    return "\n".join(lines) + "\n"
