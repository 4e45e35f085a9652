"""Test harness for the widget: two small MkDocs sites + a fake /v1 API on one port.

Builds tests/browser/pages/docs with Material (served under /material/) and with
MkDocs' default theme (under /mkdocs/), injects the widget exactly as the plugin
does (stylesheet, #anchored-config, module script), serves plugin/assets/* live
under <site>/assets/anchored/, and answers /v1/ask, /v1/search, /v1/feedback and
/v1/health with the canned replies in fixtures.json (picked by keyword in the
question). Feedback and ask bodies are recorded for the tests.

    python tests/browser/harness.py --port 0     # prints "READY http://127.0.0.1:PORT"
"""

from __future__ import annotations

import argparse
import contextlib
import json
import mimetypes
import os
import posixpath
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

HERE = Path(__file__).resolve().parent
ASSETS = HERE.parent.parent / "plugin" / "assets"
FIXTURES = json.loads((HERE / "fixtures.json").read_text(encoding="utf-8"))


def _add_links() -> None:
    """Give every canned citation the API's `link`, made by anchored_query.citations.links."""
    sys.path.insert(0, str(HERE.parents[1] / "lambda"))
    from anchored_query.citations.links import citation_link

    for reply in FIXTURES.values():
        for c in reply.get("citations", []) if isinstance(reply, dict) else []:
            c["link"] = citation_link(c["url"], c.get("highlight") or c["passage"])


_add_links()
SITES = {
    "material": HERE / "pages" / "material.yml",
    "mkdocs": HERE / "pages" / "mkdocs.yml",
    "instant": HERE / "pages" / "material-instant.yml",  # Material with navigation.instant
}
SLOW_SECONDS = 4.0
# Canned answers stream (Accept: text/event-stream) one sentence per STREAM_GAP seconds;
# "trickle" in the question makes it TRICKLE_GAP.
STREAM_GAP = 0.03
TRICKLE_GAP = 0.6

# Keyword in the question (lower case) -> fixture name.
ROUTES = [
    (("xss", "<script", "<img"), "xss"),
    (("weather", "abstain"), "abstain"),
    (("closest",), "closest"),  # before "quote": a tentative extractive answer
    (("extractive", "quote"), "extractive"),
    (("markdown",), "markdown"),  # before "down", which it contains
    (("down", "503"), "down"),
    (("busy", "429"), "busy"),
]

# Pages built without a Markdown twin: the page menu's "Copy page" says so.
NO_TWIN = {"about.md"}

STATE: dict[str, list[dict]] = {"feedback": [], "asks": []}
LOCK = threading.Lock()


def build_sites(out: Path, origin: str) -> dict[str, Path]:
    built = {}
    for name, config in SITES.items():
        dest = out / name
        if name == "instant":
            # Material only swaps pages for URLs in its sitemap, host and port included:
            # give this build the harness's real address.
            wrapper = out / f"{name}.yml"
            wrapper.write_text(
                f"INHERIT: {config}\nsite_url: {origin}/{name}/\n"
                f"docs_dir: {config.parent / 'docs'}\n",
                encoding="utf-8",
            )
            config = wrapper
        subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(config), "-d", str(dest)],
            check=True,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        )
        write_twins(HERE / "pages" / "docs", dest)
        built[name] = dest
    return built


def write_twins(docs: Path, site: Path) -> None:
    """The Markdown twin beside each page's HTML, as the build writes it (directory URLs:
    ``foo/bar.md`` → ``foo/bar/index.md``, the home page ``index.md``), here the page's
    own source; none for NO_TWIN."""
    for source in sorted(docs.rglob("*.md")):
        rel = source.relative_to(docs).as_posix()
        if rel in NO_TWIN:
            continue
        folder = rel[: -len(".md")]
        twin = "index.md" if rel == "index.md" else folder.removesuffix("/index") + "/index.md"
        (site / twin).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")


