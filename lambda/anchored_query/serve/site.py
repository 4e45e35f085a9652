"""The built site as ``anchored serve`` serves it beside the API, with its pages'
Markdown twins by content negotiation: a request for a page that prefers
``text/markdown`` (``Accept: text/markdown``, as coding agents send) gets the twin
the build wrote beside the page's HTML (``foo/bar/index.md`` for ``foo/bar/``,
``foo.md`` for ``foo.html``; see ``site/agents.md``), and every page answer says
``Vary: Accept`` so a cache keeps the two apart. A page without a twin is served as
HTML, as before.
"""

from __future__ import annotations

import os
import stat
from pathlib import PurePosixPath

from starlette.datastructures import Headers
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from build_index.llmstxt import twin_path

__all__ = ["SiteFiles", "prefers_markdown", "twin_of"]

_MARKDOWN = ("text/markdown", "text/x-markdown")
MARKDOWN_TYPE = "text/markdown; charset=utf-8"


def prefers_markdown(accept: str) -> bool:
    """Whether an ``Accept`` header asks for Markdown over HTML: ``text/markdown`` named
    with a quality above 0 and at least that of ``text/html`` (wildcards do not count:
    a browser's ``*/*`` is no request for Markdown)."""
    markdown = html = 0.0
    for part in accept.split(","):
        fields = [f.strip() for f in part.split(";")]
        kind = fields[0].lower()
        q = 1.0
        for f in fields[1:]:
            name, _, value = f.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if kind in _MARKDOWN:
            markdown = max(markdown, q)
        elif kind == "text/html":
            html = max(html, q)
    return markdown > 0 and markdown >= html


def twin_of(path: str) -> str | None:
    """The twin's path (relative to the site) of the page a request path names, None for
    a path that names another kind of file (``assets/app.js``). The convention is the
    build's (:func:`build_index.llmstxt.twin_path`); this only turns a request path
    (``.`` for the root, no trailing slash) into the page URL it names."""
    path = path.lstrip("/")
    if path in ("", "."):
        return twin_path("")
    if path.endswith(("/", ".html", ".htm")):
        return twin_path(path)
    if "." in PurePosixPath(path).name:
        return None
    return twin_path(path + "/")


class SiteFiles(StaticFiles):
    """:class:`StaticFiles` (``html=True``) with Markdown twins for ``Accept: text/markdown``."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        page = twin_of(path.replace(os.sep, "/"))
        if page is not None and prefers_markdown(Headers(scope=scope).get("accept", "")):
            full, found = self.lookup_path(page)
            if found is not None and stat.S_ISREG(found.st_mode):
                twin = FileResponse(full, stat_result=found, media_type=MARKDOWN_TYPE)
                twin.headers["Vary"] = "Accept"
                return twin
        response = await super().get_response(path, scope)
        if page is not None:
            response.headers["Vary"] = "Accept"
        return response
