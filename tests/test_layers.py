"""The query function's layout holds: every module in a stage package, imports only
downward (its own stage, lower stages, the top-level records), and no import circles.

Every import counts: at module level, inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lambda" / "anchored_query"

# From the bottom up (anchored_query/__init__.py says what each owns).
STAGES = (
    "llm",
    "store",
    "guard",
    "question",
    "retrieval",
    "citations",
    "answer",
    "owner",
    "engine",
    "serve",
)
RECORDS = {"types", "errors", "settings"}  # importable from every stage
TOP_LEVEL = RECORDS | {"engine"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports (a name imported from a package counts as
    its submodule when it is one)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "anchored_query"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "anchored_query":
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in known else module)
    return {m for m in found if m in known and m != name}


def stage_of(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) == 1:
        return "package"  # anchored_query/__init__.py: a docstring
    if len(parts) == 2 and parts[1] in RECORDS:
        return "records"
    return parts[1] if parts[1] in STAGES else None


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def test_every_module_sits_in_a_stage_package_or_is_a_top_level_record() -> None:
    strays = [
        name
        for name in modules()
        if stage_of(name) is None
        or (len(name.split(".")) == 2 and name.split(".")[1] not in TOP_LEVEL | set(STAGES))
    ]
    assert strays == []


def test_every_stage_package_says_what_it_owns() -> None:
    for stage in STAGES:
        init = PACKAGE / stage / "__init__.py"
        if stage == "engine":
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 80, f"{stage}/__init__.py has no docstring"


def _allowed(importer: str, imported: str) -> bool:
    top = imported.split(".")[1]
    if top in RECORDS:
        return True
    src, dst = stage_of(importer), stage_of(imported)
    if src == "package" or dst == "package":
        return False
    assert src is not None and dst is not None
    if src == "records":  # the records import no stage
        return False
    return STAGES.index(dst) <= STAGES.index(src)


def test_imports_only_run_downward() -> None:
    upward = sorted(
        f"{importer} -> {imported}"
        for importer, targets in graph().items()
        for imported in targets
        if not _allowed(importer, imported)
    )
    assert upward == []


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the list of modules around it, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_circles() -> None:
    assert find_cycle(graph()) is None


@pytest.mark.parametrize(
    ("edges", "circle"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
    ],
)
def test_the_circle_finder_finds_circles(edges: dict[str, set[str]], circle: list[str]) -> None:
    assert find_cycle(edges) == circle


def test_an_upward_import_is_refused() -> None:
    assert not _allowed("anchored_query.store.source", "anchored_query.answer.response")
    assert not _allowed("anchored_query.types", "anchored_query.store.source")
    assert _allowed("anchored_query.serve.app", "anchored_query.engine")
    assert not _allowed("anchored_query.engine", "anchored_query.serve.app")