def widget_tags(root: str, page: str, overrides: dict) -> str:
    """The tags the plugin injects before </head> (see tests/browser/README.md)."""
    config = {
        "endpoint": "",
        "root": root,
        "page": page,
        "placeholder": "Ask the docs…",
        "starters": ["How do I configure the endpoint?", "Which options are there?"],
        "attach": "",
        "shortcut": "a",
        "title": "Ask the docs",
        "scopes": True,
        "search_ask": True,
        "timeout": 30000,
        "page_menu": ["copy", "view", "chatgpt", "claude", "mcp"],
        "ask_links": True,
        "site_name": "Anchored test site",
    }
    config.update(overrides)
    data = json.dumps(config, ensure_ascii=False).replace("</", "<\\/")
    return (
        f'<link rel="stylesheet" href="{root}assets/anchored/anchored.css">\n'
        f'<script id="anchored-config" type="application/json">{data}</script>\n'
        f'<script type="module" src="{root}assets/anchored/anchored.js"></script>\n'
    )


def pick_fixture(question: str) -> str:
    q = question.lower()
    for words, name in ROUTES:
        if any(w in q for w in words):
            return name
    return "default"


class Handler(BaseHTTPRequestHandler):
    sites: ClassVar[dict[str, Path]] = {}
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: object) -> None:  # quiet unless asked
        if self.server.verbose:  # type: ignore[attr-defined]
            super().log_message(fmt, *args)

    def send(self, status: int, body: bytes, ctype: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status: int, obj: object, headers: dict | None = None) -> None:
        self.send(status, json.dumps(obj).encode(), "application/json", headers)

    def read_json(self) -> object:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"null")
        except ValueError:
            return None

    # ---- GET: pages, assets, /v1/search, /v1/health, recorded calls
    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        if path == "/v1/health":
            return self.send_json(200, {"build_id": "test-build-1", "model": "fake", "chunks": 12})
        if path == "/v1/search":
            q = parse_qs(url.query).get("q", [""])[0]
            results = [
                {
                    "url": c["url"],
                    "chunk_id": c["chunk_id"],
                    "title": c["title"],
                    "heading_path": c["heading_path"],
                    "score": 1.0 / c["n"],
                    "snippet": c["passage"][:160],
                }
                for c in FIXTURES["default"]["citations"]
            ]
            return self.send_json(
                200,
                {
                    "results": results if q else [],
                    "build_id": "test-build-1",
                    "timings_ms": {"total": 3},
                },
            )
        if path == "/__harness/feedback":
            with LOCK:
                return self.send_json(200, STATE["feedback"])
        if path == "/__harness/asks":
            with LOCK:
                return self.send_json(200, STATE["asks"])
        if path == "/":
            body = (
                b'<!doctype html><title>harness</title><a href="/material/">material</a> '
                b'<a href="/mkdocs/">mkdocs</a>'
            )
            return self.send(200, body, "text/html; charset=utf-8")
        return self.serve_site(path, url.query)

    do_HEAD = do_GET

    def serve_site(self, path: str, query: str) -> None:
        parts = path.lstrip("/").split("/", 1)
        site = self.sites.get(parts[0])
        if site is None:
            return self.send(404, b"not found", "text/plain")
        rel = posixpath.normpath(parts[1] if len(parts) > 1 else "")
        if rel.startswith(".."):
            return self.send(404, b"not found", "text/plain")
        if rel.startswith("assets/anchored/"):
            file = ASSETS / rel[len("assets/anchored/") :]
        else:
            file = site / ("" if rel == "." else rel)
            if file.is_dir():
                if not path.endswith("/"):
                    return self.send(301, b"", "text/plain", {"Location": path + "/"})
                file = file / "index.html"
        if not file.is_file():
            return self.send(404, b"not found", "text/plain")
        ctype = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if file.suffix in (".js", ".mjs"):
            ctype = "text/javascript"
        body = file.read_bytes()
        if file.suffix == ".html":
            rel_file = file.relative_to(site).as_posix()
            folder = posixpath.dirname(rel_file)
            page = (folder + "/" if folder else "") if file.name == "index.html" else rel_file
            depth = page.count("/")
            root = "../" * depth if depth else "./"
            overrides = {}
            raw = parse_qs(query).get("harness-config", [""])[0]
            if raw:
                overrides = json.loads(raw)
            html = body.decode("utf-8").replace(
                "</head>", widget_tags(root, page, overrides) + "</head>", 1
            )
            body = html.encode("utf-8")
            ctype = "text/html; charset=utf-8"
        self.send(200, body, ctype)

    def send_stream(self, reply: dict, question: str) -> None:
        """A canned answer as the /v1/ask event stream (TEAM.md "Interfaces"): stage,
        sources, one sentence per item, final. "stream error" in the question ends it with
        an error event after the first sentence, "cut off" ends it there with neither."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        gap = TRICKLE_GAP if "trickle" in question else STREAM_GAP

        def event(name: str, data: object) -> None:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

        sources = [
            {k: c.get(k) for k in ("n", "url", "title", "heading_path", "link")}
            for c in reply.get("citations", [])
        ]
        try:
            event("stage", {"stage": "retrieving"})
            time.sleep(gap)
            event(
                "sources",
                {"sources": sources, "passages_considered": reply.get("passages_considered", 0)},
            )
            event("stage", {"stage": "generating"})
            for i, item in enumerate(reply.get("answer", [])):
                time.sleep(gap)
                event("sentence", {"index": i, "item": item})
                if i == 0 and "stream error" in question:
                    return event(
                        "error", {"error": {"code": "llm_failed", "message": "the model failed"}}
                    )
                if i == 0 and "cut off" in question:
                    return None
            event("stage", {"stage": "verifying"})
            time.sleep(gap)
            event("final", reply)
        except (BrokenPipeError, ConnectionResetError):  # the reader cancelled
            pass
        return None

    # ---- POST: /v1/ask, /v1/feedback
    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        data = self.read_json()
        if path == "/__harness/reset":
            with LOCK:
                STATE["feedback"].clear()
                STATE["asks"].clear()
            return self.send_json(200, {"ok": True})
        if path == "/v1/feedback":
            if (
                not isinstance(data, dict)
                or data.get("rating") not in ("up", "down")
                or not data.get("answer_id")
            ):
                return self.send_json(
                    400,
                    {
                        "error": {
                            "code": "bad_request",
                            "message": "answer_id and rating are required",
                        }
                    },
                )
            with LOCK:
                STATE["feedback"].append(data)
            return self.send_json(200, {"ok": True})
        if path == "/v1/ask":
            if not isinstance(data, dict) or not str(data.get("question") or "").strip():
                return self.send_json(
                    400, {"error": {"code": "bad_request", "message": "question is required"}}
                )
            with LOCK:
                STATE["asks"].append(data)
            question = str(data["question"])
            if "garbage" in question.lower():
                return self.send(200, b"<html>not json", "text/html")
            if "slow" in question.lower():
                time.sleep(SLOW_SECONDS)
            fixture = FIXTURES[pick_fixture(question)]
            if "status" in fixture:
                return self.send_json(fixture["status"], fixture["body"], fixture.get("headers"))
            accept = self.headers.get("Accept") or ""
            if "text/event-stream" in accept and "buffered" not in question.lower():
                return self.send_stream(fixture, question.lower())
            return self.send_json(200, fixture)
        return self.send_json(404, {"error": {"code": "not_found", "message": "no such route"}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="anchored-harness-") as tmp:
        server = ThreadingHTTPServer((args.host, args.port), Handler)
        Handler.sites = build_sites(Path(tmp), f"http://{args.host}:{server.server_address[1]}")
        server.daemon_threads = True
        server.verbose = args.verbose  # type: ignore[attr-defined]
        print(f"READY http://{args.host}:{server.server_address[1]}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()


if __name__ == "__main__":
    main()
