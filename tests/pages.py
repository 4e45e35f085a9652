"""Small generated sites for build tests: ``n`` pages of two sections each."""

from __future__ import annotations

from build_index.types import PageInput


def numbered_pages(n: int) -> list[PageInput]:
    """``n`` pages whose every section's text is its own (numbered), two sections a page."""
    return [
        PageInput(
            url=f"p{i}/",
            title=f"Page {i}",
            html=f'<h1 id="p{i}">Page {i}</h1><p>Section {i} explains option number {i}.</p>'
            f'<h2 id="more">More</h2><p>The server listens on port {8000 + i}.</p>',
        )
        for i in range(n)
    ]
