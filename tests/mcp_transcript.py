"""A real MCP session as a picture: the ``mcp`` SDK's own client starts ``anchored mcp``
over stdio on a built index, lists the tools and calls each one; the calls and the
results exactly as the client received them (their text content, what an agent's model
reads) are laid out as a terminal-style HTML page, and headless Chromium saves it as PNG.

``tests/test_mcp_screenshot.py`` runs it on the built qa site and checks the transcript;
the docs' image (site/images/mcp-session.png) is made with::

    ANCHORED_MCP_SHOTS=site/images .venv/bin/python -m pytest -q tests/test_mcp_screenshot.py

or directly: ``python tests/mcp_transcript.py --index .anchored/index --out shot.png``.
"""

from __future__ import annotations

import argparse
import html
import importlib.metadata
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

WIDTH = 104  # characters a line in the picture; longer lines wrap (links are cut anywhere)
LINE_PX = 19  # the CSS line height below
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")

# What the agent does in the picture: one call of each tool, then a wrong ref.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search_docs", {"query": "change the port", "k": 2}),
    ("ask_docs", {"question": "How do I change the port?"}),
    ("read_section", {"ref": "guide/configuration/#port"}),
    ("read_section", {"ref": "guide/nowhere/#port"}),
]


@dataclass
class Step:
    """One request of the session and what came back."""

    request: str  # e.g. 'tools/call search_docs {"query": …}'
    reply: str  # the result's text content, as received
    is_error: bool = False
    data: dict[str, Any] | None = None  # structuredContent, for the test's checks


@dataclass
class Transcript:
    command: list[str]
    server: str  # serverInfo name and version from initialize
    protocol: str
    tools: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)


def _text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def record(
    index: Path, workdir: Path, calls: list[tuple[str, dict[str, Any]]] = CALLS
) -> Transcript:
    """Run the session against ``anchored mcp --index INDEX`` (the installed console script)."""
    anchored = str(Path(sys.executable).parent / "anchored")
    env = {**os.environ, "ANCHORED_CACHE_DIR": str(workdir / "cache"), "ANCHORED_REFRESH_S": "0"}
    params = StdioServerParameters(
        command=anchored, args=["mcp", "--index", str(index)], env=env, cwd=str(workdir)
    )
    shown_command = ["anchored", "mcp", "--index", "/".join(index.parts[-2:])]

    async def main() -> Transcript:
        connection: AbstractAsyncContextManager[Any] = stdio_client(params)
        with anyio.fail_after(180):
            async with connection as (read, write), ClientSession(read, write) as session:
                init = await session.initialize()
                out = Transcript(
                    command=shown_command,
                    server=f"{init.serverInfo.name} {init.serverInfo.version}",
                    protocol=str(init.protocolVersion),
                )
                listed = await session.list_tools()
                out.tools = [t.name for t in listed.tools]
                described = "\n".join(
                    f"{t.name}({', '.join(t.inputSchema.get('properties', {}))})  {t.title or ''}"
                    for t in listed.tools
                )
                out.steps.append(Step("tools/list", described))
                for name, arguments in calls:
                    result = await session.call_tool(name, arguments)
                    request = f"tools/call {name} {json.dumps(arguments, ensure_ascii=False)}"
                    out.steps.append(
                        Step(request, _text(result), result.isError, result.structuredContent)
                    )
                return out

    return anyio.run(main)


def wrap(text: str) -> list[str]:
    lines: list[str] = []
    for line in text.splitlines() or [""]:
        indent = len(line) - len(line.lstrip(" "))
        lines.extend(
            textwrap.wrap(
                line,
                WIDTH,
                subsequent_indent=" " * (indent + 2),
                break_long_words=True,
                break_on_hyphens=False,
                drop_whitespace=True,
            )
            or [""]
        )
    return lines


def render(t: Transcript) -> tuple[str, int]:
    """The transcript as an HTML page (every text escaped) and the pixel height it needs."""
    sdk = importlib.metadata.version("mcp")
    rows: list[tuple[str, str]] = [
        ("dim", f"# the mcp {sdk} SDK's ClientSession, over stdio, talking to:"),
        ("cmd", "$ " + " ".join(t.command)),
        ("dim", f"# initialize: server {t.server}, protocol {t.protocol}"),
        ("", ""),
    ]
    for step in t.steps:
        rows.extend(("req", line) for line in wrap("→ " + step.request))
        kind = "err" if step.is_error else "out"
        rows.extend((kind, line) for line in wrap(step.reply))
        rows.append(("", ""))
    body = "".join(
        f'<div class="{kind}">{html.escape(line) or "&nbsp;"}</div>' for kind, line in rows
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8"><style>
html, body {{ margin: 0; background: #1e1f22; }}
.term {{ margin: 16px; border-radius: 8px; overflow: hidden; background: #111214;
  box-shadow: 0 2px 8px rgba(0,0,0,.5); }}
.bar {{ background: #2b2d31; color: #b5bac1; font: 13px sans-serif; padding: 7px 12px; }}
.lines {{ padding: 12px 16px; font: 14px/{LINE_PX}px "DejaVu Sans Mono", monospace;
  white-space: pre; color: #dbdee1; }}
.dim {{ color: #80848e; }} .cmd {{ color: #ffffff; font-weight: bold; }}
.req {{ color: #7cc4fa; }} .err {{ color: #f38b8b; }}
</style></head><body><div class="term"><div class="bar">an agent's MCP session with
anchored mcp (stdio)</div><div class="lines">{body}</div></div></body></html>"""
    height = len(rows) * LINE_PX + 16 * 2 + 31 + 12 * 2 + 8
    return page, height


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def screenshot(page: str, height: int, out: Path, width: int = 1000) -> Path:
    """Headless Chromium renders the page at WIDTH x HEIGHT and writes OUT."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "transcript.html"
        src.write_text(page, encoding="utf-8")
        shot = Path(tmp) / "shot.png"
        subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                f"--user-data-dir={Path(tmp) / 'profile'}",
                f"--window-size={width},{height}",
                f"--screenshot={shot}",
                src.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, out)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, default=Path(".anchored/index"))
    parser.add_argument("--out", type=Path, default=Path("mcp-session.png"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        transcript = record(args.index.resolve(), Path(tmp))
    page, height = render(transcript)
    screenshot(page, height, args.out)
    print(f"wrote {args.out} ({len(transcript.steps)} requests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
