"""The quoted window: what the best line brings with it (quote_window.py).

Sections are made as the index records them (prose lines, code blocks with their
spans and language), so each test states one rule of the window on one section.
"""

from __future__ import annotations

from anchored_query.answer.quote_window import SHORT_SECTION, Section, quote_window
from anchored_query.citations.units import Unit, section_units
from passages import make_passage

# Prose that pads a section past SHORT_SECTION without matching anything.
FILLER = [
    f"Background paragraph number {n} says nothing the reader asked about." for n in range(14)
]


def _section(parts: list[tuple[str, str]]) -> Section:
    """A section of ("prose" | "code", text) parts, code recorded as the index does."""
    text, code, offset = "", [], 0
    for kind, part in parts:
        if text:
            text += "\n"
            offset += 1
        if kind == "code":
            code.append([offset, offset + len(part), "python"])
        text += part
        offset += len(part)
    chunks = [{"type": "text", "offsets": (0, len(text))}]
    units = section_units(text, chunks, code)
    passage = make_passage(
        text,
        chunk_ids=["c"],
        section_id="page/#s",
        anchor="s",
        heading_path=["Section"],
        highlight="",
        score=1.0,
    )
    return Section(passage, text, units, frozenset(), 1.0)


def _unit(section: Section, start: str) -> Unit:
    return next(u for u in section.units if u.text.startswith(start))


def _window(section: Section, start: str) -> list[Unit]:
    """The window quoted around the unit starting with ``start``, the only one scored."""
    best = _unit(section, start)
    return quote_window(section, best, {id(best): 1.0}, 1.0)


def _texts(window: list[Unit]) -> list[str]:
    return [u.text.split("\n")[0] for u in window]


def test_prose_brings_its_example_behind_a_short_for_example() -> None:
    s = _section(
        [
            ("prose", "If you want to connect to an explicit IP address, use this extension."),
            ("prose", "For example:"),
            ("code", 'extensions = {"sni_hostname": "www.encode.io"}'),
            *(("prose", f) for f in FILLER),
        ]
    )
    assert sum(len(u.text) for u in s.units) > SHORT_SECTION
    window = _window(s, "If you want")
    assert _texts(window) == [
        "If you want to connect to an explicit IP address, use this extension.",
        "For example:",
        'extensions = {"sni_hostname": "www.encode.io"}',
    ]


def test_a_long_line_ending_in_a_colon_is_not_taken_as_the_example_s_lead_in() -> None:
    s = _section(
        [
            ("prose", "If you want to connect to an explicit IP address, use this extension."),
            ("prose", "Another feature, described at length in what follows, works like this:"),
            ("code", "unrelated()"),
            *(("prose", f) for f in FILLER),
        ]
    )
    assert _texts(_window(s, "If you want")) == [_unit(s, "If you want").text]


def test_content_tab_labels_of_several_words_still_bring_one_block_each() -> None:
    s = _section(
        [
            ("prose", "Two types of code actions are supported: edit and view:"),
            ("prose", "Edit this page"),
            ("prose", "View source of this page"),
            ("code", "theme:\n  features:\n    - content.action.edit"),
            ("code", "theme:\n  features:\n    - content.action.view"),
            *(("prose", f) for f in FILLER),
        ]
    )
    window = _window(s, "Two types")
    assert [u.kind for u in window] == ["prose", "prose", "prose", "code", "code"]
    assert "content.action.view" in window[-1].text


def test_a_lead_in_taken_in_above_a_label_brings_its_block() -> None:
    s = _section(
        [
            ("prose", "Set the theme's palette in mkdocs.yml:"),
            ("prose", "Light mode"),
            ("prose", "Dark mode"),
            ("code", "palette:\n  scheme: default"),
            ("code", "palette:\n  scheme: slate"),
            *(("prose", f) for f in FILLER),
        ]
    )
    window = _window(s, "Light mode")  # a tab's label matched the question best
    assert [u.kind for u in window] == ["prose", "prose", "prose", "code", "code"]


def test_a_section_up_to_short_section_is_quoted_whole() -> None:
    # An option's section (~450 characters): its description, example and note.
    s = _section(
        [
            ("prose", "Determines additional directories to watch when running mkdocs serve."),
            ("code", "watch:\n  - directory_a\n  - directory_b"),
            ("prose", "Allows a custom default to be set without passing -w every time."),
            ("prose", "Note"),
            ("prose", "The paths provided via the configuration file are relative to it."),
            *(("prose", f) for f in FILLER[:3]),
        ]
    )
    assert 400 < sum(len(u.text) for u in s.units) <= SHORT_SECTION
    window = _window(s, "Allows a custom")
    assert len(window) == len(s.units)
    assert any("directory_a" in u.text for u in window)
